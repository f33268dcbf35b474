package shell

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
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
		want    []string // "path" or "!path" for outside
	}{
		{"plain path", "cat secrets/db.env", []string{"secrets/db.env"}},
		{"dot segments are cleaned", "cat ./docs/../secrets//db.env", []string{"secrets/db.env"}},
		{"a symlink resolves to its target", "cat innocent.txt", []string{"secrets/db.env"}},
		{"cd then a relative path (over-approximated)", "cd secrets && cat db.env", []string{"db.env", "secrets", "secrets/db.env", "secrets/secrets"}},
		{"option values", "grep --file=secrets/db.env -n x", []string{"secrets/db.env", "x"}},
		{"options are not paths", "ls -la", nil},
		{"absolute paths are outside", "cat /etc/passwd", []string{"!/etc/passwd"}},
		{"escapes are outside", "cat ../../x", []string{"!../../x"}},
		{"missing files still count", "cp docs/a secrets/new", []string{"docs/a", "secrets/new"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := mustPrepare(t, bashTool(sh), env, map[string]any{"command": c.command})
			commandResource(t, plan)
			var got []string
			for _, r := range plan.Resources[1:] {
				p := r["path"].(string)
				if r["outside"] == true {
					p = "!" + p
				}
				got = append(got, p)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("argument files %v, want %v", got, c.want)
			}
		})
	}
}
