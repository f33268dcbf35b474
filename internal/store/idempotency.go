package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/internal/idempotency"
)

// idempotencyKeys is the idempotency.Store over database/sql, shared by
// SQLite and PostgreSQL like the approvals. Reserve is one INSERT … ON
// CONFLICT DO UPDATE … WHERE (expired) RETURNING: atomic in both, so of
// concurrent reservations exactly one gets a row back.
type idempotencyKeys struct {
	w, r   *sql.DB
	dollar bool
}

var _ idempotency.Store = (*idempotencyKeys)(nil)

const idempotencyColumns = `tenant, call_id, fingerprint, decision_id, state, created_ms, lease_ms, expires_ms, response`

// pruneBatch bounds one DELETE of Prune, so that pruning a large backlog
// never holds SQLite's one writer (and the audit log's commits) for long.
const pruneBatch = 1000

func (s *idempotencyKeys) q(query string) string { return placeholders(query, s.dollar) }

func scanKey(sc scanner) (*idempotency.Key, error) {
	var k idempotency.Key
	var created, lease, expires int64
	if err := sc.Scan(&k.Tenant, &k.CallID, &k.Fingerprint, &k.DecisionID, &k.State, &created, &lease, &expires, &k.Response); err != nil {
		return nil, err
	}
	k.CreatedAt = time.UnixMilli(created).UTC()
	k.LeaseUntil = time.UnixMilli(lease).UTC()
	k.ExpiresAt = time.UnixMilli(expires).UTC()
	if len(k.Response) == 0 {
		k.Response = nil
	}
	return &k, nil
}

func (s *idempotencyKeys) Reserve(ctx context.Context, k *idempotency.Key, now time.Time) (*idempotency.Key, error) {
	if k.Tenant == "" || k.CallID == "" || k.Fingerprint == "" || k.DecisionID == "" {
		return nil, errors.New("idempotency: tenant, call id, fingerprint and decision id are required")
	}
	nowMS := now.UnixMilli()
	// A key that disappears between the refused insert and the read (its
	// attempt released it, or it was pruned) is reserved again.
	for range 3 {
		var owner string
		err := s.w.QueryRowContext(ctx, s.q(`INSERT INTO idempotency_keys (`+idempotencyColumns+`)
			VALUES (?, ?, ?, ?, 'pending', ?, ?, ?, ?)
			ON CONFLICT (tenant, call_id) DO UPDATE SET fingerprint = excluded.fingerprint,
				decision_id = excluded.decision_id, state = 'pending', created_ms = excluded.created_ms,
				lease_ms = excluded.lease_ms, expires_ms = excluded.expires_ms, response = excluded.response
			WHERE idempotency_keys.expires_ms <= ?
				AND (idempotency_keys.state = 'done' OR idempotency_keys.lease_ms <= ?)
			RETURNING decision_id`),
			k.Tenant, k.CallID, k.Fingerprint, k.DecisionID, k.CreatedAt.UnixMilli(), k.LeaseUntil.UnixMilli(),
			k.ExpiresAt.UnixMilli(), []byte{}, nowMS, nowMS).Scan(&owner)
		if err == nil {
			return nil, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("idempotency: reserve: %w", err)
		}
		// The writer sees the row that refused the insert: reading it
		// through the read pool could miss a commit of another process.
		cur, err := s.get(ctx, s.w, k.Tenant, k.CallID)
		if errors.Is(err, idempotency.ErrNotFound) {
			continue
		}
		return cur, err
	}
	return nil, errors.New("idempotency: reserve: the key kept changing")
}

func (s *idempotencyKeys) Get(ctx context.Context, tenant, callID string) (*idempotency.Key, error) {
	return s.get(ctx, s.r, tenant, callID)
}

func (s *idempotencyKeys) get(ctx context.Context, db *sql.DB, tenant, callID string) (*idempotency.Key, error) {
	k, err := scanKey(db.QueryRowContext(ctx, s.q(`SELECT `+idempotencyColumns+` FROM idempotency_keys
		WHERE tenant = ? AND call_id = ?`), tenant, callID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, idempotency.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("idempotency: get: %w", err)
	}
	return k, nil
}

func (s *idempotencyKeys) Complete(ctx context.Context, tenant, callID, decisionID string, response []byte, expiresAt time.Time) error {
	if len(response) == 0 {
		return errors.New("idempotency: complete needs a response")
	}
	res, err := s.w.ExecContext(ctx, s.q(`UPDATE idempotency_keys SET state = 'done', response = ?, expires_ms = ?
		WHERE tenant = ? AND call_id = ? AND decision_id = ? AND state = 'pending'`),
		response, expiresAt.UnixMilli(), tenant, callID, decisionID)
	return oneRow(res, err, "complete")
}

func (s *idempotencyKeys) Release(ctx context.Context, tenant, callID, decisionID string) error {
	res, err := s.w.ExecContext(ctx, s.q(`DELETE FROM idempotency_keys
		WHERE tenant = ? AND call_id = ? AND decision_id = ? AND state = 'pending'`), tenant, callID, decisionID)
	return oneRow(res, err, "release")
}

func oneRow(res sql.Result, err error, what string) error {
	if err != nil {
		return fmt.Errorf("idempotency: %s: %w", what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("idempotency: %s: %w", what, err)
	}
	if n != 1 {
		return idempotency.ErrNotHeld
	}
	return nil
}

func (s *idempotencyKeys) Prune(ctx context.Context, now time.Time) (int64, error) {
	nowMS := now.UnixMilli()
	var total int64
	for {
		res, err := s.w.ExecContext(ctx, s.q(`DELETE FROM idempotency_keys WHERE (tenant, call_id) IN (
			SELECT tenant, call_id FROM idempotency_keys
			WHERE expires_ms <= ? AND (state = 'done' OR lease_ms <= ?) LIMIT ?)`), nowMS, nowMS, pruneBatch)
		if err != nil {
			return total, fmt.Errorf("idempotency: prune: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("idempotency: prune: %w", err)
		}
		total += n
		if n < pruneBatch {
			return total, nil
		}
	}
}
