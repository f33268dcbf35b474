// Package approvaltest is the conformance suite every approval.Store
// passes (SQLite and PostgreSQL alike).
package approvaltest

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/approval"
)

// t0 is the suite's clock origin.
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// Pending returns a pending approval of tenant created at t0+created that
// expires ttl later.
func Pending(id, tenant, callID string, created, ttl time.Duration) *approval.Approval {
	return &approval.Approval{
		ID: id, Tenant: tenant, CallID: callID, DecisionID: "d-" + id, SessionID: "s-1",
		Principal: "alice", Client: "platform", Tool: "write-file", Action: "fs.write",
		Digest: "sha256:" + fmt.Sprintf("%064d", 7), PolicyRevision: "rev-1",
		Document: map[string]any{
			"tenant": tenant, "args": map[string]any{"path": "release/VERSION", "content": "2\n", "n": 1.5},
			"resources": []any{map[string]any{"type": "file", "path": "release/VERSION", "access": "write"}},
			"principal": map[string]any{"id": "alice", "roles": []any{"developer"}, "claims": map[string]any{"exp": 1.7e9}},
		},
		Input:       map[string]any{"args": map[string]any{"content": "**masked**"}},
		Reasons:     []string{"approval required: writes to release/** need a human"},
		Obligations: map[string]any{"timeout_ms": 5000.0},
		CreatedAt:   t0.Add(created),
		ExpiresAt:   t0.Add(created + ttl),
	}
}

// StoreSuite runs the conformance tests against stores that open returns
// (a fresh, empty store per call), questions included.
func StoreSuite(t *testing.T, open func(t *testing.T) approval.Store) {
	questionSuite(t, open)

	t.Run("a created approval reads back exactly and pending", func(t *testing.T) {
		s := open(t)
		want := Pending("a1", "acme", "c1", 0, time.Hour)
		mustCreate(t, s, want)
		got, err := s.Get(t.Context(), "acme", "a1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != approval.StatusPending || got.Outcome != "" || got.Result != nil || !got.DecidedAt.IsZero() {
			t.Fatalf("new approval state: %+v", got)
		}
		got.Status = ""
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
		}
		byCall, err := s.ByCall(t.Context(), "acme", "c1")
		if err != nil || byCall.ID != "a1" {
			t.Fatalf("ByCall: %v %v", byCall, err)
		}
	})

	t.Run("pending counts the tenant's unexpired pending approvals and questions", func(t *testing.T) {
		s := open(t)
		mustCreate(t, s, Pending("a1", "acme", "c1", 0, time.Hour))
		mustCreate(t, s, Pending("a2", "acme", "c2", 0, time.Hour))
		mustCreate(t, s, Pending("a3", "acme", "c3", 0, 10*time.Minute)) // past its expiry below
		mustCreate(t, s, Pending("a4", "acme", "c4", 0, time.Hour))
		mustCreate(t, s, Pending("g1", "globex", "c1", 0, time.Hour))
		if _, err := s.Decide(t.Context(), "acme", "a4", decision(approval.StatusDenied, 1)); err != nil {
			t.Fatal(err)
		}
		for _, q := range []*approval.Question{
			PendingQuestion("q1", "acme", "c5", 0, time.Hour),
			PendingQuestion("q2", "acme", "c6", 0, time.Hour),
		} {
			if err := s.CreateQuestion(t.Context(), q); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.AnswerQuestion(t.Context(), "acme", "q2", approval.Answer{Text: "yes", By: "alice", At: t0.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		// a1, a2 and q1 are pending at t0+30m; a3 expired, a4 was denied,
		// q2 answered, g1 is globex's.
		n, err := s.Pending(t.Context(), "acme", t0.Add(30*time.Minute))
		if err != nil || n != 3 {
			t.Fatalf("Pending(acme) = %d, %v; want 3", n, err)
		}
		if n, err := s.Pending(t.Context(), "globex", t0.Add(30*time.Minute)); err != nil || n != 1 {
			t.Fatalf("Pending(globex) = %d, %v; want 1", n, err)
		}
		if n, err := s.Pending(t.Context(), "acme", t0.Add(2*time.Hour)); err != nil || n != 0 {
			t.Fatalf("Pending(acme) after every expiry = %d, %v; want 0", n, err)
		}
	})

	t.Run("another tenant's approval does not exist", func(t *testing.T) {
		s := open(t)
		mustCreate(t, s, Pending("a1", "acme", "c1", 0, time.Hour))
		if _, err := s.Get(t.Context(), "globex", "a1"); !errors.Is(err, approval.ErrNotFound) {
			t.Fatalf("Get from globex: %v", err)
		}
		if _, err := s.ByCall(t.Context(), "globex", "c1"); !errors.Is(err, approval.ErrNotFound) {
			t.Fatalf("ByCall from globex: %v", err)
		}
		if _, err := s.Decide(t.Context(), "globex", "a1", decision(approval.StatusApproved, 1)); !errors.Is(err, approval.ErrNotFound) {
			t.Fatalf("Decide from globex: %v", err)
		}
		if l, err := s.List(t.Context(), "globex", approval.Filter{}); err != nil || len(l) != 0 {
			t.Fatalf("List from globex: %v %v", l, err)
		}
		if ex, err := s.Expire(t.Context(), "globex", t0.Add(2*time.Hour)); err != nil || len(ex) != 0 {
			t.Fatalf("Expire of globex: %v %v", ex, err)
		}
		if a, _ := s.Get(t.Context(), "acme", "a1"); a.Status != approval.StatusPending {
			t.Fatalf("acme's approval changed: %+v", a)
		}
	})

	t.Run("list filters by status, newest first, limited", func(t *testing.T) {
		s := open(t)
		for i := range 5 {
			mustCreate(t, s, Pending(fmt.Sprintf("a%d", i), "acme", fmt.Sprintf("c%d", i), time.Duration(i)*time.Minute, time.Hour))
		}
		if _, err := s.Decide(t.Context(), "acme", "a1", decision(approval.StatusDenied, 10)); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			f    approval.Filter
			want []string
		}{
			{approval.Filter{}, []string{"a4", "a3", "a2", "a1", "a0"}},
			{approval.Filter{Status: approval.StatusPending}, []string{"a4", "a3", "a2", "a0"}},
			{approval.Filter{Status: approval.StatusDenied}, []string{"a1"}},
			{approval.Filter{Status: approval.StatusPending, Limit: 2}, []string{"a4", "a3"}},
		} {
			l, err := s.List(t.Context(), "acme", tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(l); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("List(%+v) = %v, want %v", tc.f, got, tc.want)
			}
		}
	})

	t.Run("a pending approval is decided once", func(t *testing.T) {
		s := open(t)
		mustCreate(t, s, Pending("a1", "acme", "c1", 0, time.Hour))
		d := approval.Decision{Status: approval.StatusApproved, By: "bob", Comment: "ok", At: t0.Add(time.Minute)}
		got, err := s.Decide(t.Context(), "acme", "a1", d)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != approval.StatusApproved || got.DecidedBy != "bob" || got.Comment != "ok" || !got.DecidedAt.Equal(d.At) {
			t.Fatalf("decided: %+v", got)
		}
		for _, again := range []string{approval.StatusApproved, approval.StatusDenied} {
			if _, err := s.Decide(t.Context(), "acme", "a1", decision(again, 2)); !errors.Is(err, approval.ErrNotPending) {
				t.Fatalf("second decision (%s): %v, want ErrNotPending", again, err)
			}
		}
	})

	t.Run("concurrent approvers: exactly one wins", func(t *testing.T) {
		s := open(t)
		mustCreate(t, s, Pending("a1", "acme", "c1", 0, time.Hour))
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				_, errs[i] = s.Decide(t.Context(), "acme", "a1", approval.Decision{Status: approval.StatusApproved, By: fmt.Sprint("approver-", i), At: t0.Add(time.Minute)})
			})
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, approval.ErrNotPending):
				t.Errorf("loser: %v, want ErrNotPending", err)
			}
		}
		if won != 1 {
			t.Fatalf("%d approvers won, want 1", won)
		}
	})

	t.Run("an expired approval cannot be decided and expires once", func(t *testing.T) {
		s := open(t)
		mustCreate(t, s, Pending("a1", "acme", "c1", 0, time.Hour))
		mustCreate(t, s, Pending("a2", "acme", "c2", 0, 3*time.Hour))
		late := approval.Decision{Status: approval.StatusApproved, By: "bob", At: t0.Add(time.Hour)}
		if _, err := s.Decide(t.Context(), "acme", "a1", late); !errors.Is(err, approval.ErrExpired) {
			t.Fatalf("decide at expiry: %v, want ErrExpired", err)
		}
		ex, err := s.Expire(t.Context(), "acme", t0.Add(2*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(ex); !reflect.DeepEqual(got, []string{"a1"}) || ex[0].Status != approval.StatusExpired {
			t.Fatalf("expired %v (%+v), want [a1]", got, ex)
		}
		if ex, err := s.Expire(t.Context(), "acme", t0.Add(2*time.Hour)); err != nil || len(ex) != 0 {
			t.Fatalf("second expiry: %v %v", ids(ex), err)
		}
		if _, err := s.Decide(t.Context(), "acme", "a1", late); !errors.Is(err, approval.ErrNotPending) {
			t.Fatalf("decide an expired approval: %v, want ErrNotPending", err)
		}
		if a, _ := s.Get(t.Context(), "acme", "a2"); a.Status != approval.StatusPending {
			t.Fatalf("a2 expired early: %+v", a)
		}
	})

	t.Run("finish records the outcome of an approved call once", func(t *testing.T) {
		s := open(t)
		mustCreate(t, s, Pending("a1", "acme", "c1", 0, time.Hour))
		mustCreate(t, s, Pending("a2", "acme", "c2", 0, time.Hour))
		res := approval.Result{Content: "wrote 2 bytes", Data: map[string]any{"bytes": 2.0}}
		if err := s.Finish(t.Context(), "acme", "a1", "ok", res); !errors.Is(err, approval.ErrFinished) {
			t.Fatalf("finish a pending approval: %v, want ErrFinished", err)
		}
		if _, err := s.Decide(t.Context(), "acme", "a1", decision(approval.StatusApproved, 1)); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(t.Context(), "acme", "a1", "ok", res); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(t.Context(), "acme", "a1", "tool_error", approval.Result{}); !errors.Is(err, approval.ErrFinished) {
			t.Fatalf("second finish: %v, want ErrFinished", err)
		}
		a, err := s.Get(t.Context(), "acme", "a1")
		if err != nil {
			t.Fatal(err)
		}
		if a.Outcome != "ok" || a.Result == nil || !reflect.DeepEqual(*a.Result, res) {
			t.Fatalf("finished: %+v %+v", a, a.Result)
		}
		if _, err := s.Decide(t.Context(), "acme", "a2", decision(approval.StatusDenied, 1)); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(t.Context(), "acme", "a2", "ok", res); !errors.Is(err, approval.ErrFinished) {
			t.Fatalf("finish a denied approval: %v, want ErrFinished", err)
		}
	})
}

func decision(status string, minutes int) approval.Decision {
	return approval.Decision{Status: status, By: "bob", At: t0.Add(time.Duration(minutes) * time.Minute)}
}

func mustCreate(t *testing.T, s approval.Store, a *approval.Approval) {
	t.Helper()
	if err := s.Create(t.Context(), a); err != nil {
		t.Fatal(err)
	}
}

func ids(l []*approval.Approval) []string {
	out := []string{}
	for _, a := range l {
		out = append(out, a.ID)
	}
	return out
}
