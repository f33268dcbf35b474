package wspath

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/tools"
)

// resolveFixture builds a workspace with files, folders and symlinks of
// every kind, and returns it opened as an os.Root.
func resolveFixture(t *testing.T) *os.Root {
	t.Helper()
	dir := t.TempDir()
	outside := t.TempDir()
	for _, d := range []string{"docs", "src", "nest"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"docs/guide.md", "src/main.go", "file.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	outRel, err := filepath.Rel(dir, outside)
	if err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"docs-link":  "docs",
		"nest/link":  "../docs", // a symlink to a folder: link/.. is docs/.., the root
		"src/up":     "..",
		"loop-a":     "loop-b",
		"loop-b":     "loop-a",
		"self":       "self",
		"abs-link":   "/etc",
		"out-link":   outRel,
		"climb-link": "../../x",
		"dangling":   "docs/fresh.md",
		"deep-link":  strings.Repeat("q/", 2000) + "q", // dangling, 4001 bytes
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Skipf("no symlinks here: %v", err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

func TestResolve(t *testing.T) {
	root := resolveFixture(t)
	long := strings.Repeat("a", MaxComponent+1)
	maxComp := strings.Repeat("a", MaxComponent)
	maxPath := "x" + strings.Repeat("/x", (MaxPath-1)/2) // MaxPath bytes
	if len(maxPath) != MaxPath {
		t.Fatalf("maxPath has %d bytes", len(maxPath))
	}
	const (
		E = MustExist
		F = Folder
		M = MayBeMissing
		L = Loose
	)
	type want struct {
		rel     string
		rule    string   // an ArgError with this rule
		outside bool     // Loose: Rel is the cleaned name as given
		missing []string // MayBeMissing: what does not exist yet
		parent  string
	}
	cases := []struct {
		name  string
		in    string
		base  string
		modes []Mode
		want  want
	}{
		// The root, spelled every way.
		{"empty is the root", "", "", []Mode{E, F, M, L}, want{rel: "."}},
		{"dot is the root", ".", "", []Mode{E, F, M, L}, want{rel: "."}},
		{"dot slash", "./", "", []Mode{E, F, M, L}, want{rel: "."}},
		{"climb back to the root", "src/..", "", []Mode{E, F, M, L}, want{rel: "."}},

		// Plain names, trailing slashes and empty components.
		{"a file", "docs/guide.md", "", []Mode{E, M, L}, want{rel: "docs/guide.md"}},
		{"uncleaned", "./docs//guide.md", "", []Mode{E, M, L}, want{rel: "docs/guide.md"}},
		{"trailing slash on a folder", "docs/", "", []Mode{E, F, M, L}, want{rel: "docs"}},
		{"trailing slash on a file is ignored", "docs/guide.md/", "", []Mode{E, M, L}, want{rel: "docs/guide.md"}},
		{"trailing slash on a file is no folder", "docs/guide.md/", "", []Mode{F}, want{rule: RuleNotFolder}},
		{"a file is no folder", "file.txt", "", []Mode{F}, want{rule: RuleNotFolder}},

		// A file where a folder is needed.
		{"below a file", "docs/guide.md/x", "", []Mode{E, F, M}, want{rule: RuleNotDirComp}},
		{"below a file, loose", "docs/guide.md/x", "", []Mode{L}, want{rel: "docs/guide.md/x"}},
		{"dot-dot after a file", "docs/guide.md/..", "", []Mode{E, F, M}, want{rule: RuleNotDirComp}},

		// Leaving the workspace.
		{"parent", "../x", "", []Mode{E, F, M}, want{rule: RuleInside}},
		{"parent, loose", "../x", "", []Mode{L}, want{rel: "../x", outside: true}},
		{"dot-dot past the root", "docs/../../x", "", []Mode{E, F, M}, want{rule: RuleInside}},
		{"dot-dot past the root, loose", "docs/../../x", "", []Mode{L}, want{rel: "../x", outside: true}},
		{"dot-dot past the root below a missing folder", "a/../../x", "", []Mode{E, F, M}, want{rule: RuleInside}},
		{"dot-dot past the root below a missing folder, loose", "a/../../x", "", []Mode{L}, want{rel: "../x", outside: true}},
		{"absolute", "/etc/passwd", "", []Mode{E, F, M}, want{rule: RuleInside}},
		{"absolute, loose", "/etc//passwd", "", []Mode{L}, want{rel: "/etc/passwd", outside: true}},
		{"a Windows volume", `C:\x`, "", []Mode{E, F, M}, want{rule: RuleInside}},
		{"absolute symlink", "abs-link", "", []Mode{E, F, M}, want{rule: RuleInside}},
		{"absolute symlink, loose", "abs-link/passwd", "", []Mode{L}, want{rel: "abs-link/passwd", outside: true}},
		{"relative symlink out", "out-link/secret", "", []Mode{E, F, M}, want{rule: RuleInside}},
		{"relative symlink out, loose", "out-link/secret", "", []Mode{L}, want{rel: "out-link/secret", outside: true}},
		{"symlink climbing past the root", "climb-link", "", []Mode{E, M}, want{rule: RuleInside}},
		{"in-workspace symlink to the root, then up", "src/up/..", "", []Mode{E, F, M}, want{rule: RuleInside}},

		// Symlinks inside.
		{"folder symlink", "docs-link/guide.md", "", []Mode{E, M, L}, want{rel: "docs/guide.md"}},
		{"folder symlink as a folder", "docs-link", "", []Mode{F}, want{rel: "docs"}},
		{"symlink to a folder, then dot-dot", "nest/link/..", "", []Mode{E, F, M, L}, want{rel: "."}},
		{"symlink to a folder, then dot-dot, then down", "nest/link/../src/main.go", "", []Mode{E, M, L}, want{rel: "src/main.go"}},
		{"symlink to the parent", "src/up/src/main.go", "", []Mode{E, M, L}, want{rel: "src/main.go"}},
		{"symlink loop", "loop-a", "", []Mode{E, F, M}, want{rule: RuleLoop}},
		{"symlink to itself", "self/x", "", []Mode{E, F, M}, want{rule: RuleLoop}},
		{"symlink loop, loose", "loop-a", "", []Mode{L}, want{rel: "loop-a", outside: true}},

		// Missing components.
		{"missing file", "docs/nope.md", "", []Mode{E}, want{rule: RuleFileNotExist}},
		{"missing folder", "nope", "", []Mode{F}, want{rule: RuleFolderNotExist}},
		{"missing file, may be missing", "docs/nope.md", "", []Mode{M}, want{rel: "docs/nope.md", parent: "docs", missing: []string{"nope.md"}}},
		{"missing middle components", "nope/x/y.txt", "", []Mode{E}, want{rule: RuleFileNotExist}},
		{"missing middle components, folder", "nope/x", "", []Mode{F}, want{rule: RuleFolderNotExist}},
		{"missing middle components, may be missing", "docs-link/nope/y.txt", "", []Mode{M}, want{rel: "docs/nope/y.txt", parent: "docs", missing: []string{"nope", "y.txt"}}},
		{"missing middle components, loose", "nope/x/../y.txt", "", []Mode{L}, want{rel: "nope/y.txt"}},
		{"dot-dot below a missing folder", "new/../x", "", []Mode{M}, want{rule: RuleDotDotNew}},
		{"dangling symlink", "dangling", "", []Mode{E}, want{rule: RuleFileNotExist}},
		{"dangling symlink, may be missing", "dangling", "", []Mode{M}, want{rel: "docs/fresh.md", parent: "docs", missing: []string{"fresh.md"}}},

		// NUL bytes, in every mode.
		{"NUL", "docs/guide.md\x00.txt", "", []Mode{E, F, M, L}, want{rule: RuleNUL}},

		// Length limits: the same rule in every strict mode; Loose never
		// refuses (an argument need not be a path).
		{"component at the limit", maxComp, "", []Mode{M, L}, want{rel: maxComp, parent: ".", missing: []string{maxComp}}},
		{"component over the limit", long, "", []Mode{E, F, M}, want{rule: RuleTooLong}},
		{"component over the limit below a folder", "docs/" + long + "/x", "", []Mode{E, F, M}, want{rule: RuleTooLong}},
		{"component over the limit, climbed out of", long + "/../docs", "", []Mode{E, F, M}, want{rule: RuleTooLong}},
		{"component over the limit, loose", "docs/" + long, "", []Mode{L}, want{rel: "docs/" + long}},
		{"path at the limit", maxPath, "", []Mode{E}, want{rule: RuleFileNotExist}},
		{"path over the limit", maxPath + "x", "", []Mode{E, F, M}, want{rule: RuleTooLong}},
		{"path over the limit, loose", maxPath + "x", "", []Mode{L}, want{rel: maxPath + "x"}},
		{"path over the limit through a symlink", "deep-link/" + strings.Repeat("r/", 50) + "r", "", []Mode{M}, want{rule: RuleTooLong}},

		// A base folder (Loose, as the argument scan uses it).
		{"relative to a base", "guide.md", "docs", []Mode{L}, want{rel: "docs/guide.md"}},
		{"up from a base", "../src/main.go", "docs", []Mode{L}, want{rel: "src/main.go"}},
		{"out from a base", "../../x", "docs", []Mode{L}, want{rel: "../../x", outside: true}},
		{"the base itself", "", "docs", []Mode{L}, want{rel: "docs"}},
	}
	modeNames := map[Mode]string{E: "exist", F: "folder", M: "missing", L: "loose"}
	for _, c := range cases {
		for _, m := range c.modes {
			t.Run(c.name+"/"+modeNames[m], func(t *testing.T) {
				got, err := Resolve(root, c.in, Options{Mode: m, Pointer: "/p", Base: c.base})
				if c.want.rule != "" {
					var ae *tools.ArgError
					if !errors.As(err, &ae) {
						t.Fatalf("got %+v, %v; want ArgError %q", got, err, c.want.rule)
					}
					if ae.Pointer != "/p" || ae.Rule != c.want.rule {
						t.Fatalf("ArgError %s %q, want /p %q", ae.Pointer, ae.Rule, c.want.rule)
					}
					return
				}
				if err != nil {
					t.Fatalf("error %v", err)
				}
				if got.Rel != c.want.rel || got.Outside != c.want.outside {
					t.Fatalf("Rel %q Outside %v, want %q %v", got.Rel, got.Outside, c.want.rel, c.want.outside)
				}
				if m == M && c.want.missing != nil {
					if got.Info != nil || got.Parent != c.want.parent || got.ParentInfo == nil || !reflect.DeepEqual(got.Missing, c.want.missing) {
						t.Fatalf("missing target: %+v, want parent %q missing %q", got, c.want.parent, c.want.missing)
					}
					return
				}
				exists := !got.Outside && got.Missing == nil
				if m == L {
					_, err := root.Lstat(got.Rel)
					exists = !got.Outside && err == nil
				}
				if exists != (got.Info != nil) {
					t.Fatalf("Info %v, target exists %v", got.Info, exists)
				}
				if got.Info != nil {
					fi, err := root.Lstat(got.Rel)
					if err != nil || !SameIdentity(fi, got.Info) {
						t.Fatalf("Info is not the Lstat of %q", got.Rel)
					}
				}
			})
		}
	}
}

func TestTooLong(t *testing.T) {
	for in, want := range map[string]bool{
		"":                                    false,
		strings.Repeat("a", 255):              false,
		strings.Repeat("a", 256):              true,
		"x/" + strings.Repeat("a", 256) + "/": true,
		strings.Repeat("a/", 2047) + "a":      false, // 4095 bytes
		strings.Repeat("a/", 2048):            true,  // 4096 bytes
	} {
		if got := TooLong(in); got != want {
			t.Errorf("TooLong(%d bytes) = %v, want %v", len(in), got, want)
		}
	}
}

func TestHostRel(t *testing.T) {
	dir := filepath.FromSlash("/srv/ws/acme")
	for in, want := range map[string]string{
		"/srv/ws/acme":          ".",
		"/srv/ws/acme/docs/a":   "docs/a",
		"/srv/ws/acme/../acme2": "",
		"/srv/ws":               "",
		"/etc":                  "",
	} {
		got, ok := HostRel(dir, filepath.FromSlash(in))
		if got != want || ok != (want != "") {
			t.Errorf("HostRel(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}
