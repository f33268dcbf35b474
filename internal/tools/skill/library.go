package skill

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"

	"github.com/toolgate/toolgate/internal/tools"
	"go.yaml.in/yaml/v3"
)

// Library limits.
const (
	// MaxSkillBytes bounds a SKILL.md; a larger one is not offered.
	MaxSkillBytes = 256 << 10
	// MaxSkills bounds how many skills a library offers (in name order).
	MaxSkills = 256
	// maxDescription bounds a description as published in the schema.
	maxDescription = 1024
	maxVersion     = 64
)

// validName is what a skill's (and its folder's) name must look like: the
// tool-name rule.
func validName(name string) bool { return tools.ValidName(name) }

// ErrNotFound reports a skill that is not in the library (or is broken).
var ErrNotFound = errors.New("skill: no such skill")

// Library is a tenant's skill folder, opened once at start. Skills are read
// on use, so an edited library is served without a restart.
type Library struct {
	root *os.Root
}

// Open opens dir as a skill library.
func Open(dir string) (*Library, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &Library{root: root}, nil
}

// Close releases the library's root.
func (l *Library) Close() error { return l.root.Close() }

// Skill is one loaded skill.
type Skill struct {
	Name         string
	Description  string
	Version      string
	Digest       string // "sha256:" + hex of the whole SKILL.md
	Instructions string // SKILL.md after its front matter
	info         fs.FileInfo
}

// List returns the valid skills of the library in name order. A folder
// whose SKILL.md is missing, too large or malformed is left out.
func (l *Library) List() ([]*Skill, error) {
	f, err := l.root.Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	var out []*Skill
	for _, e := range entries {
		if !e.IsDir() || !validName(e.Name()) {
			continue
		}
		s, err := l.Load(e.Name())
		if err != nil {
			continue
		}
		out = append(out, s)
		if len(out) == MaxSkills {
			break
		}
	}
	return out, nil
}

// Load reads one skill by name.
func (l *Library) Load(name string) (*Skill, error) {
	if !validName(name) {
		return nil, ErrNotFound
	}
	f, err := l.root.Open(name + "/SKILL.md")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: SKILL.md is not a regular file", ErrNotFound)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSkillBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSkillBytes {
		return nil, fmt.Errorf("%w: SKILL.md exceeds %d bytes", ErrNotFound, MaxSkillBytes)
	}
	s, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	if s.Name != name {
		return nil, fmt.Errorf("%w: front matter names %q, folder is %q", ErrNotFound, s.Name, name)
	}
	s.info = info
	return s, nil
}

// frontMatter is the YAML head of a SKILL.md.
type frontMatter struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	Version     string `yaml:"version"`
}

// parse splits a SKILL.md into its front matter and instructions.
func parse(data []byte) (*Skill, error) {
	sum := sha256.Sum256(data)
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	if !strings.HasPrefix(text, "---\n") {
		return nil, errors.New("SKILL.md does not start with a --- front matter line")
	}
	head, body, ok := strings.Cut(text[4:], "\n---\n")
	if !ok {
		if head, ok = strings.CutSuffix(text[4:], "\n---"); !ok {
			return nil, errors.New("SKILL.md front matter is not closed by a --- line")
		}
	}
	var fm frontMatter
	dec := yaml.NewDecoder(bytes.NewReader([]byte(head)))
	if err := dec.Decode(&fm); err != nil {
		return nil, fmt.Errorf("SKILL.md front matter: %v", err)
	}
	switch {
	case !validName(fm.Name):
		return nil, errors.New("front matter name must be 1-64 lower-case letters, digits and inner hyphens")
	case strings.TrimSpace(fm.Description) == "":
		return nil, errors.New("front matter description is required")
	case len(fm.Description) > maxDescription:
		return nil, fmt.Errorf("front matter description exceeds %d bytes", maxDescription)
	case len(fm.Version) > maxVersion:
		return nil, fmt.Errorf("front matter version exceeds %d bytes", maxVersion)
	}
	return &Skill{
		Name:         fm.Name,
		Description:  strings.TrimSpace(fm.Description),
		Version:      strings.TrimSpace(fm.Version),
		Digest:       "sha256:" + hex.EncodeToString(sum[:]),
		Instructions: strings.TrimLeft(body, "\n"),
	}, nil
}
