package pipeline

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/approval"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/invoke"
	"github.com/toolgate/toolgate/internal/tools/ask"
)

// failInserts makes every insert into table fail, from a connection of
// its own to the database file (as a full disk or a broken constraint
// would), until the returned function removes the fault.
func failInserts(t *testing.T, path, table string) (heal func()) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	exec := func(q string) {
		t.Helper()
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	exec(`CREATE TRIGGER fail_` + table + ` BEFORE INSERT ON ` + table + ` BEGIN SELECT RAISE(ABORT, 'injected: ` + table + ` insert fails'); END`)
	return func() { exec(`DROP TRIGGER fail_` + table) }
}

// A held call whose approval cannot be stored leaves neither its decision
// event nor an approval behind: the caller gets ErrAudit (503 unavailable)
// and nothing runs. Before, the decision event naming the approval id
// committed first and the approval insert failed after it.
func TestAHeldCallCommitsItsDecisionAndItsApprovalTogether(t *testing.T) {
	f, probe := holdingFixture(t, "")
	ctx := context.Background()
	heal := failInserts(t, f.path, "approvals")

	_, err := f.pl.Call(ctx, Request{Identity: alice, Tool: "probe", Arguments: []byte(`{"text":"x"}`), CallID: "held-1"})
	if !errors.Is(err, ErrAudit) {
		t.Fatalf("held call whose approval cannot be stored = %v, want ErrAudit", err)
	}
	if !strings.Contains(err.Error(), "injected: approvals insert fails") {
		t.Fatalf("the error (logged, never shown to the caller) does not say why: %v", err)
	}
	if probe.ran.Load() != 0 {
		t.Fatal("the tool ran")
	}
	if evs := f.events(t, "held-1"); len(evs) != 0 {
		t.Fatalf("the failed hold left %d audit events: %+v", len(evs), evs[0])
	}
	if l, err := f.pl.o.Approvals.List(ctx, "acme", approval.Filter{}); err != nil || len(l) != 0 {
		t.Fatalf("the failed hold left approvals: %d, %v", len(l), err)
	}
	if _, err := f.pl.CallApproval(ctx, alice, "held-1"); !errors.Is(err, ErrApprovalNotFound) {
		t.Fatalf("CallApproval after the failed hold = %v, want ErrApprovalNotFound", err)
	}

	// Once approvals can be stored again, a held call leaves both, and
	// the chain verifies.
	heal()
	resp, err := f.pl.Call(ctx, Request{Identity: alice, Tool: "probe", Arguments: []byte(`{"text":"x"}`), CallID: "held-2"})
	if err != nil || resp.Outcome != apiv1.OutcomeApprovalRequired {
		t.Fatalf("held call after healing: %+v, %v", resp, err)
	}
	evs := f.events(t, "held-2")
	if len(evs) != 1 || evs[0].Approval == nil || evs[0].Approval.ID != resp.Data["approval_id"] {
		t.Fatalf("decision event of the held call: %+v", evs)
	}
	if a, err := f.pl.o.Approvals.Get(ctx, "acme", evs[0].Approval.ID); err != nil || a.DecisionID != evs[0].DecisionID {
		t.Fatalf("the audited approval id: %+v, %v", a, err)
	}
	if res, err := f.log.Verify(ctx, "acme"); err != nil || !res.OK || res.EventsChecked != 1 {
		t.Fatalf("Verify = %+v, %v", res, err)
	}
}

// An ask-user call whose question cannot be stored fails (the model must
// not wait for an answer that can never come); no question exists, and no
// result event names one.
func TestAnAskUserQuestionCommitsWithItsResultEvent(t *testing.T) {
	f, _ := askingFixture(t)
	ctx := context.Background()
	heal := failInserts(t, f.path, "questions")

	resp, err := f.pl.Call(ctx, Request{Identity: alice, Tool: ask.Name, Arguments: []byte(`{"question":"Deploy?"}`), CallID: "ask-1"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Outcome != apiv1.OutcomeToolError || resp.Content != invoke.ToolFailed || !resp.IsError || resp.Data != nil {
		t.Fatalf("ask-user whose question cannot be stored: %+v", resp)
	}
	if _, err := f.pl.CallQuestion(ctx, alice, "ask-1"); !errors.Is(err, ErrQuestionNotFound) {
		t.Fatalf("CallQuestion = %v, want ErrQuestionNotFound", err)
	}
	evs := f.events(t, "ask-1") // newest first
	if len(evs) != 2 || evs[0].Phase != audit.PhaseResult || evs[0].Outcome != string(apiv1.OutcomeToolError) ||
		evs[0].Question != nil || evs[1].Phase != audit.PhaseDecision {
		t.Fatalf("events of the failed ask: %+v", evs)
	}

	heal()
	qid := askQuestion(t, f, "ask-2", `{"question":"Deploy?"}`)
	evs = f.events(t, "ask-2")
	if len(evs) != 2 || evs[0].Question == nil || evs[0].Question.ID != qid {
		t.Fatalf("result event of the asked question: %+v", evs)
	}
	if q, err := f.pl.o.Approvals.Question(ctx, "acme", qid); err != nil || q.DecisionID != evs[0].DecisionID {
		t.Fatalf("the audited question: %+v, %v", q, err)
	}
}
