package task

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// sqliteBusyTimeout is how long a connection waits for the write lock held
// by another connection to the same file: the audit log's writer, or
// another gateway process.
const sqliteBusyTimeout = 5 * time.Second

// sqliteReadConns is the size of the read pool.
const sqliteReadConns = 4

// SQLiteStore is the embedded Store. It lives in the audit database file
// (its own tables, its own migrations table), in WAL mode with
// synchronous=FULL, so a task that was reported created is on disk and a
// restart or another process on the same file sees it. Writes go through
// one connection whose transactions take the write lock at BEGIN, which is
// what makes the limit, dependency and version checks atomic with the
// write, also across processes; reads use a separate read-only pool.
type SQLiteStore struct {
	w, r      *sql.DB
	closeOnce sync.Once
	closeErr  error
}

var _ Store = (*SQLiteStore)(nil)

// OpenSQLite opens (creating when missing) the database file at path and
// its parent folder, and brings the task tables up to date. path is
// normally the audit store's file.
func OpenSQLite(ctx context.Context, path string) (*SQLiteStore, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("task: sqlite path: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o750); err != nil {
		return nil, fmt.Errorf("task: sqlite folder: %w", err)
	}
	busy := "busy_timeout(" + strconv.FormatInt(sqliteBusyTimeout.Milliseconds(), 10) + ")"

	s := &SQLiteStore{}
	s.w, err = sql.Open("sqlite", sqliteDSN(abs, url.Values{
		"_pragma": {busy, "journal_mode(WAL)", "synchronous(FULL)"},
		"_txlock": {"immediate"}, // take the write lock at BEGIN: check-then-write is atomic
	}))
	if err != nil {
		return nil, fmt.Errorf("task: open sqlite: %w", err)
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	s.w.SetConnMaxLifetime(0)
	s.w.SetConnMaxIdleTime(0)
	if err := migrateSQLite(ctx, s.w); err != nil {
		s.w.Close()
		return nil, fmt.Errorf("task: open sqlite %s: %w", abs, err)
	}
	s.r, err = sql.Open("sqlite", sqliteDSN(abs, url.Values{
		"_pragma": {busy, "query_only(true)"},
	}))
	if err != nil {
		s.w.Close()
		return nil, fmt.Errorf("task: open sqlite: %w", err)
	}
	s.r.SetMaxOpenConns(sqliteReadConns)
	s.r.SetMaxIdleConns(sqliteReadConns)
	if err := s.r.PingContext(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("task: open sqlite %s: %w", abs, err)
	}
	return s, nil
}

// sqliteDSN is a file: URI, so that any path (spaces, '?', '#') survives.
func sqliteDSN(abs string, q url.Values) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: q.Encode()}
	return u.String()
}

const taskColumns = `id, subject, description, status, blocked_by, owner, created_ms, updated_ms, version`

// rowScanner is *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(dest ...any) error }

func scanTask(r rowScanner) (Task, error) {
	var t Task
	var deps string
	var created, updated int64
	if err := r.Scan(&t.ID, &t.Subject, &t.Description, &t.Status, &deps, &t.Owner, &created, &updated, &t.Version); err != nil {
		return Task{}, err
	}
	if err := json.Unmarshal([]byte(deps), &t.BlockedBy); err != nil {
		return Task{}, fmt.Errorf("task: stored blocked_by of %s: %w", t.ID, err)
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

// Create implements Store.
func (s *SQLiteStore) Create(ctx context.Context, tenant, session string, t Task, max int) (Task, error) {
	if max <= 0 {
		return Task{}, errors.New("task: create: the task limit must be positive")
	}
	for _, d := range t.BlockedBy {
		if d == t.ID {
			return Task{}, ErrCycle
		}
	}
	deps, err := encodeDeps(t.BlockedBy)
	if err != nil {
		return Task{}, err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return Task{}, err
	}
	defer tx.Rollback()

	var count, lastSeq int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*), coalesce(max(seq), 0) FROM tasks WHERE tenant = ? AND session = ?`,
		tenant, session).Scan(&count, &lastSeq); err != nil {
		return Task{}, err
	}
	if count >= int64(max) {
		return Task{}, ErrLimit
	}
	var taken int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM tasks WHERE tenant = ? AND session = ? AND id = ?`,
		tenant, session, t.ID).Scan(&taken); err != nil {
		return Task{}, err
	}
	if taken > 0 {
		return Task{}, ErrExists
	}
	if len(t.BlockedBy) > 0 {
		var missing int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM json_each(?) j
			WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.tenant = ? AND t.session = ? AND t.id = j.value)`,
			deps, tenant, session).Scan(&missing); err != nil {
			return Task{}, err
		}
		if missing > 0 {
			return Task{}, ErrDependency
		}
	}
	t = t.clone()
	t.Version = 1
	t.Created = time.UnixMilli(t.Created.UnixMilli()).UTC()
	t.Updated = time.UnixMilli(t.Updated.UnixMilli()).UTC()
	if _, err := tx.ExecContext(ctx, `INSERT INTO tasks
		(tenant, session, id, seq, subject, description, status, blocked_by, owner, created_ms, updated_ms, version)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		tenant, session, t.ID, lastSeq+1, t.Subject, t.Description, t.Status, deps, t.Owner,
		t.Created.UnixMilli(), t.Updated.UnixMilli(), t.Version); err != nil {
		return Task{}, err
	}
	if err := tx.Commit(); err != nil {
		return Task{}, err
	}
	return t, nil
}

// Update implements Store.
func (s *SQLiteStore) Update(ctx context.Context, tenant, session string, t Task) (Task, error) {
	deps, err := encodeDeps(t.BlockedBy)
	if err != nil {
		return Task{}, err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return Task{}, err
	}
	defer tx.Rollback()

	cur, err := scanTask(tx.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE tenant = ? AND session = ? AND id = ?`,
		tenant, session, t.ID))
	if errors.Is(err, sql.ErrNoRows) {
		return Task{}, ErrNotFound
	}
	if err != nil {
		return Task{}, err
	}
	if cur.Version != t.Version {
		return Task{}, ErrConflict
	}
	if added := newDeps(cur.BlockedBy, t.BlockedBy); len(added) > 0 {
		edges, err := sessionEdges(ctx, tx, tenant, session)
		if err != nil {
			return Task{}, err
		}
		for _, d := range added {
			if _, ok := edges[d]; !ok {
				return Task{}, ErrDependency
			}
		}
		if createsCycle(edges, t.ID, added) {
			return Task{}, ErrCycle
		}
	}
	next := t.clone()
	next.Owner, next.Created = cur.Owner, cur.Created
	next.Updated = time.UnixMilli(t.Updated.UnixMilli()).UTC()
	next.Version = cur.Version + 1
	res, err := tx.ExecContext(ctx, `UPDATE tasks SET subject = ?, description = ?, status = ?, blocked_by = ?,
		updated_ms = ?, version = ? WHERE tenant = ? AND session = ? AND id = ? AND version = ?`,
		next.Subject, next.Description, next.Status, deps, next.Updated.UnixMilli(), next.Version,
		tenant, session, t.ID, cur.Version)
	if err != nil {
		return Task{}, err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		// Unreachable while the transaction holds the write lock.
		return Task{}, fmt.Errorf("task: update touched %d rows: %w", n, err)
	}
	if err := tx.Commit(); err != nil {
		return Task{}, err
	}
	return next, nil
}

// sessionEdges reads every task id of the session with its dependencies.
func sessionEdges(ctx context.Context, tx *sql.Tx, tenant, session string) (map[string][]string, error) {
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

// Get implements Store.
func (s *SQLiteStore) Get(ctx context.Context, tenant, session, id string) (Task, error) {
	t, err := scanTask(s.r.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE tenant = ? AND session = ? AND id = ?`,
		tenant, session, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Task{}, ErrNotFound
	}
	return t, err
}

// List implements Store.
func (s *SQLiteStore) List(ctx context.Context, tenant, session string) ([]Task, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE tenant = ? AND session = ? ORDER BY seq`,
		tenant, session)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Task{}
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Count implements Store.
func (s *SQLiteStore) Count(ctx context.Context, tenant, session string) (int, error) {
	var n int
	err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM tasks WHERE tenant = ? AND session = ?`, tenant, session).Scan(&n)
	return n, err
}

// Ping reports whether the database answers, for readiness checks.
func (s *SQLiteStore) Ping(ctx context.Context) error {
	var one int
	return s.r.QueryRowContext(ctx, `SELECT 1 FROM `+migrationsTable+` LIMIT 1`).Scan(&one)
}

// Close releases both pools; it is idempotent.
func (s *SQLiteStore) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		if s.r != nil {
			errs = append(errs, s.r.Close())
		}
		errs = append(errs, s.w.Close())
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}
