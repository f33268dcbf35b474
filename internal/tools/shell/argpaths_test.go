package shell

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/tools"
)

func TestArgumentsBecomeFileResources(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, dir := testEnv(t, "acme", "s-1")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "secrets"), 0o755))
	must(os.MkdirAll(filepath.Join(dir, "docs"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "secrets", "db.env"), []byte("x"), 0o644))
	must(os.Symlink("secrets/db.env", filepath.Join(dir, "innocent.txt")))
	cases := []struct {
		name    string
		command string
		want    []string // "path", "!path" for outside, "w:path" for access write
	}{
		{"plain path", "cat secrets/db.env", []string{"secrets/db.env"}},
		{"dot segments are cleaned", "cat ./docs/../secrets//db.env", []string{"secrets/db.env"}},
		{"a symlink resolves to its target", "cat innocent.txt", []string{"secrets/db.env"}},
		{"cd then a relative path (over-approximated)", "cd secrets && cat db.env", []string{"db.env", "secrets", "secrets/db.env", "secrets/secrets"}},
		{"option values", "grep --file=secrets/db.env -n x", []string{"secrets/db.env", "x"}},
		{"options are not paths", "ls -la", nil},
		{"absolute paths are outside", "cat /etc/passwd", []string{"!/etc/passwd"}},
		{"escapes are outside", "cat ../../x", []string{"!../../x"}},
		{"missing files still count", "cp docs/a secrets/new", []string{"docs/a", "w:secrets/new"}},
		// A word too long to be a path (wspath.TooLong) is not refused:
		// arguments need not be paths. It is reported like a missing path.
		{"a word with a component over 255 bytes", "git commit -m " + strings.Repeat("m", 300), []string{"commit", strings.Repeat("m", 300)}},
		{"a word over 4095 bytes", "echo docs/" + strings.Repeat("e/", 2100), []string{"docs/" + strings.Repeat("e/", 2099) + "e"}},
		{"a too-long word below a symlink resolves the symlink", "cat innocent.txt/" + strings.Repeat("x", 256), []string{"secrets/db.env/" + strings.Repeat("x", 256)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := mustPrepare(t, bashTool(sh), env, map[string]any{"command": c.command})
			commandResource(t, plan)
			var got []string
			got = argumentPaths(plan)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("argument files %v, want %v", got, c.want)
			}
		})
	}
}

// TestCommandWritesAreWriteResources: the paths a known program writes
// are access "write", however the option is spelled; the rest stay
// "command". Each case is an attack of issue 12 or a writer of the table.
func TestCommandWritesAreWriteResources(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, dir := testEnv(t, "acme", "s-1")
	writeFiles(t, dir, map[string]string{"README.md": "r", "secrets/db.env": "x", "notes/a": "a"})
	cases := []struct {
		name    string
		command string
		want    []string
	}{
		{"sort -oFILE (attached short value)", "sort -osecrets/db.env README.md", []string{"README.md", "w:secrets/db.env"}},
		{"sort -o FILE", "sort -o secrets/db.env README.md", []string{"README.md", "w:secrets/db.env"}},
		{"sort --output=FILE", "sort --output=release/VERSION x", []string{"w:release/VERSION", "x"}},
		{"sort --output FILE", "sort --output release/VERSION x", []string{"w:release/VERSION", "x"}},
		{"sort in a cluster", "sort -ruorelease/VERSION x", []string{"w:release/VERSION", "x"}},
		{"sort through its path", "/usr/bin/sort -o out in", []string{"in", "w:out"}},
		{"sort's compress chain", "sort -S 1K --compress-program=python3 -T notes big.txt -o out",
			[]string{"1K", "big.txt", "w:notes", "w:out", "python3"}},
		{"tee", "tee a secrets/db.env", []string{"w:a", "w:secrets/db.env"}},
		{"cp destination", "cp notes/a secrets/db.env", []string{"notes/a", "w:secrets/db.env"}},
		{"cp -t folder", "cp -t secrets notes/a README.md", []string{"README.md", "notes/a", "w:secrets"}},
		{"cp --target-directory=", "cp --target-directory=secrets notes/a", []string{"notes/a", "w:secrets"}},
		{"mv moves its sources away", "mv secrets/db.env notes/b", []string{"w:notes/b", "w:secrets/db.env"}},
		{"install", "install -m 644 notes/a release/x", []string{"644", "notes/a", "w:release/x"}},
		{"install -d", "install -d release/d", []string{"w:release/d"}},
		{"touch", "touch -r README.md release/x", []string{"README.md", "w:release/x"}},
		{"mkdir", "mkdir -p -m 755 release/d", []string{"755", "w:release/d"}},
		{"rm", "rm -f secrets/db.env", []string{"w:secrets/db.env"}},
		{"rmdir", "rmdir secrets", []string{"w:secrets"}},
		{"sed -i with the script first", "sed -i s/a/b/ secrets/db.env", []string{"s/a/b", "w:secrets/db.env"}},
		{"sed -i.bak -e", "sed -i.bak -e s/a/b/ notes/a secrets/db.env", []string{"w:notes/a", "s/a/b", "w:secrets/db.env"}},
		{"sed without -i only reads", "sed s/a/b/ notes/a", []string{"notes/a", "s/a/b"}},
		{"dd of=", "dd if=README.md of=secrets/db.env bs=1", []string{"1", "README.md", "w:secrets/db.env"}},
		{"tar -cf writes the archive", "tar -cf release/a.tar notes", []string{"notes", "w:release/a.tar"}},
		{"tar cf (old style)", "tar czf release/a.tgz notes", []string{"notes", "w:release/a.tgz"}},
		{"tar -xf reads the archive, writes the folder", "tar -xf notes/a -C secrets", []string{"notes/a", "w:secrets"}},
		{"tar xf writes the working folder", "tar xf notes/a", []string{"w:.", "notes/a"}},
		{"uniq IN OUT", "uniq -f 1 notes/a secrets/db.env", []string{"1", "notes/a", "w:secrets/db.env"}},
		{"split PREFIX", "split -l 10 notes/a secrets/x", []string{"10", "notes/a", "w:secrets/x"}},
		{"split without prefix", "split notes/a", []string{"notes/a", "w:x"}},
		{"ln LINK", "ln secrets/db.env notes/b", []string{"w:notes/b", "secrets/db.env"}},
		{"ln TARGET alone links into the folder", "ln secrets/db.env", []string{"w:db.env", "secrets/db.env"}},
		{"go build -o", "go build -o secrets/db.env ./cmd", []string{"build", "cmd", "w:secrets/db.env"}},
		{"go test -coverprofile=", "go test -run TestX -coverprofile=secrets/c.out ./...", []string{"...", "TestX", "w:secrets/c.out", "test"}},
		{"an unknown program's attached path value", "grep -fsecrets/db.env x", []string{"secrets/db.env", "x"}},
		{"after -- everything is an operand", "cat -- -secrets", []string{"-secrets"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := mustPrepare(t, bashTool(sh), env, map[string]any{"command": c.command})
			commandResource(t, plan)
			if got := argumentPaths(plan); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("argument files %v, want %v", got, c.want)
			}
		})
	}
}

// TestTooManyPathsIsRefused: a command naming more paths than the scan
// keeps is refused at prepare, never cut short (issue 12: `cat x0 … x69
// secrets/db.env` printed the protected file past the old cap).
func TestTooManyPathsIsRefused(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, dir := testEnv(t, "acme", "s-1")
	writeFiles(t, dir, map[string]string{"secrets/db.env": "x"})
	words := func(n int) string {
		var b strings.Builder
		b.WriteString("cat")
		for i := range n {
			fmt.Fprintf(&b, " x%d", i)
		}
		return b.String()
	}
	_, err := bashTool(sh).Prepare(context.Background(), env, map[string]any{"command": words(70) + " secrets/db.env"})
	argErr(t, err, "/command", ruleTooManyPaths)
	if !strings.Contains(err.Error(), "split it") {
		t.Fatalf("the rule should say what to do: %v", err)
	}
	// Exactly the cap is fine, and every path is there.
	plan := mustPrepare(t, bashTool(sh), env, map[string]any{"command": words(maxArgPaths-1) + " secrets/db.env"})
	got := argumentPaths(plan)
	if len(got) != maxArgPaths || !slices.Contains(got, "secrets/db.env") {
		t.Fatalf("%d argument files, secrets/db.env among them: %v", len(got), got)
	}
	// cd folders multiply the paths and count too.
	_, err = bashTool(sh).Prepare(context.Background(), env, map[string]any{"command": "cd secrets && " + words(40)})
	argErr(t, err, "/command", ruleTooManyPaths)
}

// TestHardLinkedArgumentsCarryLinks: a name of a file with several hard
// links carries links: N, so policy can refuse it.
func TestHardLinkedArgumentsCarryLinks(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, dir := testEnv(t, "acme", "s-1")
	writeFiles(t, dir, map[string]string{"secrets/db.env": "x", "notes/a": "a"})
	if err := os.Link(filepath.Join(dir, "secrets", "db.env"), filepath.Join(dir, "notes", "innocent")); err != nil {
		t.Skipf("no hard links: %v", err)
	}
	plan := mustPrepare(t, bashTool(sh), env, map[string]any{"command": "cat notes/innocent notes/a && sort -o notes/innocent notes/a"})
	want := []string{"notes/a", "notes/innocent#2", "w:notes/innocent#2"}
	if got := argumentPaths(plan); !reflect.DeepEqual(got, want) {
		t.Fatalf("argument files %v, want %v", got, want)
	}
	for _, r := range plan.Resources {
		if n, ok := r["links"]; ok && n != float64(2) {
			t.Fatalf("links must be a JSON number: %#v", n)
		}
	}
}

// TestWorkingFolderIsAListResource: the cwd is a file resource of access
// list, resolved like the working folder, so a protected cwd is judged.
func TestWorkingFolderIsAListResource(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, dir := testEnv(t, "acme", "s-1")
	writeFiles(t, dir, map[string]string{"secrets/db.env": "x"})
	if err := os.Symlink("secrets", filepath.Join(dir, "elsewhere")); err != nil {
		t.Fatal(err)
	}
	for cwd, want := range map[string]string{".": ".", "secrets": "secrets", "./elsewhere/": "secrets"} {
		plan := mustPrepare(t, bashTool(sh), env, map[string]any{"command": "ls", "cwd": cwd})
		commandResource(t, plan)
		last := plan.Resources[len(plan.Resources)-1]
		if !reflect.DeepEqual(last, tools.Resource{"type": "file", "path": want, "access": "list"}) {
			t.Fatalf("cwd %q: working folder resource %v, want path %q", cwd, last, want)
		}
	}
}
