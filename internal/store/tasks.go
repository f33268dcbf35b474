package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/tools/task"
)

// tasks is the task.Store over database/sql, shared by SQLite and
// PostgreSQL; taskDialect holds what differs (tasks_sqlite.go,
// tasks_postgres.go). A task that was reported created is committed, and
// a restart or another process or replica on the same database sees it.
//
// Every write runs in one transaction holding the session's write lock
// (taskDialect.begin): the limit, id, dependency, cycle and version
// checks are atomic with the write, also across processes. Reads use r
// (on PostgreSQL the same pool as w).
type tasks struct {
	w, r *sql.DB
	d    taskDialect
	// The statements, in the dialect's placeholders, built once.
	qCheck, qInsert, qSelect, qUpdate, qEdges, qList, qCount string
}

var _ task.Store = (*tasks)(nil)

// taskDialect is what the task store does differently per database.
type taskDialect struct {
	dollar bool // $n placeholders instead of ?
	// refusesNUL: no text value may hold a NUL character (PostgreSQL); an
	// id with one names no task, and sending it would fail the statement.
	refusesNUL bool
	// depsColumn reads blocked_by as a JSON array of ids; depsTable is
	// a parameter (depsArg's value) as a table of ids in column value.
	depsColumn, depsTable string
	depsArg               func([]string) (any, error)
	// begin starts a write transaction that holds the write lock of the
	// tenant's session.
	begin func(ctx context.Context, w *sql.DB, tenant, session string) (*sql.Tx, error)
	// duplicate reports whether err is a duplicate-key violation.
	duplicate func(error) bool
}

func newTasks(w, r *sql.DB, d taskDialect) *tasks {
	q := func(s string) string { return placeholders(s, d.dollar) }
	cols := `id, subject, description, status, ` + d.depsColumn + `, owner, created_ms, updated_ms, version`
	return &tasks{
		w: w, r: r, d: d,
		// Every check of Create in one statement: count, last seq, the id
		// taken, dependencies missing.
		qCheck: q(`SELECT count(*), coalesce(max(seq), 0), count(*) FILTER (WHERE id = ?),
			(SELECT count(*) FROM ` + d.depsTable + `
			 WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.tenant = ? AND t.session = ? AND t.id = d.value))
			FROM tasks WHERE tenant = ? AND session = ?`),
		qInsert: q(`INSERT INTO tasks
			(tenant, session, id, seq, subject, description, status, blocked_by, owner, created_ms, updated_ms, version)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		qSelect: q(`SELECT ` + cols + ` FROM tasks WHERE tenant = ? AND session = ? AND id = ?`),
		qUpdate: q(`UPDATE tasks SET subject = ?, description = ?, status = ?, blocked_by = ?,
			updated_ms = ?, version = ? WHERE tenant = ? AND session = ? AND id = ? AND version = ?`),
		qEdges: q(`SELECT id, ` + d.depsColumn + ` FROM tasks WHERE tenant = ? AND session = ?`),
		qList:  q(`SELECT ` + cols + ` FROM tasks WHERE tenant = ? AND session = ? ORDER BY seq`),
		qCount: q(`SELECT count(*) FROM tasks WHERE tenant = ? AND session = ?`),
	}
}

// nul reports whether the dialect refuses a value of ss.
func (s *tasks) nul(ss ...string) bool { return s.d.refusesNUL && hasNUL(ss...) }

func decodeDeps(id, raw string) ([]string, error) {
	var deps []string
	if err := json.Unmarshal([]byte(raw), &deps); err != nil {
		return nil, fmt.Errorf("task: stored blocked_by of %s: %w", id, err)
	}
	if deps == nil {
		deps = []string{}
	}
	return deps, nil
}

func scanTask(r scanner) (task.Task, error) {
	var t task.Task
	var deps string
	var created, updated int64
	if err := r.Scan(&t.ID, &t.Subject, &t.Description, &t.Status, &deps, &t.Owner, &created, &updated, &t.Version); err != nil {
		return task.Task{}, err
	}
	var err error
	if t.BlockedBy, err = decodeDeps(t.ID, deps); err != nil {
		return task.Task{}, err
	}
	t.Created = time.UnixMilli(created).UTC()
	t.Updated = time.UnixMilli(updated).UTC()
	return t, nil
}

// write runs fn in a transaction holding the session's write lock.
func (s *tasks) write(ctx context.Context, tenant, session string, fn func(*sql.Tx) error) error {
	tx, err := s.d.begin(ctx, s.w, tenant, session)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// Create implements task.Store.
func (s *tasks) Create(ctx context.Context, tenant, session string, t task.Task, max int) (task.Task, error) {
	if max <= 0 {
		return task.Task{}, errors.New("task: create: the task limit must be positive")
	}
	if s.nul(tenant, session, t.ID) {
		return task.Task{}, errors.New("task: create: tenant, session and id must not contain NUL")
	}
	if s.nul(t.BlockedBy...) {
		return task.Task{}, task.ErrDependency
	}
	for _, d := range t.BlockedBy {
		if d == t.ID {
			return task.Task{}, task.ErrCycle
		}
	}
	deps, err := s.d.depsArg(t.BlockedBy)
	if err != nil {
		return task.Task{}, err
	}
	t = t.Clone()
	t.Version = 1
	t.Created = time.UnixMilli(t.Created.UnixMilli()).UTC()
	t.Updated = time.UnixMilli(t.Updated.UnixMilli()).UTC()
	err = s.write(ctx, tenant, session, func(tx *sql.Tx) error {
		var count, lastSeq, taken, missing int64
		if err := tx.QueryRowContext(ctx, s.qCheck, t.ID, deps, tenant, session, tenant, session).
			Scan(&count, &lastSeq, &taken, &missing); err != nil {
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
		_, err := tx.ExecContext(ctx, s.qInsert, tenant, session, t.ID, lastSeq+1, t.Subject, t.Description, t.Status,
			deps, t.Owner, t.Created.UnixMilli(), t.Updated.UnixMilli(), t.Version)
		if err != nil && s.d.duplicate(err) {
			// Unreachable while writers hold the session lock; a writer
			// that bypasses it still cannot create a duplicate.
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
func (s *tasks) Update(ctx context.Context, tenant, session string, t task.Task) (task.Task, error) {
	if s.nul(tenant, session, t.ID) {
		return task.Task{}, task.ErrNotFound
	}
	if s.nul(t.BlockedBy...) {
		return task.Task{}, task.ErrDependency
	}
	deps, err := s.d.depsArg(t.BlockedBy)
	if err != nil {
		return task.Task{}, err
	}
	var next task.Task
	err = s.write(ctx, tenant, session, func(tx *sql.Tx) error {
		cur, err := scanTask(tx.QueryRowContext(ctx, s.qSelect, tenant, session, t.ID))
		if errors.Is(err, sql.ErrNoRows) {
			return task.ErrNotFound
		}
		if err != nil {
			return err
		}
		if cur.Version != t.Version {
			return task.ErrConflict
		}
		if added := task.NewDeps(cur.BlockedBy, t.BlockedBy); len(added) > 0 {
			edges, err := s.edges(ctx, tx, tenant, session)
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
		res, err := tx.ExecContext(ctx, s.qUpdate, next.Subject, next.Description, next.Status, deps,
			next.Updated.UnixMilli(), next.Version, tenant, session, t.ID, cur.Version)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			// Unreachable while writers hold the session lock.
			return fmt.Errorf("task: update touched %d rows: %w", n, err)
		}
		return nil
	})
	if err != nil {
		return task.Task{}, err
	}
	return next, nil
}

// edges reads every task id of the session with its dependencies.
func (s *tasks) edges(ctx context.Context, tx *sql.Tx, tenant, session string) (map[string][]string, error) {
	rows, err := tx.QueryContext(ctx, s.qEdges, tenant, session)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	edges := map[string][]string{}
	for rows.Next() {
		var id, raw string
		if err := rows.Scan(&id, &raw); err != nil {
			return nil, err
		}
		if edges[id], err = decodeDeps(id, raw); err != nil {
			return nil, err
		}
	}
	return edges, rows.Err()
}

// Get implements task.Store.
func (s *tasks) Get(ctx context.Context, tenant, session, id string) (task.Task, error) {
	if s.nul(tenant, session, id) {
		return task.Task{}, task.ErrNotFound
	}
	t, err := scanTask(s.r.QueryRowContext(ctx, s.qSelect, tenant, session, id))
	if errors.Is(err, sql.ErrNoRows) {
		return task.Task{}, task.ErrNotFound
	}
	return t, err
}

// List implements task.Store.
func (s *tasks) List(ctx context.Context, tenant, session string) ([]task.Task, error) {
	out := []task.Task{}
	if s.nul(tenant, session) {
		return out, nil
	}
	rows, err := s.r.QueryContext(ctx, s.qList, tenant, session)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Count implements task.Store.
func (s *tasks) Count(ctx context.Context, tenant, session string) (int, error) {
	if s.nul(tenant, session) {
		return 0, nil
	}
	var n int
	err := s.r.QueryRowContext(ctx, s.qCount, tenant, session).Scan(&n)
	return n, err
}
