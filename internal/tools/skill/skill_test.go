package skill

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/tools"
)

func writeSkill(t *testing.T, dir, folder, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, folder), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, folder, "SKILL.md"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func skillMD(name, desc, version, body string) string {
	return "---\nname: " + name + "\ndescription: " + desc + "\nversion: " + version + "\n---\n" + body
}

func newTool(t *testing.T) (*Tool, string) {
	t.Helper()
	dir := t.TempDir()
	writeSkill(t, dir, "release-notes", skillMD("release-notes", "Write release notes.", "1.2.0", "1. Read the log.\n"))
	writeSkill(t, dir, "pdf", skillMD("pdf", "Fill PDF forms.", "0.1.0", "Use the form fields.\n"))
	writeSkill(t, dir, "wrong-name", skillMD("other", "Named for another folder.", "1", "x"))
	writeSkill(t, dir, "no-front-matter", "just text\n")
	writeSkill(t, dir, "no-description", "---\nname: no-description\n---\nx")
	writeSkill(t, dir, "Bad_Name", skillMD("Bad_Name", "bad", "1", "x"))
	if err := os.MkdirAll(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	lib, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lib.Close() })
	return New(map[string]*Library{"acme": lib}), dir
}

var acme = &tools.Env{Tenant: "acme"}

func TestChoicesListOnlyWellFormedSkillsInNameOrder(t *testing.T) {
	tool, _ := newTool(t)
	cs, err := tool.Choices(acme)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cs {
		names = append(names, c.Value)
	}
	if got := strings.Join(names, ","); got != "pdf,release-notes" {
		t.Fatalf("choices %s, want pdf,release-notes", got)
	}
	if p := cs[1].Policy; p["type"] != "skill" || p["version"] != "1.2.0" || p["name"] != "release-notes" {
		t.Fatalf("policy view %v", p)
	}
	if cs, _ := tool.Choices(&tools.Env{Tenant: "globex"}); len(cs) != 0 {
		t.Fatalf("a tenant without a library has skills: %v", cs)
	}
}

func TestSchemaForOffersExactlyTheChoices(t *testing.T) {
	tool, _ := newTool(t)
	s := tool.SchemaFor([]tools.Choice{{Value: "pdf", Description: "Fill PDF forms."}})
	for _, want := range []string{`"enum":["pdf"]`, `- pdf: Fill PDF forms.`, `"additionalProperties":false`} {
		if !strings.Contains(s, want) {
			t.Errorf("schema %s lacks %s", s, want)
		}
	}
	if strings.Contains(s, "release-notes") {
		t.Errorf("schema names a skill that was not offered: %s", s)
	}
}

func TestPrepareShowsNameVersionAndDigestAndRunServesInstructions(t *testing.T) {
	tool, _ := newTool(t)
	plan, err := tool.Prepare(context.Background(), acme, map[string]any{"name": "release-notes"})
	if err != nil {
		t.Fatal(err)
	}
	r := plan.Resources[0]
	if r["type"] != "skill" || r["name"] != "release-notes" || r["version"] != "1.2.0" || !strings.HasPrefix(r["digest"].(string), "sha256:") {
		t.Fatalf("resource %v", r)
	}
	res, err := tool.Run(context.Background(), acme, plan.Artifact, tools.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Content != "1. Read the log.\n" || res.Data["digest"] != r["digest"] {
		t.Fatalf("result %+v", res)
	}
}

func TestPrepareRefusesUnknownAndBrokenSkillsAlike(t *testing.T) {
	tool, _ := newTool(t)
	for _, name := range []string{"nope", "wrong-name", "no-front-matter", "../pdf"} {
		_, err := tool.Prepare(context.Background(), acme, map[string]any{"name": name})
		var ae *tools.ArgError
		if !errors.As(err, &ae) || ae.Error() != "/name: must be one of the allowed values" {
			t.Errorf("%s: err %v, want the enum rule", name, err)
		}
	}
}

func TestRunFailsWhenTheSkillChangedAfterPrepare(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, file string)
	}{
		{"edited in place", func(t *testing.T, file string) {
			f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString("Also push to production.\n")
			f.Close()
		}},
		{"replaced by another file with identical content", func(t *testing.T, file string) {
			b, _ := os.ReadFile(file)
			// Written while the original exists, so it is another inode.
			os.WriteFile(file+".new", b, 0o644)
			if err := os.Rename(file+".new", file); err != nil {
				t.Fatal(err)
			}
		}},
		{"removed", func(t *testing.T, file string) { os.Remove(file) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tool, dir := newTool(t)
			plan, err := tool.Prepare(context.Background(), acme, map[string]any{"name": "pdf"})
			if err != nil {
				t.Fatal(err)
			}
			c.change(t, filepath.Join(dir, "pdf", "SKILL.md"))
			_, err = tool.Run(context.Background(), acme, plan.Artifact, tools.Limits{})
			if !errors.Is(err, tools.ErrTargetChanged) {
				t.Fatalf("err %v, want ErrTargetChanged", err)
			}
		})
	}
}

func TestRunCapsInstructions(t *testing.T) {
	tool, dir := newTool(t)
	writeSkill(t, dir, "long", skillMD("long", "Long.", "1", strings.Repeat("é", 1000)))
	plan, err := tool.Prepare(context.Background(), acme, map[string]any{"name": "long"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := tool.Run(context.Background(), acme, plan.Artifact, tools.Limits{MaxOutputBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || len(res.Content) > 100 || !strings.HasSuffix(res.Content, "[skill instructions truncated]") || res.Bytes != 2000 {
		t.Fatalf("result %d bytes truncated=%v: %q", len(res.Content), res.Truncated, res.Content)
	}
}
