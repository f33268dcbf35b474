package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// SQLiteStore is the embedded Store: one database file in WAL mode with
// synchronous=FULL, so a committed batch is on disk. All writes go through
// one connection (SQLite has one writer anyway; the Log batches for it);
// queries use a separate pool of read-only connections that WAL lets run
// beside the writer.
type SQLiteStore struct {
	w, r   *sql.DB
	insert *sql.Stmt // on w
	// pruneBatch overrides pruneBatch (tests walk several steps with it).
	pruneBatch int64
	closeOnce  sync.Once
	closeErr   error
}

var _ Store = (*SQLiteStore)(nil)

// SQLiteOption tunes OpenSQLite.
type SQLiteOption func(*sqliteConfig)

type sqliteConfig struct {
	busyTimeout time.Duration
	readConns   int
}

// WithBusyTimeout sets how long a connection waits for a lock held by
// another process (default 5s).
func WithBusyTimeout(d time.Duration) SQLiteOption {
	return func(c *sqliteConfig) { c.busyTimeout = d }
}

// WithReadConns sets the size of the read pool (default 4).
func WithReadConns(n int) SQLiteOption {
	return func(c *sqliteConfig) {
		if n > 0 {
			c.readConns = n
		}
	}
}

// OpenSQLite opens (creating when missing) the database file at path and
// its parent folder, and brings its schema up to date.
func OpenSQLite(ctx context.Context, path string, opts ...SQLiteOption) (*SQLiteStore, error) {
	cfg := sqliteConfig{busyTimeout: 5 * time.Second, readConns: 4}
	for _, o := range opts {
		o(&cfg)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("audit: sqlite path: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o750); err != nil {
		return nil, fmt.Errorf("audit: sqlite folder: %w", err)
	}
	busy := "busy_timeout(" + strconv.FormatInt(cfg.busyTimeout.Milliseconds(), 10) + ")"

	s := &SQLiteStore{}
	s.w, err = sql.Open("sqlite", sqliteDSN(abs, url.Values{
		"_pragma": {busy, "journal_mode(WAL)", "synchronous(FULL)"},
		"_txlock": {"immediate"}, // take the write lock at BEGIN, not mid-transaction
	}))
	if err != nil {
		return nil, fmt.Errorf("audit: open sqlite: %w", err)
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	s.w.SetConnMaxLifetime(0)
	s.w.SetConnMaxIdleTime(0)
	if err := migrateSQLite(ctx, s.w); err != nil {
		s.w.Close()
		return nil, fmt.Errorf("audit: open sqlite %s: %w", abs, err)
	}
	s.r, err = sql.Open("sqlite", sqliteDSN(abs, url.Values{
		"_pragma": {busy, "query_only(true)"},
	}))
	if err != nil {
		s.w.Close()
		return nil, fmt.Errorf("audit: open sqlite: %w", err)
	}
	s.r.SetMaxOpenConns(cfg.readConns)
	s.r.SetMaxIdleConns(cfg.readConns)
	if err := s.r.PingContext(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("audit: open sqlite %s: %w", abs, err)
	}
	s.insert, err = s.w.PrepareContext(ctx, `INSERT INTO audit_events
		(tenant, chain, seq, id, time_ms, tool, principal, outcome, phase, session_id, call_id, decision_id, hash, raw)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("audit: open sqlite: %w", err)
	}
	return s, nil
}

// sqliteDSN is a file: URI, so that any path (spaces, '?', '#') survives.
func sqliteDSN(abs string, q url.Values) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: q.Encode()}
	return u.String()
}

// Insert implements Store: one IMMEDIATE transaction, all rows or none.
func (s *SQLiteStore) Insert(ctx context.Context, events []*Event, raw [][]byte) error {
	if len(events) != len(raw) {
		return errors.New("audit: insert: events and raw differ in length")
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	stmt := tx.StmtContext(ctx, s.insert)
	for i, ev := range events {
		ms, err := eventTimeMS(ev)
		if err != nil {
			return err
		}
		if _, err := stmt.ExecContext(ctx, ev.Tenant, ev.Chain, ev.Seq, ev.ID, ms, ev.Tool, ev.Principal,
			ev.Outcome, ev.Phase, ev.SessionID, ev.CallID, ev.DecisionID, ev.Hash, string(raw[i])); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Heads implements Store. It walks the distinct tenants with a recursive
// skip scan of the (tenant, chain, seq) index, then takes each tenant's
// highest seq: O(tenants · log n), not a scan of the table.
func (s *SQLiteStore) Heads(ctx context.Context, chain string) (map[string]Head, error) {
	rows, err := s.w.QueryContext(ctx, `
		WITH RECURSIVE tenants(tenant) AS (
			SELECT min(tenant) FROM audit_events
			UNION ALL
			SELECT (SELECT min(tenant) FROM audit_events WHERE tenant > tenants.tenant)
			FROM tenants WHERE tenants.tenant IS NOT NULL
		)
		SELECT e.tenant, e.seq, e.hash
		FROM tenants JOIN audit_events e ON e.tenant = tenants.tenant AND e.chain = ?
		WHERE e.seq = (SELECT max(seq) FROM audit_events m WHERE m.tenant = tenants.tenant AND m.chain = ?)`,
		chain, chain)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	heads := map[string]Head{}
	for rows.Next() {
		var t string
		var h Head
		if err := rows.Scan(&t, &h.Seq, &h.Hash); err != nil {
			return nil, err
		}
		heads[t] = h
	}
	return heads, rows.Err()
}

// Query implements Store.
func (s *SQLiteStore) Query(ctx context.Context, tenant string, f Filter) (Page, error) {
	q, args, err := sqliteQuery(tenant, f)
	if err != nil {
		return Page{}, err
	}
	f, _ = f.Normalize()
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return Page{}, err
	}
	defer rows.Close()
	var page Page
	var last Position
	for rows.Next() {
		if len(page.Events) == f.Limit {
			page.NextCursor = EncodeCursor(tenant, f, last)
			break
		}
		var raw []byte
		if err := rows.Scan(&last.TimeMS, &last.ID, &raw); err != nil {
			return Page{}, err
		}
		ev, err := decodeEvent(raw)
		if err != nil {
			return Page{}, err
		}
		page.Events = append(page.Events, ev)
	}
	if err := rows.Err(); err != nil {
		return Page{}, err
	}
	return page, nil
}

// sqliteQuery builds the page query: equality filters, inclusive time
// bounds, the keyset position after the cursor, newest first, one row more
// than the limit to know whether a next page exists.
func sqliteQuery(tenant string, f Filter) (string, []any, error) {
	f, err := f.Normalize()
	if err != nil {
		return "", nil, err
	}
	pos, hasPos, err := DecodeCursor(tenant, f)
	if err != nil {
		return "", nil, err
	}
	var b strings.Builder
	b.WriteString("SELECT time_ms, id, raw FROM audit_events WHERE tenant = ?")
	args := []any{tenant}
	for _, c := range []struct{ col, val string }{
		{"tool", f.Tool}, {"principal", f.Principal}, {"outcome", f.Outcome}, {"phase", f.Phase},
		{"session_id", f.SessionID}, {"call_id", f.CallID}, {"decision_id", f.DecisionID},
	} {
		if c.val != "" {
			b.WriteString(" AND " + c.col + " = ?")
			args = append(args, c.val)
		}
	}
	if ms, ok := f.FromMS(); ok {
		b.WriteString(" AND time_ms >= ?")
		args = append(args, ms)
	}
	if ms, ok := f.ToMS(); ok {
		b.WriteString(" AND time_ms <= ?")
		args = append(args, ms)
	}
	if hasPos {
		b.WriteString(" AND (time_ms, id) < (?, ?)")
		args = append(args, pos.TimeMS, pos.ID)
	}
	b.WriteString(" ORDER BY time_ms DESC, id DESC LIMIT ?")
	args = append(args, f.Limit+1)
	return b.String(), args, nil
}

// Get implements Store.
func (s *SQLiteStore) Get(ctx context.Context, tenant, id string) (*Event, error) {
	var raw []byte
	err := s.r.QueryRowContext(ctx, `SELECT raw FROM audit_events WHERE id = ? AND tenant = ?`, id, tenant).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return decodeEvent(raw)
}

// Scan implements Store. It reads in one transaction, so it sees one
// snapshot even while the writer commits.
func (s *SQLiteStore) Scan(ctx context.Context, tenant string, fn func(Row) error) error {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT raw, tenant, chain, seq, id, time_ms, tool, principal, outcome,
		phase, session_id, call_id, decision_id, hash
		FROM audit_events WHERE tenant = ? ORDER BY chain, seq`, tenant)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var r Row
		if err := rows.Scan(&r.Raw, &r.Tenant, &r.Chain, &r.Seq, &r.ID, &r.TimeMS, &r.Tool, &r.Principal,
			&r.Outcome, &r.Phase, &r.SessionID, &r.CallID, &r.DecisionID, &r.Hash); err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Ping implements Store.
func (s *SQLiteStore) Ping(ctx context.Context) error {
	var one int
	return s.r.QueryRowContext(ctx, `SELECT 1 FROM schema_migrations LIMIT 1`).Scan(&one)
}

// Close implements Store; it is idempotent.
func (s *SQLiteStore) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		if s.insert != nil {
			errs = append(errs, s.insert.Close())
		}
		if s.r != nil {
			errs = append(errs, s.r.Close())
		}
		errs = append(errs, s.w.Close())
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// decodeEvent decodes a stored event.
func decodeEvent(raw []byte) (*Event, error) {
	ev := new(Event)
	if err := json.Unmarshal(raw, ev); err != nil {
		return nil, fmt.Errorf("audit: stored event: %w", err)
	}
	return ev, nil
}
