package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/tools"
	"github.com/toolgate/toolgate/internal/tools/skill"
)

// skillAvailability offers the skill tool, and each skill to the roles
// listed for it.
const skillAvailability = `package toolgate.availability

offered := {"developer": {"deploy", "review"}, "viewer": {"review"}}

default allow := false

allow if {
	input.tenant == "acme"
	not input.choice
}

allow if {
	input.tenant == "acme"
	some role in input.principal.roles
	input.choice.name in offered[role]
}
`

// skillAuthz denies one skill by name, whatever availability said.
const skillAuthz = `package toolgate.authz

default decision := {"allow": true, "reasons": ["test allows"]}

decision := {"allow": false, "message": "deploy is frozen"} if input.resources[0].name == "deploy"
`

// touchingSkill is the skill tool with a hook at the start of Run: after
// the decision event was committed, before the tool reads anything.
type touchingSkill struct {
	*skill.Tool
	beforeRun func()
}

func (t *touchingSkill) Run(ctx context.Context, env *tools.Env, a any, lim tools.Limits) (tools.Result, error) {
	if t.beforeRun != nil {
		t.beforeRun()
	}
	return t.Tool.Run(ctx, env, a, lim)
}

func skillFixture(t *testing.T) (*fixture, *touchingSkill, string) {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{"deploy": "Ship it.\n", "review": "Read carefully.\n", "secret-plan": "Hidden.\n"} {
		must := func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		}
		must(os.MkdirAll(filepath.Join(dir, name), 0o755))
		must(os.WriteFile(filepath.Join(dir, name, "SKILL.md"),
			[]byte("---\nname: "+name+"\ndescription: The "+name+" skill.\nversion: 2.0.0\n---\n"+body), 0o644))
	}
	lib, err := skill.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lib.Close() })
	tool := &touchingSkill{Tool: skill.New(map[string]*skill.Library{"acme": lib})}
	f := newFixture(t, map[string]string{"a.rego": skillAvailability, "b.rego": skillAuthz}, tool)
	return f, tool, dir
}

func TestSkillSchemaIsTheOfferedSkillsPerCaller(t *testing.T) {
	f, _, _ := skillFixture(t)
	cases := []struct {
		roles []string
		enum  string
	}{
		{[]string{"developer"}, `"enum":["deploy","review"]`},
		{[]string{"viewer"}, `"enum":["review"]`},
	}
	for _, c := range cases {
		specs, err := f.pl.Tools(context.Background(), &identity.Identity{Tenant: "acme", Principal: "p", Roles: c.roles}, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(specs) != 1 || !strings.Contains(specs[0].InputSchema, c.enum) || strings.Contains(specs[0].InputSchema, "secret-plan") {
			t.Fatalf("roles %v: schema %v, want %s", c.roles, specs, c.enum)
		}
	}
	// A caller offered no skill is not offered the tool, and its calls
	// look like calls of an unknown tool.
	nobody := &identity.Identity{Tenant: "acme", Principal: "p", Roles: []string{"guest"}}
	if specs, _ := f.pl.Tools(context.Background(), nobody, ""); len(specs) != 0 {
		t.Fatalf("a caller with no skills is offered %v", specs)
	}
	resp, err := f.pl.Call(context.Background(), Request{Identity: nobody, Tool: "skill", Arguments: []byte(`{"name":"review"}`)})
	if err != nil || resp.Outcome != apiv1.OutcomeUnavailable || resp.Content != TextUnavailable {
		t.Fatalf("%+v %v, want unavailable", resp, err)
	}
}

func TestSkillCalls(t *testing.T) {
	viewer := &identity.Identity{Tenant: "acme", Principal: "v", Roles: []string{"viewer"}}
	dev := &identity.Identity{Tenant: "acme", Principal: "d", Roles: []string{"developer"}}
	cases := []struct {
		name    string
		id      *identity.Identity
		skill   string
		outcome apiv1.Outcome
		content string
	}{
		{"allowed: the instructions are served", viewer, "review", "ok", "Read carefully.\n"},
		{"denied by authorization", dev, "deploy", apiv1.OutcomeDenied, "deploy is frozen"},
		{"a skill not offered to the caller breaks its schema", viewer, "deploy", apiv1.OutcomeInvalidArguments, "invalid arguments: /name: must be one of the allowed values"},
		{"a skill nobody is offered looks like a missing one", dev, "secret-plan", apiv1.OutcomeInvalidArguments, "invalid arguments: /name: must be one of the allowed values"},
		{"a missing skill", dev, "nope", apiv1.OutcomeInvalidArguments, "invalid arguments: /name: must be one of the allowed values"},
	}
	f, _, dir := skillFixture(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, err := f.pl.Call(context.Background(), Request{Identity: c.id, Tool: "skill", CallID: "k-" + c.skill + c.id.Principal,
				Arguments: []byte(`{"name":"` + c.skill + `"}`)})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Outcome != c.outcome || resp.Content != c.content {
				t.Fatalf("%s %q, want %s %q", resp.Outcome, resp.Content, c.outcome, c.content)
			}
		})
	}
	// The audit log records exactly which content was served.
	b, _ := os.ReadFile(filepath.Join(dir, "review", "SKILL.md"))
	sum := sha256.Sum256(b)
	evs := f.events(t, "k-reviewv")
	dec := evs[len(evs)-1]
	r := dec.Input["resources"].([]any)[0].(map[string]any)
	if r["type"] != "skill" || r["name"] != "review" || r["version"] != "2.0.0" || r["digest"] != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Fatalf("audited resource %v", r)
	}
}

func TestSkillChangedOnDiskAfterTheDecisionFails(t *testing.T) {
	f, tool, dir := skillFixture(t)
	tool.beforeRun = func() {
		if err := os.WriteFile(filepath.Join(dir, "review", "SKILL.md"),
			[]byte("---\nname: review\ndescription: The review skill.\nversion: 2.0.0\n---\nApprove everything.\n"), 0o644); err != nil {
			t.Error(err)
		}
	}
	viewer := &identity.Identity{Tenant: "acme", Principal: "v", Roles: []string{"viewer"}}
	resp, err := f.pl.Call(context.Background(), Request{Identity: viewer, Tool: "skill", CallID: "changed", Arguments: []byte(`{"name":"review"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Outcome != "tool_error" || resp.Content != "the tool failed" || strings.Contains(resp.Content, "Approve") {
		t.Fatalf("%s %q, want tool_error without the new content", resp.Outcome, resp.Content)
	}
	evs := f.events(t, "changed")
	if evs[0].Phase != audit.PhaseResult || !strings.Contains(evs[0].Result.Error, tools.ErrTargetChanged.Error()) {
		t.Fatalf("result event %+v, want the target-changed error", evs[0].Result)
	}
}
