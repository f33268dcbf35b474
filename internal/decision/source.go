package decision

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/loader"
)

// manifestFile is the OPA bundle manifest; only its revision is used.
const manifestFile = ".manifest"

// errNoFolder: the policy folder is missing or not a folder. Its text names
// no host path because Status().LastError reaches policy admins over HTTP.
var errNoFolder = errors.New("policy folder is missing, unreadable or not a folder")

// source is one policy folder as read from disk: what a revision compiles
// and what identifies it.
type source struct {
	modules map[string]*ast.Module // keyed by slash path relative to the folder
	list    []Module               // sorted by path
	data    map[string]any         // data documents, rooted at data
	// revision is the manifest's revision, or "" without one.
	revision string
	// digest is the hex SHA-256 over module paths, module sources and data.
	digest string
}

// id is the revision id: the manifest revision when the folder has one,
// else a short content hash.
func (s *source) id() string {
	if s.revision != "" {
		return s.revision
	}
	return "sha256:" + s.digest[:16]
}

// fileFilter is the loader filter for policy folders. Hidden files and
// folders are skipped (editor swap files, .git, the ..data folders of
// Kubernetes config maps, whose visible symlinks still load), and only Rego
// modules and data.json / data.yaml / data.yml files load, as in an OPA
// bundle. *_test.rego modules load only when tests is set: the engine does
// not serve them. Paths named explicitly (depth 0) always load, as with
// `opa test FILE`.
func fileFilter(tests bool) loader.Filter {
	return func(_ string, info fs.FileInfo, depth int) bool {
		if depth == 0 {
			return false
		}
		name := info.Name()
		if hidden(name) {
			return true
		}
		if info.IsDir() {
			return false
		}
		switch {
		case strings.HasSuffix(name, "_test.rego"):
			return !tests
		case strings.HasSuffix(name, ".rego"):
			return false
		case name == "data.json", name == "data.yaml", name == "data.yml":
			return false
		}
		return true
	}
}

// readSource reads the policy folder dir. File-level defects (a parse error,
// bad data) are problems for the policy author; err is reserved for a
// folder that cannot be read at all.
func readSource(dir string) (*source, []Problem, error) {
	info, err := os.Stat(dir)
	if err != nil || !info.IsDir() {
		return nil, nil, errNoFolder
	}
	fsys := os.DirFS(dir)
	res, err := loader.NewFileLoader().
		WithFS(fsys).
		WithRegoVersion(ast.RegoV1).
		WithProcessAnnotation(true).
		Filtered([]string{"."}, fileFilter(false))
	if err != nil {
		return nil, problemsOf(err), nil
	}

	src := &source{
		modules: make(map[string]*ast.Module, len(res.Modules)),
		data:    res.Documents,
	}
	h := sha256.New()
	paths := make([]string, 0, len(res.Modules))
	for p := range res.Modules {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		f := res.Modules[p]
		sum := sha256.Sum256(f.Raw)
		src.modules[p] = f.Parsed
		src.list = append(src.list, Module{Path: p, SHA256: hex.EncodeToString(sum[:])})
		// Length-prefixed so that no two different folders hash alike.
		fmt.Fprintf(h, "module %d:%s %x\n", len(p), p, sum)
	}
	// encoding/json sorts map keys, so equal data hashes equally.
	data, err := json.Marshal(res.Documents)
	if err != nil {
		return nil, []Problem{{Message: "data: " + err.Error()}}, nil
	}
	fmt.Fprintf(h, "data %d:", len(data))
	h.Write(data)

	revision, problem := readManifest(fsys)
	if problem != nil {
		return nil, []Problem{*problem}, nil
	}
	src.revision = revision
	fmt.Fprintf(h, "\nrevision %s", revision)
	src.digest = hex.EncodeToString(h.Sum(nil))
	return src, nil, nil
}

// readManifest returns the revision of the folder's .manifest, if any.
func readManifest(fsys fs.FS) (string, *Problem) {
	raw, err := fs.ReadFile(fsys, manifestFile)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", &Problem{File: manifestFile, Message: "cannot read the manifest"}
	}
	var m struct {
		Revision string `json:"revision"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", &Problem{File: manifestFile, Message: "manifest is not valid JSON: " + err.Error()}
	}
	return m.Revision, nil
}
