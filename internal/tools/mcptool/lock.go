package mcptool

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// LockVersion is the version of the mcp.lock.json format.
const LockVersion = 1

// Lock is mcp.lock.json: per upstream (its namespace) and upstream tool
// name, the pinned digest of the tool's definition and, for review, the
// definition itself.
type Lock struct {
	Version   int                      `json:"version"`
	Upstreams map[string]*LockUpstream `json:"upstreams"`
}

// LockUpstream holds the pins of one upstream.
type LockUpstream struct {
	Tools map[string]*Pin `json:"tools"`
}

// Pin approves one definition.
type Pin struct {
	Digest      string         `json:"digest"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"input_schema"`
	Annotations map[string]any `json:"annotations,omitempty"`
}

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ReadLock reads a lock file. A missing file is an empty lock (every tool
// of a pinned upstream is then unpinned).
func ReadLock(path string) (*Lock, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &Lock{Version: LockVersion, Upstreams: map[string]*LockUpstream{}}, nil
	}
	if err != nil {
		return nil, err
	}
	var l Lock
	if err := json.Unmarshal(b, &l, json.RejectUnknownMembers(true)); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if l.Version != LockVersion {
		return nil, fmt.Errorf("%s: version %d, want %d", path, l.Version, LockVersion)
	}
	if l.Upstreams == nil {
		l.Upstreams = map[string]*LockUpstream{}
	}
	for ns, u := range l.Upstreams {
		if u == nil {
			return nil, fmt.Errorf("%s: upstream %q: null", path, ns)
		}
		for name, p := range u.Tools {
			if p == nil || !digestRE.MatchString(p.Digest) {
				return nil, fmt.Errorf("%s: upstream %q tool %q: digest must be sha256:<64 hex>", path, ns, name)
			}
		}
	}
	return &l, nil
}

// Pins returns the digests pinned for one upstream (nil when none).
func (l *Lock) Pins(namespace string) map[string]string {
	u := l.Upstreams[namespace]
	if u == nil {
		return nil
	}
	out := make(map[string]string, len(u.Tools))
	for name, p := range u.Tools {
		out[name] = p.Digest
	}
	return out
}

// Set pins defs as the definitions of one upstream, replacing its pins.
func (l *Lock) Set(namespace string, defs []Definition) {
	u := &LockUpstream{Tools: map[string]*Pin{}}
	for _, d := range defs {
		u.Tools[d.Name] = &Pin{Digest: d.Digest, Description: d.Description, InputSchema: d.InputSchema, Annotations: d.Annotations}
	}
	l.Upstreams[namespace] = u
}

// Write writes the lock atomically (a temporary file renamed over path),
// indented with sorted members so that a review diff is readable.
func (l *Lock) Write(path string) error {
	b, err := json.Marshal(l, json.Deterministic(true))
	if err != nil {
		return err
	}
	v := jsontext.Value(b)
	if err := v.Indent(jsontext.WithIndent("  ")); err != nil {
		return err
	}
	v = append(bytes.Clone(v), '\n')
	tmp, err := os.CreateTemp(filepath.Dir(path), ".mcp.lock-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(v); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// sortedNames returns the keys of m in order.
func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
