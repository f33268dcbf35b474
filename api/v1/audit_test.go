package v1_test

import (
	"strings"
	"testing"

	"github.com/go-json-experiment/json"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/audit"
)

func event() *apiv1.AuditEvent {
	idx := int64(7)
	return &apiv1.AuditEvent{
		ID: "e-1", Time: "2026-12-03T08:00:00.000Z", Tenant: "acme", Principal: "alice", CallID: "c-1",
		DecisionID: "d-1", Tool: "write-file", Action: "fs.write", Phase: apiv1.PhaseDecision,
		Outcome: "approval_required", Reasons: []string{"approval required"}, PolicyRevision: "r",
		RequestDigest: "sha256:00", Input: map[string]any{"args": map[string]any{"n": 30000.0, "s": "é\u2028"}},
		Obligations: map[string]any{"timeout_ms": int64(30000)},
		Decision:    map[string]any{"allow": true, "approval_required": true, "obligations": map[string]any{"timeout_ms": int64(30000)}},
		DurationsUS: map[string]int64{"decide": 12},
		Approval:    &apiv1.AuditApproval{ID: "a-1", ExpiresAt: "2026-12-03T09:00:00.000Z"},
		Shadow:      &apiv1.AuditShadow{Revision: "s", Outcome: "denied", Diverged: true},
		Hash:        "sha256:ignored", LogIndex: &idx,
	}
}

// The SDK's hash is the gateway's: ComputeHash and HashOf agree with
// internal/audit.ComputeHash on the same event, whatever its hash and
// log_index members say.
func TestComputeHashIsTheGatewaysHash(t *testing.T) {
	ev := event()
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	want, err := audit.ComputeHash(raw)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ev.ComputeHash(); err != nil || got != want {
		t.Fatalf("ComputeHash = %s, %v; the gateway's %s", got, err, want)
	}
	if got, err := apiv1.HashOf(raw); err != nil || got != want {
		t.Fatalf("HashOf = %s, %v; the gateway's %s", got, err, want)
	}
	ev.Hash, ev.LogIndex = "sha256:other", nil
	if got, _ := ev.ComputeHash(); got != want {
		t.Fatal("hash or log_index changed the hash")
	}
	ev.Shadow.Diverged = false
	if got, _ := ev.ComputeHash(); got == want {
		t.Fatal("a changed member kept the hash")
	}
}

// Hostile input: what is not one JSON object hashes to nothing.
func TestHashOfRefusesWhatIsNotOneObject(t *testing.T) {
	for _, raw := range []string{
		`{"id":"a","id":"b"}`, `[]`, `null`, `"x"`, `{"id":"a"} {}`, `{"id":"a"`, "{\"id\":\"\xff\"}", ``,
	} {
		if h, err := apiv1.HashOf([]byte(raw)); err == nil {
			t.Errorf("HashOf(%q) = %s, want an error", raw, h)
		}
	}
	if _, err := apiv1.HashOf([]byte(`{"id":"a","nested":{"x":1,"x":2}}`)); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Errorf("a duplicate nested member: %v", err)
	}
}
