package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/decision"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/invoke"
	"github.com/toolgate/toolgate/internal/prepare"
	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/tools"
	"github.com/toolgate/toolgate/internal/tools/workspace"
)

// allowAll offers every tool and allows every call; tests that need
// another policy write their own.
const allowAll = `package toolgate.availability

default allow := false

allow if input.tenant == "acme"
`

const authzAllow = `package toolgate.authz

decision := {"allow": true, "reasons": ["test allows"]}
`

// probeTool records what it is asked to run. Its hooks let a test act at
// the exact moments that matter: during prepare and during run.
type probeTool struct {
	spec      tools.Spec
	onPrepare func()
	onRun     func(ctx context.Context) error
	ran       atomic.Int32
	lastText  atomic.Value
}

type probeArtifact struct{ text string }

func newProbe() *probeTool {
	return &probeTool{spec: tools.Spec{
		Name: "probe", Description: "test probe", Kind: tools.KindBuiltin, Action: "test.probe", Effects: []string{"test.probe"},
		InputSchema: `{"type":"object","additionalProperties":false,"required":["text"],"properties":{"text":{"type":"string"}}}`,
	}}
}

func (p *probeTool) Spec() *tools.Spec { return &p.spec }

func (p *probeTool) Prepare(_ context.Context, _ *tools.Env, args map[string]any) (tools.Plan, error) {
	if p.onPrepare != nil {
		p.onPrepare()
	}
	text := args["text"].(string)
	return tools.Plan{Args: args, Resources: []tools.Resource{{"type": "text", "text": text}}, Artifact: probeArtifact{text}}, nil
}

func (p *probeTool) Run(ctx context.Context, _ *tools.Env, a any, _ tools.Limits) (tools.Result, error) {
	if p.onRun != nil {
		if err := p.onRun(ctx); err != nil {
			return tools.Result{}, err
		}
	}
	p.ran.Add(1)
	text := a.(probeArtifact).text
	p.lastText.Store(text)
	return tools.Result{Content: "ran " + text, Bytes: len(text)}, nil
}

type fixture struct {
	pl       *Pipeline
	eng      *decision.Engine // the pipeline's policy
	policies string           // the policy folder
	db       *store.DB
	path     string // of the database file
	store    audit.Store
	log      *audit.Log
	ws       string
}

func newFixture(t *testing.T, policy map[string]string, ts ...tools.Tool) *fixture {
	t.Helper()
	dir := t.TempDir()
	pdir := filepath.Join(dir, "policies")
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, src := range policy {
		if err := os.WriteFile(filepath.Join(pdir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	eng := decision.NewEngine(decision.Options{Dir: pdir})
	_ = eng.Load(context.Background()) // some tests want no policy at all
	db, err := store.Open(context.Background(), store.SQLite, filepath.Join(dir, "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	lg, err := audit.NewLog(db.Audit(), audit.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lg.Close(); db.Close() })
	wsDir := filepath.Join(dir, "ws")
	if err := os.MkdirAll(wsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ws, err := tools.OpenWorkspace(wsDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	reg, err := tools.NewRegistry(ts...)
	if err != nil {
		t.Fatal(err)
	}
	prep, err := prepare.New(reg, prepare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pl := New(Options{
		Registry: reg, Envs: map[string]*tools.Env{"acme": {Tenant: "acme", Workspace: ws}},
		Engine: Engine(eng), Preparer: prep, Invoker: invoke.New(invoke.Options{}), Audit: lg,
	})
	return &fixture{pl: pl, eng: eng, policies: pdir, db: db, path: filepath.Join(dir, "audit.db"), store: db.Audit(), log: lg, ws: wsDir}
}

var alice = &identity.Identity{Tenant: "acme", Principal: "alice", Roles: []string{"developer"}}

func (f *fixture) events(t *testing.T, callID string) []*audit.Event {
	t.Helper()
	page, err := f.log.Query(context.Background(), "acme", audit.Filter{CallID: callID, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	return page.Events
}

// Invariant 1: invocation ignores the raw request. The raw bytes are
// rewritten after they were decoded; the prepared call runs unchanged.
func TestPreparedArtifactRunsNotTheRawRequest(t *testing.T) {
	probe := newProbe()
	f := newFixture(t, map[string]string{"a.rego": allowAll, "b.rego": authzAllow}, probe)
	raw := []byte(`{"text":"ls -la"}`)
	probe.onPrepare = func() { copy(raw, []byte(`{"text":"rm -rf"}`)) }
	resp, err := f.pl.Call(context.Background(), Request{Identity: alice, Tool: "probe", Arguments: raw, CallID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Outcome != "ok" || probe.lastText.Load() != "ls -la" {
		t.Fatalf("outcome %s ran %q, want the prepared %q", resp.Outcome, probe.lastText.Load(), "ls -la")
	}
	evs := f.events(t, "c1")
	dec := evs[len(evs)-1]
	if dec.Phase != audit.PhaseDecision || dec.Input["args"].(map[string]any)["text"] != "ls -la" {
		t.Fatalf("audited document is not the prepared one: %+v", dec.Input)
	}
}

// Invariant 4: the decision event is committed before the tool starts.
func TestDecisionEventIsDurableBeforeTheToolRuns(t *testing.T) {
	probe := newProbe()
	f := newFixture(t, map[string]string{"a.rego": allowAll, "b.rego": authzAllow}, probe)
	var seen []*audit.Event
	probe.onRun = func(ctx context.Context) error {
		// Read the store directly, as another process would.
		page, err := f.store.Query(ctx, "acme", audit.Filter{CallID: "c2", Limit: 10})
		seen = page.Events
		return err
	}
	if _, err := f.pl.Call(context.Background(), Request{Identity: alice, Tool: "probe", Arguments: []byte(`{"text":"x"}`), CallID: "c2"}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0].Phase != audit.PhaseDecision || seen[0].Outcome != string(apiv1.OutcomeAllow) {
		t.Fatalf("when the tool started the store held %d events (%+v), want the committed allow decision", len(seen), seen)
	}
	evs := f.events(t, "c2")
	if len(evs) != 2 || evs[0].Phase != audit.PhaseResult || evs[0].Outcome != "ok" {
		t.Fatalf("want decision then result events, got %+v", evs)
	}
	if evs[0].RequestDigest != evs[1].RequestDigest || evs[0].RequestDigest == "" {
		t.Fatal("result and decision events must carry the same request digest")
	}
}

// Invariant 3 and 4: an audit store that cannot commit the decision event
// means nothing runs.
func TestAuditStoreDownMeansNothingRuns(t *testing.T) {
	probe := newProbe()
	f := newFixture(t, map[string]string{"a.rego": allowAll, "b.rego": authzAllow}, probe)
	f.db.Close()
	_, err := f.pl.Call(context.Background(), Request{Identity: alice, Tool: "probe", Arguments: []byte(`{"text":"x"}`)})
	if !errors.Is(err, ErrAudit) {
		t.Fatalf("err = %v, want ErrAudit", err)
	}
	if probe.ran.Load() != 0 {
		t.Fatal("the tool ran although its decision was never audited")
	}
}

// Invariant 3: no policy, an evaluation error, an undefined or malformed
// decision — nothing runs.
func TestPolicyFailuresFailClosed(t *testing.T) {
	cases := map[string]map[string]string{
		"no policy loaded":    {"a.rego": "package toolgate.availability\nallow if {"},
		"undefined decision":  {"a.rego": allowAll, "b.rego": "package toolgate.authz\ndecision := {\"allow\": true} if false\n"},
		"allow not boolean":   {"a.rego": allowAll, "b.rego": "package toolgate.authz\ndecision := {\"allow\": \"yes\"}\n"},
		"decision not object": {"a.rego": allowAll, "b.rego": "package toolgate.authz\ndecision := true\n"},
		"builtin error": {"a.rego": allowAll, "b.rego": `package toolgate.authz
decision := {"allow": to_number(input.args.text) > 0}
`},
		"availability builtin error": {"a.rego": "package toolgate.availability\nallow if to_number(input.tool.name) > 1\n", "b.rego": authzAllow},
		"mask not a set of strings":  {"a.rego": allowAll, "b.rego": authzAllow, "c.rego": "package toolgate.audit\nmask := 5\n"},
	}
	for name, policy := range cases {
		t.Run(name, func(t *testing.T) {
			probe := newProbe()
			f := newFixture(t, policy, probe)
			_, err := f.pl.Call(context.Background(), Request{Identity: alice, Tool: "probe", Arguments: []byte(`{"text":"abc"}`)})
			if !errors.Is(err, ErrPolicy) {
				t.Fatalf("err = %v, want ErrPolicy", err)
			}
			if probe.ran.Load() != 0 {
				t.Fatal("the tool ran although policy failed")
			}
		})
	}
}

// Invariant 5: internal failures reach logs and audit, never the model.
func TestToolFailuresSayNothingExtra(t *testing.T) {
	cases := map[string]struct {
		run  func(ctx context.Context) error
		want string
	}{
		"error with a host path": {func(context.Context) error {
			return errors.New("open /srv/tenants/acme/secret.txt: permission denied")
		}, "the tool failed"},
		"panic": {func(context.Context) error { panic("boom at /srv/x") }, "the tool failed"},
		"target changed": {func(context.Context) error {
			return errors.Join(tools.ErrTargetChanged, errors.New("inode 1234 != 5678"))
		}, "the tool failed"},
		"model-facing error": {func(context.Context) error {
			return &tools.ModelError{Message: "old_string not found in file"}
		}, "old_string not found in file"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			probe := newProbe()
			probe.onRun = tc.run
			f := newFixture(t, map[string]string{"a.rego": allowAll, "b.rego": authzAllow}, probe)
			resp, err := f.pl.Call(context.Background(), Request{Identity: alice, Tool: "probe", Arguments: []byte(`{"text":"x"}`), CallID: "c3"})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Outcome != "tool_error" || !resp.IsError || resp.Content != tc.want {
				t.Fatalf("got %s %q, want tool_error %q", resp.Outcome, resp.Content, tc.want)
			}
			evs := f.events(t, "c3")
			if evs[0].Phase != audit.PhaseResult || evs[0].Result == nil || evs[0].Result.Error == "" {
				t.Fatalf("the internal cause must be in the result event: %+v", evs[0])
			}
		})
	}
}

// Invariant 2: a symlink swapped after the decision is not followed, in
// the full pipeline with the real read-file tool.
func TestSymlinkSwappedAfterDecisionIsNotFollowed(t *testing.T) {
	rf := &swapBeforeRun{Tool: workspace.NewReadFile()}
	f := newFixture(t, map[string]string{"a.rego": allowAll, "b.rego": `package toolgate.authz

decision := {"allow": true} if {
	every r in input.resources { r.path != "secret.txt" }
}
`}, rf)
	os.WriteFile(filepath.Join(f.ws, "public.txt"), []byte("public\n"), 0o644)
	os.WriteFile(filepath.Join(f.ws, "secret.txt"), []byte("TOP SECRET\n"), 0o644)
	rf.swap = func() {
		os.Remove(filepath.Join(f.ws, "public.txt"))
		if err := os.Symlink("secret.txt", filepath.Join(f.ws, "public.txt")); err != nil {
			t.Error(err)
		}
	}
	resp, err := f.pl.Call(context.Background(), Request{Identity: alice, Tool: "read-file", Arguments: []byte(`{"path":"public.txt"}`), CallID: "c4"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Outcome != "tool_error" || strings.Contains(resp.Content, "SECRET") {
		t.Fatalf("got %s %q, want tool_error without the secret", resp.Outcome, resp.Content)
	}
	evs := f.events(t, "c4")
	if !strings.Contains(evs[0].Result.Error, tools.ErrTargetChanged.Error()) {
		t.Fatalf("result event should record the changed target: %+v", evs[0].Result)
	}
}

// swapBeforeRun wraps a real tool and changes the world between the
// decision and the run.
type swapBeforeRun struct {
	tools.Tool
	swap func()
}

func (s *swapBeforeRun) Run(ctx context.Context, env *tools.Env, a any, lim tools.Limits) (tools.Result, error) {
	s.swap()
	return s.Tool.Run(ctx, env, a, lim)
}

// Every outcome is audited with the same detail: denied, unavailable and
// invalid calls leave a decision event, unknown and hidden tools answer
// identically.
func TestEveryOutcomeIsAudited(t *testing.T) {
	probe := newProbe()
	f := newFixture(t, map[string]string{
		"a.rego": "package toolgate.availability\nallow if input.principal.id == \"alice\"\n",
		"b.rego": "package toolgate.authz\ndecision := {\"allow\": input.args.text != \"no\", \"reasons\": [\"r\"], \"message\": \"not that\"}\n",
	}, probe)
	bob := &identity.Identity{Tenant: "acme", Principal: "bob"}
	cases := []struct {
		id      *identity.Identity
		tool    string
		args    string
		outcome apiv1.Outcome
		content string
	}{
		{alice, "probe", `{"text":"yes"}`, "ok", "ran yes"},
		{alice, "probe", `{"text":"no"}`, "denied", "not that"},
		{alice, "probe", `{"text":1}`, "invalid_arguments", "invalid arguments: /text: must be string"},
		{bob, "probe", `{"text":"yes"}`, "unavailable", "tool unavailable"},
		{alice, "nope", `{"text":"yes"}`, "unavailable", "tool unavailable"},
	}
	for i, tc := range cases {
		callID := "call-" + string(rune('a'+i))
		resp, err := f.pl.Call(context.Background(), Request{Identity: tc.id, Tool: tc.tool, Arguments: []byte(tc.args), CallID: callID})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Outcome != tc.outcome || resp.Content != tc.content {
			t.Fatalf("%s: got %s %q, want %s %q", callID, resp.Outcome, resp.Content, tc.outcome, tc.content)
		}
		evs := f.events(t, callID)
		dec := evs[len(evs)-1]
		want := tc.outcome
		if want == "ok" {
			want = apiv1.OutcomeAllow
		}
		if dec.Phase != audit.PhaseDecision || dec.Outcome != string(want) || dec.PolicyRevision == "" || dec.Principal != tc.id.Principal || len(dec.Reasons) == 0 {
			t.Fatalf("%s: decision event %+v", callID, dec)
		}
	}
	if probe.ran.Load() != 1 {
		t.Fatalf("tool ran %d times, want once", probe.ran.Load())
	}
	res, err := f.log.Verify(context.Background(), "acme")
	if err != nil || !res.OK || res.EventsChecked != 6 {
		t.Fatalf("verify = %+v, %v", res, err)
	}
}
