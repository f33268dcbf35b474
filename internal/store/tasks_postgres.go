package store

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolgate/toolgate/internal/tools/task"
)

// pgTasks is the task.Store for gateway replicas sharing one PostgreSQL
// database.
//
// Every write runs in a READ COMMITTED transaction that first takes a
// transaction-scoped advisory lock on its (tenant, session): writers of one
// session queue on it, in any process, while other sessions proceed in
// parallel. Holding it, each statement sees everything the previous holder
// committed, so the limit, id, dependency, cycle and version checks are
// atomic with the write. (Under REPEATABLE READ the snapshot would predate
// the lock and the checks could read stale data, hence the explicit level.)
type pgTasks struct {
	pool *pgxpool.Pool
}

var _ task.Store = (*pgTasks)(nil)

// sessionLockKey is the advisory lock key of one (tenant, session). The
// parts are length-prefixed, so ("ab", "c") and ("a", "bc") differ; two
// sessions whose keys collide merely queue behind each other.
func sessionLockKey(tenant, session string) int64 {
	h := sha256.New()
	h.Write([]byte("toolgate/task/session\x00"))
	for _, s := range []string{tenant, session} {
		var n [binary.MaxVarintLen64]byte
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	return int64(binary.BigEndian.Uint64(h.Sum(nil)))
}

// inSession runs fn in a transaction holding the session's write lock.
func (s *pgTasks) inSession(ctx context.Context, tenant, session string, fn func(pgx.Tx) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, sessionLockKey(tenant, session)); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

const pgTaskColumns = `id, subject, description, status, blocked_by, owner, created_ms, updated_ms, version`

func scanPgTask(r pgx.Row) (task.Task, error) {
	var t task.Task
	var created, updated int64
	if err := r.Scan(&t.ID, &t.Subject, &t.Description, &t.Status, &t.BlockedBy, &t.Owner, &created, &updated, &t.Version); err != nil {
		return task.Task{}, err
	}
	if t.BlockedBy == nil {
		t.BlockedBy = []string{}
	}
	t.Created = time.UnixMilli(created).UTC()
	t.Updated = time.UnixMilli(updated).UTC()
	return t, nil
}

// Create implements task.Store.
func (s *pgTasks) Create(ctx context.Context, tenant, session string, t task.Task, max int) (task.Task, error) {
	if max <= 0 {
		return task.Task{}, errors.New("task: create: the task limit must be positive")
	}
	if hasNUL(tenant, session, t.ID) {
		return task.Task{}, errors.New("task: create: tenant, session and id must not contain NUL")
	}
	if hasNUL(t.BlockedBy...) {
		return task.Task{}, task.ErrDependency
	}
	for _, d := range t.BlockedBy {
		if d == t.ID {
			return task.Task{}, task.ErrCycle
		}
	}
	t = t.Clone()
	t.Version = 1
	t.Created = time.UnixMilli(t.Created.UnixMilli()).UTC()
	t.Updated = time.UnixMilli(t.Updated.UnixMilli()).UTC()
	err := s.inSession(ctx, tenant, session, func(tx pgx.Tx) error {
		// Every check in one round trip, in the order the SQLite store makes them.
		var count, lastSeq, taken, missing int64
		if err := tx.QueryRow(ctx, `SELECT count(*), coalesce(max(seq), 0), count(*) FILTER (WHERE id = $3),
				(SELECT count(*) FROM unnest($4::text[]) d(id)
				 WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.tenant = $1 AND t.session = $2 AND t.id = d.id))
			FROM tasks WHERE tenant = $1 AND session = $2`,
			tenant, session, t.ID, t.BlockedBy).Scan(&count, &lastSeq, &taken, &missing); err != nil {
			return err
		}
		switch {
		case count >= int64(max):
			return task.ErrLimit
		case taken > 0:
			return task.ErrExists
		case missing > 0:
			return task.ErrDependency
		}
		_, err := tx.Exec(ctx, `INSERT INTO tasks
			(tenant, session, id, seq, subject, description, status, blocked_by, owner, created_ms, updated_ms, version)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
			tenant, session, t.ID, lastSeq+1, t.Subject, t.Description, t.Status, t.BlockedBy, t.Owner,
			t.Created.UnixMilli(), t.Updated.UnixMilli(), t.Version)
		if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "23505" {
			// Unreachable while writers hold the session lock; a writer that
			// bypasses it still cannot create a duplicate.
			return task.ErrExists
		}
		return err
	})
	if err != nil {
		return task.Task{}, err
	}
	return t, nil
}

// Update implements task.Store.
func (s *pgTasks) Update(ctx context.Context, tenant, session string, t task.Task) (task.Task, error) {
	if hasNUL(tenant, session, t.ID) {
		return task.Task{}, task.ErrNotFound
	}
	if hasNUL(t.BlockedBy...) {
		return task.Task{}, task.ErrDependency
	}
	var next task.Task
	err := s.inSession(ctx, tenant, session, func(tx pgx.Tx) error {
		cur, err := scanPgTask(tx.QueryRow(ctx, `SELECT `+pgTaskColumns+` FROM tasks
			WHERE tenant = $1 AND session = $2 AND id = $3`, tenant, session, t.ID))
		if errors.Is(err, pgx.ErrNoRows) {
			return task.ErrNotFound
		}
		if err != nil {
			return err
		}
		if cur.Version != t.Version {
			return task.ErrConflict
		}
		if added := task.NewDeps(cur.BlockedBy, t.BlockedBy); len(added) > 0 {
			edges, err := pgSessionEdges(ctx, tx, tenant, session)
			if err != nil {
				return err
			}
			for _, d := range added {
				if _, ok := edges[d]; !ok {
					return task.ErrDependency
				}
			}
			if task.CreatesCycle(edges, t.ID, added) {
				return task.ErrCycle
			}
		}
		next = t.Clone()
		next.Owner, next.Created = cur.Owner, cur.Created
		next.Updated = time.UnixMilli(t.Updated.UnixMilli()).UTC()
		next.Version = cur.Version + 1
		tag, err := tx.Exec(ctx, `UPDATE tasks SET subject = $1, description = $2, status = $3, blocked_by = $4,
			updated_ms = $5, version = $6 WHERE tenant = $7 AND session = $8 AND id = $9 AND version = $10`,
			next.Subject, next.Description, next.Status, next.BlockedBy, next.Updated.UnixMilli(), next.Version,
			tenant, session, t.ID, cur.Version)
		if err != nil {
			return err
		}
		if n := tag.RowsAffected(); n != 1 {
			// Unreachable while writers hold the session lock.
			return fmt.Errorf("task: update touched %d rows", n)
		}
		return nil
	})
	if err != nil {
		return task.Task{}, err
	}
	return next, nil
}

// pgSessionEdges reads every task id of the session with its dependencies.
func pgSessionEdges(ctx context.Context, tx pgx.Tx, tenant, session string) (map[string][]string, error) {
	rows, err := tx.Query(ctx, `SELECT id, blocked_by FROM tasks WHERE tenant = $1 AND session = $2`, tenant, session)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	edges := map[string][]string{}
	for rows.Next() {
		var id string
		var deps []string
		if err := rows.Scan(&id, &deps); err != nil {
			return nil, err
		}
		edges[id] = deps
	}
	return edges, rows.Err()
}

// Get implements task.Store.
func (s *pgTasks) Get(ctx context.Context, tenant, session, id string) (task.Task, error) {
	if hasNUL(tenant, session, id) {
		return task.Task{}, task.ErrNotFound
	}
	t, err := scanPgTask(s.pool.QueryRow(ctx, `SELECT `+pgTaskColumns+` FROM tasks
		WHERE tenant = $1 AND session = $2 AND id = $3`, tenant, session, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return task.Task{}, task.ErrNotFound
	}
	return t, err
}

// List implements task.Store.
func (s *pgTasks) List(ctx context.Context, tenant, session string) ([]task.Task, error) {
	if hasNUL(tenant, session) {
		return []task.Task{}, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+pgTaskColumns+` FROM tasks
		WHERE tenant = $1 AND session = $2 ORDER BY seq`, tenant, session)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []task.Task{}
	for rows.Next() {
		t, err := scanPgTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Count implements task.Store.
func (s *pgTasks) Count(ctx context.Context, tenant, session string) (int, error) {
	if hasNUL(tenant, session) {
		return 0, nil
	}
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE tenant = $1 AND session = $2`, tenant, session).Scan(&n)
	return n, err
}
