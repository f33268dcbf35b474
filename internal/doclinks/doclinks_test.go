package doclinks

import (
	"bytes"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// root is the repository, seen from this package's folder.
const root = "../.."

// skipDirs are never read: not the project's text (dependencies, the
// demo tenant's workspace files, run-time state).
var skipDirs = map[string]bool{".git": true, "node_modules": true, "var": true, "demo": true}

// repoFiles lists the repository's text files, slash-separated and
// relative to its root.
func repoFiles(t *testing.T) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if skipDirs[d.Name()] && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0 {
			return nil // binary
		}
		files[rel] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// headingsOf returns a page's headings by anchor and by plain text.
type page struct {
	anchors map[string]bool
	texts   map[string]bool
}

func pages(files map[string][]byte) map[string]page {
	ps := map[string]page{}
	for name, b := range files {
		if !strings.HasSuffix(name, ".md") {
			continue
		}
		p := page{anchors: map[string]bool{}, texts: map[string]bool{}}
		for _, h := range Headings(string(b)) {
			p.anchors[h.Anchor] = true
			p.texts[PlainText(h.Text)] = true
		}
		ps[name] = p
	}
	return ps
}

// Every relative link of the documentation names a file or folder that
// exists, and every #anchor a heading of the page it points into.
func TestMarkdownLinksResolve(t *testing.T) {
	files := repoFiles(t)
	ps := pages(files)
	checked := 0
	for name, b := range files {
		if !strings.HasSuffix(name, ".md") || strings.Contains(name, "/testdata/") {
			continue
		}
		for _, l := range Links(string(b)) {
			u, err := url.Parse(l.Target)
			if err != nil {
				t.Errorf("%s:%d: link %q does not parse: %v", name, l.Line, l.Target, err)
				continue
			}
			if u.Scheme != "" || u.Host != "" {
				continue // another site's
			}
			target := name
			if u.Path != "" {
				if strings.HasPrefix(u.Path, "/") {
					t.Errorf("%s:%d: link %q is absolute; links are relative to the page", name, l.Line, l.Target)
					continue
				}
				target = path.Clean(path.Join(path.Dir(name), u.Path))
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(target))); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", name, l.Line, l.Target, target)
					continue
				}
			}
			checked++
			if u.Fragment == "" {
				continue
			}
			p, ok := ps[target]
			if !ok {
				t.Errorf("%s:%d: link %q: an anchor into %s, which is not a Markdown page", name, l.Line, l.Target, target)
				continue
			}
			if !p.anchors[u.Fragment] {
				t.Errorf("%s:%d: link %q: %s has no heading whose anchor is #%s", name, l.Line, l.Target, target, u.Fragment)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d links checked: is the walk finding the documentation?", checked)
	}
}

// Every `README "Section"` or `docs/x.md "Section"` reference in the
// repository's source, configuration and documentation names a page that
// exists and a heading it has.
func TestSectionReferencesResolve(t *testing.T) {
	files := repoFiles(t)
	ps := pages(files)
	checked := 0
	for name, b := range files {
		if strings.HasPrefix(name, "internal/doclinks/") {
			continue // its own examples
		}
		text := string(b)
		for _, r := range Refs(text) {
			target := r.File
			if target == "README" {
				target = "README.md"
			}
			p, ok := ps[target]
			if !ok {
				t.Errorf("%s:%d: %s %q: there is no page %s", name, r.Line, r.File, r.Section, target)
				continue
			}
			checked++
			if !p.texts[PlainText(r.Section)] {
				t.Errorf("%s:%d: %s %q: %s has no such heading", name, r.Line, r.File, r.Section, target)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d section references checked: is the walk finding them?", checked)
	}
}

// The parsing the two tests rely on, on the shapes the repository uses.
func TestParsing(t *testing.T) {
	md := "# Toolgate\n\n## Quick start\n\n```sh\n# not a heading\n```\n\n" +
		"### `process-output`, `process-input`, `process-stop`\n## Replay: a candidate's impact on past traffic\n" +
		"## What `go test ./...` skips\n## Quick start\n"
	var got []string
	for _, h := range Headings(md) {
		got = append(got, h.Anchor)
	}
	want := []string{"toolgate", "quick-start", "process-output-process-input-process-stop",
		"replay-a-candidates-impact-on-past-traffic", "what-go-test--skips", "quick-start-1"}
	if !slices.Equal(got, want) {
		t.Errorf("anchors %q, want %q", got, want)
	}

	links := Links("see [a](x.md#b), ![img](c.png) and `[no](link)`; [![i](d.png)](e.md)\n```\n[no](link)\n```\n")
	var targets []string
	for _, l := range links {
		targets = append(targets, l.Target)
	}
	if want := []string{"x.md#b", "c.png", "d.png", "e.md"}; !slices.Equal(targets, want) {
		t.Errorf("links %q, want %q", targets, want)
	}

	src := "// the jail (docs/security-model.md \"What a gateway that is not root\n\t\t// needs\").\n" +
		"# Keys: README.md, \"Configuration reference\"\n" +
		`msg := "on a filesystem of their own (README \"Workspace quotas\")"` + "\n" +
		`files := []string{"README.md", "notes/a"}` + "\n" +
		"(README: \"MCP upstreams\")\n" +
		"docs/guide.md \", x\"; \"sort -o README.md README.md\", \"\"\n"
	var refs []string
	for _, r := range Refs(src) {
		refs = append(refs, r.File+"|"+r.Section)
	}
	wantRefs := []string{"docs/security-model.md|What a gateway that is not root needs",
		"README.md|Configuration reference", "README|Workspace quotas", "README|MCP upstreams"}
	if !slices.Equal(refs, wantRefs) {
		t.Errorf("refs %q, want %q", refs, wantRefs)
	}
}
