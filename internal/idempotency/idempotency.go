// Package idempotency keeps the call ids callers chose as idempotency keys:
// a call retried with the same call_id answers the response that was
// recorded for it instead of being decided and run again.
//
// A key is reserved atomically before its call is decided (of concurrent
// reservations, in one process or across replicas, exactly one wins), is
// bound to one request by its Fingerprint, and is completed with the
// response that was answered. The Store lives in the gateway's database
// (internal/store, SQLite or PostgreSQL) and passes one conformance suite
// (idemtest).
package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// States of a key.
const (
	StatePending = "pending" // reserved: its call is being decided or run
	StateDone    = "done"    // Response is what the call answered
)

// Key is one reserved or completed idempotency key.
type Key struct {
	Tenant string
	CallID string
	// Fingerprint binds the key to one request (see Fingerprint): a
	// request with the same call id and another fingerprint is a conflict.
	Fingerprint string
	// DecisionID is the decision id of the attempt that holds the key;
	// only that attempt may complete or release it.
	DecisionID string
	State      string
	CreatedAt  time.Time
	// LeaseUntil bounds how long a pending key may stay pending: one
	// still pending after it was abandoned (its gateway stopped).
	LeaseUntil time.Time
	// ExpiresAt is when the key may be pruned, or reserved again.
	ExpiresAt time.Time
	// Response is the recorded response, opaque to the store; empty while
	// pending.
	Response []byte
}

// Abandoned reports whether k is pending past its lease at now.
func (k *Key) Abandoned(now time.Time) bool {
	return k.State == StatePending && !now.Before(k.LeaseUntil)
}

// Expired reports whether k may be pruned or reserved again at now: past
// its expiry and not still (possibly) running.
func (k *Key) Expired(now time.Time) bool {
	return !now.Before(k.ExpiresAt) && (k.State == StateDone || !now.Before(k.LeaseUntil))
}

// Errors callers inspect with errors.Is.
var (
	// ErrNotFound: no such key in the tenant (another tenant's looks the
	// same).
	ErrNotFound = errors.New("idempotency: key not found")
	// ErrNotHeld: Complete or Release by an attempt that does not hold the
	// key pending (another attempt holds it, it is done, or it is gone).
	ErrNotHeld = errors.New("idempotency: key not held by this attempt")
)

// Store persists idempotency keys. Every method but Prune is scoped by
// tenant. Its opener owns the connections: a Store has no Close.
type Store interface {
	// Reserve stores k (State pending) unless the tenant holds a key of
	// that call id that has not Expired at now; an expired one is
	// replaced. It returns nil when k was stored, else the key that is
	// there. Of concurrent reservations of one call id exactly one
	// stores its key.
	Reserve(ctx context.Context, k *Key, now time.Time) (*Key, error)
	// Get returns one key or ErrNotFound.
	Get(ctx context.Context, tenant, callID string) (*Key, error)
	// Complete records the response of the pending key held by the
	// attempt decisionID, and its new expiry: the key is done. Anything
	// else is ErrNotHeld.
	Complete(ctx context.Context, tenant, callID, decisionID string, response []byte, expiresAt time.Time) error
	// Release deletes the pending key held by the attempt decisionID (its
	// call failed closed before anything ran), so that a retry decides
	// again. Anything else is ErrNotHeld.
	Release(ctx context.Context, tenant, callID, decisionID string) error
	// Prune deletes the keys of every tenant that have Expired at now and
	// returns how many.
	Prune(ctx context.Context, now time.Time) (int64, error)
}

// Request is what a key's fingerprint binds: two requests with one call id
// are the same request exactly when these agree.
type Request struct {
	Mode      string // "call" or "decision": the route family
	Tool      string
	Arguments []byte // raw JSON as received; nil when absent
	SessionID string
	Principal string
}

// Fingerprint returns "sha256:" and the hex SHA-256 of r's fields, each
// length-prefixed. Arguments that are valid JSON are canonicalized first
// (RFC 8785), so member order and spacing do not matter; other bytes (the
// call will answer invalid_arguments) count as they are. Absent arguments
// and {} are the same arguments, as they are to prepare.
func Fingerprint(r Request) string {
	args, kind := canonicalArgs(r.Arguments)
	h := sha256.New()
	for _, f := range []string{r.Mode, r.Tool, r.SessionID, r.Principal, kind, args} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func canonicalArgs(raw []byte) (string, string) {
	if len(raw) == 0 {
		return "{}", "json"
	}
	v := jsontext.Value(append([]byte(nil), raw...))
	if err := v.Canonicalize(); err != nil {
		return string(raw), "raw"
	}
	return string(v), "json"
}
