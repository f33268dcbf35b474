// Package idemtest is the conformance suite every idempotency.Store passes
// (SQLite and PostgreSQL, in internal/store).
package idemtest

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/idempotency"
)

// t0 is the suite's clock origin: every time is explicit, nothing sleeps.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Pending returns a key of tenant and callID held by decisionID, reserved
// at t0+at with a lease of lease and kept ttl after that.
func Pending(tenant, callID, decisionID string, at, lease, ttl time.Duration) *idempotency.Key {
	return &idempotency.Key{
		Tenant: tenant, CallID: callID, DecisionID: decisionID,
		Fingerprint: "sha256:" + fmt.Sprintf("%064d", len(callID)),
		State:       idempotency.StatePending,
		CreatedAt:   t0.Add(at), LeaseUntil: t0.Add(at + lease), ExpiresAt: t0.Add(at + ttl),
	}
}

// StoreSuite runs the conformance tests on stores that open returns (a
// fresh, empty one each time).
func StoreSuite(t *testing.T, open func(t *testing.T) idempotency.Store) {
	t.Run("a reserved key reads back pending, exactly", func(t *testing.T) {
		s := open(t)
		want := Pending("acme", "c1", "d1", 0, time.Minute, time.Hour)
		reserve(t, s, want, t0)
		got, err := s.Get(t.Context(), "acme", "c1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Fingerprint != want.Fingerprint || got.DecisionID != "d1" || got.State != idempotency.StatePending ||
			!got.CreatedAt.Equal(want.CreatedAt) || !got.LeaseUntil.Equal(want.LeaseUntil) ||
			!got.ExpiresAt.Equal(want.ExpiresAt) || got.Response != nil {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
		}
	})

	t.Run("a second reservation gets the key that is there", func(t *testing.T) {
		s := open(t)
		reserve(t, s, Pending("acme", "c1", "d1", 0, time.Minute, time.Hour), t0)
		other := Pending("acme", "c1", "d2", time.Second, time.Minute, time.Hour)
		other.Fingerprint = "sha256:other"
		cur, err := s.Reserve(t.Context(), other, t0.Add(time.Second))
		if err != nil || cur == nil || cur.DecisionID != "d1" || cur.Fingerprint == other.Fingerprint {
			t.Fatalf("second Reserve = %+v, %v; want the first key", cur, err)
		}
	})

	t.Run("concurrent reservations: exactly one wins", func(t *testing.T) {
		s := open(t)
		const n = 8
		var wg sync.WaitGroup
		won := make([]bool, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				cur, err := s.Reserve(t.Context(), Pending("acme", "race", fmt.Sprint("d", i), 0, time.Minute, time.Hour), t0)
				won[i], errs[i] = err == nil && cur == nil, err
			})
		}
		wg.Wait()
		winners := 0
		for i := range n {
			if errs[i] != nil {
				t.Errorf("reservation %d: %v", i, errs[i])
			}
			if won[i] {
				winners++
			}
		}
		if winners != 1 {
			t.Fatalf("%d reservations won, want 1", winners)
		}
	})

	t.Run("another tenant's key does not exist", func(t *testing.T) {
		s := open(t)
		reserve(t, s, Pending("acme", "c1", "d1", 0, time.Minute, time.Hour), t0)
		if _, err := s.Get(t.Context(), "globex", "c1"); !errors.Is(err, idempotency.ErrNotFound) {
			t.Fatalf("Get from globex: %v", err)
		}
		if err := s.Complete(t.Context(), "globex", "c1", "d1", []byte(`{}`), t0.Add(time.Hour)); !errors.Is(err, idempotency.ErrNotHeld) {
			t.Fatalf("Complete from globex: %v", err)
		}
		if err := s.Release(t.Context(), "globex", "c1", "d1"); !errors.Is(err, idempotency.ErrNotHeld) {
			t.Fatalf("Release from globex: %v", err)
		}
		// globex reserves the same call id for itself.
		reserve(t, s, Pending("globex", "c1", "g1", 0, time.Minute, time.Hour), t0)
		if k, _ := s.Get(t.Context(), "acme", "c1"); k.DecisionID != "d1" || k.State != idempotency.StatePending {
			t.Fatalf("acme's key changed: %+v", k)
		}
	})

	t.Run("only the holder completes, once", func(t *testing.T) {
		s := open(t)
		reserve(t, s, Pending("acme", "c1", "d1", 0, time.Minute, time.Hour), t0)
		resp := []byte(`{"outcome":"ok","content":"wrote 2 bytes"}`)
		if err := s.Complete(t.Context(), "acme", "c1", "d2", resp, t0.Add(2*time.Hour)); !errors.Is(err, idempotency.ErrNotHeld) {
			t.Fatalf("Complete by another attempt: %v, want ErrNotHeld", err)
		}
		if err := s.Complete(t.Context(), "acme", "c1", "d1", resp, t0.Add(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(t.Context(), "acme", "c1", "d1", []byte(`{"outcome":"tool_error"}`), t0.Add(3*time.Hour)); !errors.Is(err, idempotency.ErrNotHeld) {
			t.Fatalf("second Complete: %v, want ErrNotHeld", err)
		}
		if err := s.Release(t.Context(), "acme", "c1", "d1"); !errors.Is(err, idempotency.ErrNotHeld) {
			t.Fatalf("Release of a done key: %v, want ErrNotHeld", err)
		}
		k, err := s.Get(t.Context(), "acme", "c1")
		if err != nil || k.State != idempotency.StateDone || !bytes.Equal(k.Response, resp) || !k.ExpiresAt.Equal(t0.Add(2*time.Hour)) {
			t.Fatalf("completed key: %+v, %v", k, err)
		}
	})

	t.Run("a released key is gone and can be reserved again", func(t *testing.T) {
		s := open(t)
		reserve(t, s, Pending("acme", "c1", "d1", 0, time.Minute, time.Hour), t0)
		if err := s.Release(t.Context(), "acme", "c1", "d2"); !errors.Is(err, idempotency.ErrNotHeld) {
			t.Fatalf("Release by another attempt: %v", err)
		}
		if err := s.Release(t.Context(), "acme", "c1", "d1"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(t.Context(), "acme", "c1"); !errors.Is(err, idempotency.ErrNotFound) {
			t.Fatalf("released key: %v", err)
		}
		reserve(t, s, Pending("acme", "c1", "d2", time.Second, time.Minute, time.Hour), t0.Add(time.Second))
	})

	t.Run("a key is kept until it expires, then replaced or pruned", func(t *testing.T) {
		s := open(t)
		reserve(t, s, Pending("acme", "done", "d1", 0, time.Minute, time.Hour), t0)
		if err := s.Complete(t.Context(), "acme", "done", "d1", []byte(`{}`), t0.Add(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		reserve(t, s, Pending("acme", "other", "d2", 0, time.Minute, time.Hour), t0)
		if err := s.Complete(t.Context(), "acme", "other", "d2", []byte(`{}`), t0.Add(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		// Just before its expiry the key holds.
		before := t0.Add(2*time.Hour - time.Millisecond)
		if cur, err := s.Reserve(t.Context(), Pending("acme", "done", "d3", 2*time.Hour, time.Minute, time.Hour), before); err != nil || cur == nil || cur.DecisionID != "d1" {
			t.Fatalf("Reserve before expiry = %+v, %v; want the done key", cur, err)
		}
		if n, err := s.Prune(t.Context(), before); err != nil || n != 0 {
			t.Fatalf("Prune before expiry = %d, %v", n, err)
		}
		// At its expiry it is replaced by a new reservation...
		at := t0.Add(2 * time.Hour)
		reserve(t, s, Pending("acme", "done", "d3", 2*time.Hour, time.Minute, time.Hour), at)
		if k, _ := s.Get(t.Context(), "acme", "done"); k.DecisionID != "d3" || k.State != idempotency.StatePending || k.Response != nil {
			t.Fatalf("replaced key: %+v", k)
		}
		// ...or pruned.
		if n, err := s.Prune(t.Context(), at); err != nil || n != 1 {
			t.Fatalf("Prune at expiry = %d, %v; want 1", n, err)
		}
		if _, err := s.Get(t.Context(), "acme", "other"); !errors.Is(err, idempotency.ErrNotFound) {
			t.Fatalf("pruned key: %v", err)
		}
	})

	t.Run("a pending key is never pruned or replaced while its lease runs", func(t *testing.T) {
		s := open(t)
		// Expiry before the lease ends: a misconfigured TTL must not let
		// a running call's key go.
		reserve(t, s, Pending("acme", "c1", "d1", 0, time.Hour, time.Minute), t0)
		mid := t0.Add(30 * time.Minute)
		if n, err := s.Prune(t.Context(), mid); err != nil || n != 0 {
			t.Fatalf("Prune during the lease = %d, %v", n, err)
		}
		if cur, err := s.Reserve(t.Context(), Pending("acme", "c1", "d2", 30*time.Minute, time.Hour, time.Minute), mid); err != nil || cur == nil || cur.DecisionID != "d1" {
			t.Fatalf("Reserve during the lease = %+v, %v", cur, err)
		}
		if k, _ := s.Get(t.Context(), "acme", "c1"); k.Abandoned(mid) || !k.Abandoned(t0.Add(time.Hour)) {
			t.Fatalf("Abandoned: %+v", k)
		}
		if n, err := s.Prune(t.Context(), t0.Add(time.Hour)); err != nil || n != 1 {
			t.Fatalf("Prune after the lease = %d, %v; want 1", n, err)
		}
	})

	t.Run("prune deletes every expired key, in batches", func(t *testing.T) {
		s := open(t)
		const n = 1005 // more than one batch of the stores here
		for i := range n {
			k := Pending("acme", fmt.Sprint("c", i), fmt.Sprint("d", i), 0, time.Minute, time.Hour)
			if i%2 == 1 {
				k.Tenant = "globex"
			}
			reserve(t, s, k, t0)
		}
		reserve(t, s, Pending("acme", "young", "dy", time.Hour, time.Minute, time.Hour), t0.Add(time.Hour))
		if got, err := s.Prune(t.Context(), t0.Add(time.Hour)); err != nil || got != n {
			t.Fatalf("Prune = %d, %v; want %d", got, err, n)
		}
		if _, err := s.Get(t.Context(), "acme", "young"); err != nil {
			t.Fatalf("a key not yet expired was pruned: %v", err)
		}
	})

	t.Run("a response round-trips byte for byte", func(t *testing.T) {
		s := open(t)
		reserve(t, s, Pending("acme", "c1", "d1", 0, time.Minute, time.Hour), t0)
		resp := append([]byte(`{"content":"`), bytes.Repeat([]byte("é\x00\xff"), 30000)...)
		if err := s.Complete(t.Context(), "acme", "c1", "d1", resp, t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if k, err := s.Get(t.Context(), "acme", "c1"); err != nil || !bytes.Equal(k.Response, resp) {
			t.Fatalf("response changed in the store (%v)", err)
		}
	})
}

func reserve(t *testing.T, s idempotency.Store, k *idempotency.Key, now time.Time) {
	t.Helper()
	cur, err := s.Reserve(t.Context(), k, now)
	if err != nil || cur != nil {
		t.Fatalf("Reserve(%s/%s) = %+v, %v; want it reserved", k.Tenant, k.CallID, cur, err)
	}
}
