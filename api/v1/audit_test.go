package v1_test

import (
	"errors"
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

// LeafVersionOf reads the version every verifier checks before hashing:
// absent is 1, 1 and 2 are known, anything else is ErrUnknownLeafVersion
// naming the event; HashOf and ComputeHash refuse what it refuses.
func TestLeafVersionOfAndHashOf(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want int // 0: ErrUnknownLeafVersion
	}{
		{`{"id":"e-1","tenant":"acme"}`, 1},
		{`{"id":"e-1","leaf_version":1}`, 1},
		{`{"id":"e-1","leaf_version":2}`, 2},
		{`{"leaf_version":2,"id":"e-1","nested":{"leaf_version":3}}`, 2},
		{`{"id":"e-1","leaf_version":3}`, 0},
		{`{"id":"e-1","leaf_version":0}`, 0},
		{`{"id":"e-1","leaf_version":-2}`, 0},
		{`{"id":"e-1","leaf_version":2.5}`, 0},
		{`{"id":"e-1","leaf_version":"2"}`, 0},
		{`{"id":"e-1","leaf_version":null}`, 0},
		{`{"id":"e-1","leaf_version":[2]}`, 0},
	} {
		got, err := apiv1.LeafVersionOf([]byte(c.raw))
		h, herr := apiv1.HashOf([]byte(c.raw))
		if c.want == 0 {
			if !errors.Is(err, apiv1.ErrUnknownLeafVersion) || !strings.Contains(err.Error(), `"e-1"`) {
				t.Errorf("LeafVersionOf(%s) = %d, %v; want ErrUnknownLeafVersion naming e-1", c.raw, got, err)
			}
			if !errors.Is(herr, apiv1.ErrUnknownLeafVersion) {
				t.Errorf("HashOf(%s) = %s, %v; want ErrUnknownLeafVersion", c.raw, h, herr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("LeafVersionOf(%s) = %d, %v; want %d", c.raw, got, err, c.want)
		}
		if herr != nil {
			t.Errorf("HashOf(%s): %v", c.raw, herr)
		}
	}
	ev := event()
	ev.LeafVersion = 3
	if h, err := ev.ComputeHash(); !errors.Is(err, apiv1.ErrUnknownLeafVersion) {
		t.Errorf("ComputeHash of a version 3 event = %s, %v", h, err)
	}
	ev.LeafVersion = 2
	if _, err := ev.ComputeHash(); err != nil {
		t.Errorf("ComputeHash of a version 2 event: %v", err)
	}
}
