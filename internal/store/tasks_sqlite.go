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

// sqliteTasks is the embedded task.Store. A task that was reported created
// is on disk, and a restart or another process on the same file sees it.
// Writes run on the writer connection, whose transactions take the write
// lock at BEGIN: that makes the limit, dependency and version checks
// atomic with the write, also across processes; reads use the read pool.
type sqliteTasks struct {
	w, r *sql.DB
}

var _ task.Store = (*sqliteTasks)(nil)

const taskColumns = `id, subject, description, status, blocked_by, owner, created_ms, updated_ms, version`

func scanTask(r scanner) (task.Task, error) {
	var t task.Task
	var deps string
	var created, updated int64
	if err := r.Scan(&t.ID, &t.Subject, &t.Description, &t.Status, &deps, &t.Owner, &created, &updated, &t.Version); err != nil {
		return task.Task{}, err
	}
	if err := json.Unmarshal([]byte(deps), &t.BlockedBy); err != nil {
		return task.Task{}, fmt.Errorf("task: stored blocked_by of %s: %w", t.ID, err)
	}
	if t.BlockedBy == nil {
		t.BlockedBy = []string{}
	}
	t.Created = time.UnixMilli(created).UTC()
	t.Updated = time.UnixMilli(updated).UTC()
	return t, nil
}

func encodeDeps(deps []string) (string, error) {
	if deps == nil {
		deps = []string{}
	}
	b, err := json.Marshal(deps)
	return string(b), err
}

// Create implements task.Store.
func (s *sqliteTasks) Create(ctx context.Context, tenant, session string, t task.Task, max int) (task.Task, error) {
	if max <= 0 {
		return task.Task{}, errors.New("task: create: the task limit must be positive")
	}
	for _, d := range t.BlockedBy {
		if d == t.ID {
			return task.Task{}, task.ErrCycle
		}
	}
	deps, err := encodeDeps(t.BlockedBy)
	if err != nil {
		return task.Task{}, err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return task.Task{}, err
	}
	defer tx.Rollback()

	var count, lastSeq int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*), coalesce(max(seq), 0) FROM tasks WHERE tenant = ? AND session = ?`,
		tenant, session).Scan(&count, &lastSeq); err != nil {
		return task.Task{}, err
	}
	if count >= int64(max) {
		return task.Task{}, task.ErrLimit
	}
	var taken int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM tasks WHERE tenant = ? AND session = ? AND id = ?`,
		tenant, session, t.ID).Scan(&taken); err != nil {
		return task.Task{}, err
	}
	if taken > 0 {
		return task.Task{}, task.ErrExists
	}
	if len(t.BlockedBy) > 0 {
		var missing int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM json_each(?) j
			WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.tenant = ? AND t.session = ? AND t.id = j.value)`,
			deps, tenant, session).Scan(&missing); err != nil {
			return task.Task{}, err
		}
		if missing > 0 {
			return task.Task{}, task.ErrDependency
		}
	}
	t = t.Clone()
	t.Version = 1
	t.Created = time.UnixMilli(t.Created.UnixMilli()).UTC()
	t.Updated = time.UnixMilli(t.Updated.UnixMilli()).UTC()
	if _, err := tx.ExecContext(ctx, `INSERT INTO tasks
		(tenant, session, id, seq, subject, description, status, blocked_by, owner, created_ms, updated_ms, version)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		tenant, session, t.ID, lastSeq+1, t.Subject, t.Description, t.Status, deps, t.Owner,
		t.Created.UnixMilli(), t.Updated.UnixMilli(), t.Version); err != nil {
		return task.Task{}, err
	}
	if err := tx.Commit(); err != nil {
		return task.Task{}, err
	}
	return t, nil
}

// Update implements task.Store.
func (s *sqliteTasks) Update(ctx context.Context, tenant, session string, t task.Task) (task.Task, error) {
	deps, err := encodeDeps(t.BlockedBy)
	if err != nil {
		return task.Task{}, err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return task.Task{}, err
	}
	defer tx.Rollback()

	cur, err := scanTask(tx.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE tenant = ? AND session = ? AND id = ?`,
		tenant, session, t.ID))
	if errors.Is(err, sql.ErrNoRows) {
		return task.Task{}, task.ErrNotFound
	}
	if err != nil {
		return task.Task{}, err
	}
	if cur.Version != t.Version {
		return task.Task{}, task.ErrConflict
	}
	if added := task.NewDeps(cur.BlockedBy, t.BlockedBy); len(added) > 0 {
		edges, err := sqliteSessionEdges(ctx, tx, tenant, session)
		if err != nil {
			return task.Task{}, err
		}
		for _, d := range added {
			if _, ok := edges[d]; !ok {
				return task.Task{}, task.ErrDependency
			}
		}
		if task.CreatesCycle(edges, t.ID, added) {
			return task.Task{}, task.ErrCycle
		}
	}
	next := t.Clone()
	next.Owner, next.Created = cur.Owner, cur.Created
	next.Updated = time.UnixMilli(t.Updated.UnixMilli()).UTC()
	next.Version = cur.Version + 1
	res, err := tx.ExecContext(ctx, `UPDATE tasks SET subject = ?, description = ?, status = ?, blocked_by = ?,
		updated_ms = ?, version = ? WHERE tenant = ? AND session = ? AND id = ? AND version = ?`,
		next.Subject, next.Description, next.Status, deps, next.Updated.UnixMilli(), next.Version,
		tenant, session, t.ID, cur.Version)
	if err != nil {
		return task.Task{}, err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		// Unreachable while the transaction holds the write lock.
		return task.Task{}, fmt.Errorf("task: update touched %d rows: %w", n, err)
	}
	if err := tx.Commit(); err != nil {
		return task.Task{}, err
	}
	return next, nil
}

// sqliteSessionEdges reads every task id of the session with its dependencies.
func sqliteSessionEdges(ctx context.Context, tx *sql.Tx, tenant, session string) (map[string][]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, blocked_by FROM tasks WHERE tenant = ? AND session = ?`, tenant, session)
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
		var deps []string
		if err := json.Unmarshal([]byte(raw), &deps); err != nil {
			return nil, fmt.Errorf("task: stored blocked_by of %s: %w", id, err)
		}
		edges[id] = deps
	}
	return edges, rows.Err()
}

// Get implements task.Store.
func (s *sqliteTasks) Get(ctx context.Context, tenant, session, id string) (task.Task, error) {
	t, err := scanTask(s.r.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE tenant = ? AND session = ? AND id = ?`,
		tenant, session, id))
	if errors.Is(err, sql.ErrNoRows) {
		return task.Task{}, task.ErrNotFound
	}
	return t, err
}

// List implements task.Store.
func (s *sqliteTasks) List(ctx context.Context, tenant, session string) ([]task.Task, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE tenant = ? AND session = ? ORDER BY seq`,
		tenant, session)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []task.Task{}
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
func (s *sqliteTasks) Count(ctx context.Context, tenant, session string) (int, error) {
	var n int
	err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM tasks WHERE tenant = ? AND session = ?`, tenant, session).Scan(&n)
	return n, err
}
