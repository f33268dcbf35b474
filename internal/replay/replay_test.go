package replay_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/decision"
	"github.com/toolgate/toolgate/internal/replay"
	"github.com/toolgate/toolgate/internal/store"
)

// candidate allows reads and globs (globs after approval), and writes
// whose content has no "password": the content is what the audit log
// masks, so a masked write cannot be replayed.
const candidate = `package toolgate.authz

default allow := false

allow if input.tool.name in {"read-file", "glob"}

allow if {
	input.tool.name == "write-file"
	not contains(input.args.content, "password")
}

default approval := false

approval if input.tool.name == "glob"

decision := {"allow": allow, "approval_required": approval}
`

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

type seed struct {
	id, tenant, tool, phase, outcome string
	minute                           int
	args                             map[string]any
	approval                         bool
}

func TestReplayCountsMatchAHandComputedExpectation(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := store.Open(ctx, store.SQLite, filepath.Join(dir, "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lg, err := audit.NewLog(db.Audit(), audit.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()

	masked := map[string]any{"path": "a.txt", "content": audit.MaskedValue}
	for _, s := range []seed{
		{id: "e01", tool: "read-file", outcome: "allow", minute: 1},                                                          // unchanged
		{id: "e02", tool: "read-file", outcome: "denied", minute: 2},                                                         // deny → allow
		{id: "e03", tool: "read-file", outcome: "denied", minute: 3},                                                         // deny → allow
		{id: "e04", tool: "glob", outcome: "allow", minute: 4},                                                               // allow → approval
		{id: "e05", tool: "grep", outcome: "allow", minute: 5},                                                               // allow → deny
		{id: "e06", tool: "write-file", outcome: "allow", minute: 6, args: masked},                                           // not replayable
		{id: "e07", tool: "write-file", outcome: "denied", minute: 7, args: map[string]any{"path": "a", "content": "hello"}}, // deny → allow
		{id: "e08", tool: "bash", outcome: "unavailable", minute: 8},                                                         // skipped
		{id: "e09", tool: "write-file", outcome: "denied", minute: 9, approval: true},                                        // skipped: an approval's second decision
		{id: "e10", tool: "grep", outcome: "approval_required", minute: 10},                                                  // approval → deny
		{id: "e11", tool: "read-file", outcome: "allow", minute: 11, args: masked},                                           // masked but unused: unchanged
		{id: "e12", tool: "read-file", outcome: "ok", phase: audit.PhaseResult, minute: 12},                                  // a result: not read
		{id: "e13", tool: "read-file", outcome: "denied", minute: 120},                                                       // after the window
		{id: "e14", tenant: "globex", tool: "read-file", outcome: "denied", minute: 14},                                      // another tenant
	} {
		if s.tenant == "" {
			s.tenant = "acme"
		}
		if s.phase == "" {
			s.phase = audit.PhaseDecision
		}
		if s.args == nil {
			s.args = map[string]any{"path": "docs/a.md"}
		}
		in := map[string]any{
			"tenant": s.tenant, "principal": map[string]any{"id": "alice", "roles": []any{"developer"}},
			"tool": map[string]any{"name": s.tool}, "args": s.args, "resources": []any{}, "digest": "sha256:x",
		}
		if s.approval {
			in["approval"] = map[string]any{"id": "bob", "roles": []any{"approver"}}
		}
		if s.outcome == "unavailable" {
			in = map[string]any{"tenant": s.tenant, "tool": map[string]any{"name": s.tool}}
		}
		err := lg.Append(ctx, &audit.Event{
			ID: s.id, Time: audit.FormatTime(t0.Add(time.Duration(s.minute) * time.Minute)), Tenant: s.tenant,
			Principal: "alice", CallID: "c-" + s.id, DecisionID: "d-" + s.id, Tool: s.tool, Phase: s.phase,
			Outcome: s.outcome, Reasons: []string{}, Input: in, DurationsUS: map[string]int64{},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Replay reads what is integrated (queryable by phase).
	for _, tenant := range []string{"acme", "globex"} {
		must(t, lg.Sync(ctx, tenant))
	}

	pdir := filepath.Join(dir, "candidate")
	must(t, os.MkdirAll(pdir, 0o755))
	must(t, os.WriteFile(filepath.Join(pdir, "authz.rego"), []byte(candidate), 0o644))
	must(t, os.WriteFile(filepath.Join(pdir, "availability.rego"), []byte("package toolgate.availability\n\nallow := true\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(pdir, ".manifest"), []byte(`{"revision":"next"}`), 0o644))
	eng := decision.NewEngine(decision.Options{Dir: pdir})
	must(t, eng.Load(ctx))
	rev, _ := eng.Current()

	rep, err := replay.Run(ctx, lg, rev, replay.Options{Tenants: []string{"acme"}, From: t0, To: t0.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	// Hand-computed from the table above.
	want := &replay.Report{
		Candidate: "next", Events: 11, Replayed: 8, Unchanged: 2, Changed: 6, Skipped: 2,
		NotReplayable: replay.Group{Count: 1, Samples: []string{"e06"}},
		ByDirection: map[string]*replay.Group{
			"deny_to_allow":     {Count: 3, Samples: []string{"e07", "e03", "e02"}},
			"allow_to_approval": {Count: 1, Samples: []string{"e04"}},
			"allow_to_deny":     {Count: 1, Samples: []string{"e05"}},
			"approval_to_deny":  {Count: 1, Samples: []string{"e10"}},
		},
		ByTool: map[string]*replay.ToolGroup{
			"read-file":  {Changed: 2, ByDirection: map[string]int{"deny_to_allow": 2}},
			"write-file": {Changed: 1, ByDirection: map[string]int{"deny_to_allow": 1}},
			"glob":       {Changed: 1, ByDirection: map[string]int{"allow_to_approval": 1}},
			"grep":       {Changed: 2, ByDirection: map[string]int{"allow_to_deny": 1, "approval_to_deny": 1}},
		},
	}
	if !reflect.DeepEqual(rep, want) {
		t.Fatalf("report:\n%s\nwant:\n%s", rep.Text(), want.Text())
	}

	// Asked for them, the report lists the first changed decisions one
	// by one, newest first, with the old and the new outcome.
	rep, err = replay.Run(ctx, lg, rev, replay.Options{Tenants: []string{"acme"}, From: t0, To: t0.Add(time.Hour), Changes: 3})
	if err != nil {
		t.Fatal(err)
	}
	wantChanges := []replay.Change{
		{EventID: "e10", Time: audit.FormatTime(t0.Add(10 * time.Minute)), Tool: "grep", Principal: "alice", From: "approval", To: "deny"},
		{EventID: "e07", Time: audit.FormatTime(t0.Add(7 * time.Minute)), Tool: "write-file", Principal: "alice", From: "deny", To: "allow"},
		{EventID: "e05", Time: audit.FormatTime(t0.Add(5 * time.Minute)), Tool: "grep", Principal: "alice", From: "allow", To: "deny"},
	}
	if rep.Changed != 6 || !reflect.DeepEqual(rep.Changes, wantChanges) {
		t.Fatalf("listed changes (of %d): %+v", rep.Changed, rep.Changes)
	}

	// Without bounds and with both tenants, the late event and globex's
	// count too: two more deny → allow reads.
	rep, err = replay.Run(ctx, lg, rev, replay.Options{Tenants: []string{"acme", "globex"}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Events != 13 || rep.ByDirection["deny_to_allow"].Count != 5 || rep.ByTool["read-file"].Changed != 4 {
		t.Fatalf("unbounded replay:\n%s", rep.Text())
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
