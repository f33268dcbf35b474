package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolgate/toolgate/internal/ratelimit"
)

// pgLimiter is the ratelimit.Limiter of a gateway on PostgreSQL: the
// buckets are rows of rate_buckets, so every replica counts in the same
// bucket. The time is the database's (clock_timestamp()), so replicas'
// clocks never disagree about a bucket.
type pgLimiter struct {
	pool    *pgxpool.Pool
	timeout time.Duration
}

var _ ratelimit.Limiter = (*pgLimiter)(nil)

// pgQuerier is a pool or a transaction.
type pgQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// pgNowNS is the database's clock in Unix nanoseconds.
const pgNowNS = `(extract(epoch FROM clock_timestamp()) * 1000000000)::bigint`

// pgTake takes one token of bucket ($1 tenant, $2 key) with emission
// interval $3 and tolerance $4 (ratelimit.Limit.Interval, Tolerance), in
// one statement: a new bucket is inserted with one token taken; an
// existing one moves its tat only when the request is admitted
// (tat - now ≤ τ). No row back means refused. Concurrent takers of one
// bucket queue on its row lock, so none is lost and none is counted twice.
const pgTake = `INSERT INTO rate_buckets AS b (tenant, key, tat_ns)
VALUES ($1, $2, ` + pgNowNS + ` + $3::bigint)
ON CONFLICT (tenant, key) DO UPDATE
SET tat_ns = GREATEST(b.tat_ns, excluded.tat_ns - $3::bigint) + $3::bigint
WHERE b.tat_ns - (excluded.tat_ns - $3::bigint) <= $4::bigint
RETURNING tat_ns`

// pgWait is how long until bucket ($1, $2) with tolerance $3 admits a
// request.
const pgWait = `SELECT tat_ns - $3::bigint - ` + pgNowNS + ` FROM rate_buckets WHERE tenant = $1 AND key = $2`

// Take implements ratelimit.Limiter. One limit is one statement; several
// are taken in one transaction, in key order (a fixed lock order, so two
// requests never wait for each other's rows), rolled back at the first
// refusal so that a refused request takes no token.
func (l *pgLimiter) Take(ctx context.Context, tenant string, limits []ratelimit.Limit) (ratelimit.Verdict, error) {
	if len(limits) == 0 {
		return ratelimit.Verdict{OK: true}, nil
	}
	if hasNUL(tenant) {
		return ratelimit.Verdict{}, errors.New("ratelimit: tenant holds a NUL character")
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	if len(limits) == 1 {
		return take(ctx, l.pool, tenant, limits[0])
	}
	tx, err := l.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return ratelimit.Verdict{}, fmt.Errorf("ratelimit: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	for _, lim := range limits {
		v, err := take(ctx, tx, tenant, lim)
		if err != nil || !v.OK {
			return v, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return ratelimit.Verdict{}, fmt.Errorf("ratelimit: %w", err)
	}
	return ratelimit.Verdict{OK: true}, nil
}

func take(ctx context.Context, q pgQuerier, tenant string, lim ratelimit.Limit) (ratelimit.Verdict, error) {
	var tat int64
	err := q.QueryRow(ctx, pgTake, tenant, lim.Key, lim.Interval(), lim.Tolerance()).Scan(&tat)
	if err == nil {
		return ratelimit.Verdict{OK: true}, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return ratelimit.Verdict{}, fmt.Errorf("ratelimit: take: %w", err)
	}
	var wait int64
	if err := q.QueryRow(ctx, pgWait, tenant, lim.Key, lim.Tolerance()).Scan(&wait); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return ratelimit.Verdict{}, fmt.Errorf("ratelimit: take: %w", err)
	}
	// The bucket may have refilled (or gone) in between: it refused, so
	// the caller waits at least a moment.
	return ratelimit.Verdict{Key: lim.Key, RetryAfter: time.Duration(max(wait, 1))}, nil
}

// Prune deletes the buckets that are full (their tat is past): they mean
// the same as no row. Replicas may prune at once; a bucket taken from
// meanwhile has a tat in the future again and stays.
func (l *pgLimiter) Prune(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	tag, err := l.pool.Exec(ctx, `DELETE FROM rate_buckets WHERE tat_ns < `+pgNowNS)
	if err != nil {
		return 0, fmt.Errorf("ratelimit: prune: %w", err)
	}
	return tag.RowsAffected(), nil
}
