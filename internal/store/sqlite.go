package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/toolgate/toolgate/internal/ratelimit"
)

// The SQLite database is one file in WAL mode with synchronous=FULL, so a
// commit is on disk when it returns. Writes of every repository go through
// one connection (SQLite has one writer anyway; the audit log batches for
// it), whose transactions take the write lock at BEGIN: that makes the
// check-then-write steps of approvals and tasks atomic, also against other
// processes on the same file. Reads use a separate pool of query-only
// connections that WAL lets run beside the writer.

// sqlitePath resolves the SQLite DSN (a file path) to an absolute path.
func sqlitePath(dsn string) (string, error) {
	if dsn == "" {
		return "", errors.New("store: sqlite needs a database file path")
	}
	abs, err := filepath.Abs(dsn)
	if err != nil {
		return "", fmt.Errorf("store: sqlite path: %w", err)
	}
	return abs, nil
}

// sqliteDSN is a file: URI, so that any path (spaces, '?', '#') survives.
func sqliteDSN(abs string, q url.Values) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: q.Encode()}
	return u.String()
}

func busyPragma(o options) string {
	return "busy_timeout(" + strconv.FormatInt(o.busyTimeout.Milliseconds(), 10) + ")"
}

// writerDSN is the DSN of a connection that writes: WAL, durable commits,
// the write lock taken at BEGIN rather than mid-transaction. Statement
// journals (the pages a statement inside a larger transaction changed,
// kept to undo just that statement) stay in memory: in temporary files
// they cost a write system call per page, a quarter of the integrator's
// CPU in a profile.
func writerDSN(abs string, o options) string {
	return sqliteDSN(abs, url.Values{
		"_pragma": {busyPragma(o), "journal_mode(WAL)", "synchronous(FULL)", "temp_store(MEMORY)", "cache_size(-32768)", "wal_autocheckpoint(4096)"},
		"_txlock": {"immediate"},
	})
}

// readerDSN is the DSN of a query-only connection; readOnly also opens the
// file read-only, so that not even SQLite itself may write to it.
func readerDSN(abs string, o options, readOnly bool) string {
	q := url.Values{"_pragma": {busyPragma(o), "query_only(true)"}}
	if readOnly {
		q.Set("mode", "ro")
	}
	return sqliteDSN(abs, q)
}

// createSQLiteFile creates the database file (mode 0600) and its missing
// folders (mode 0700) before SQLite opens it: SQLite would create the file
// with 0644, and gives the -wal and -shm files the database file's mode.
func createSQLiteFile(abs string, o options) error {
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return fmt.Errorf("store: sqlite folder: %w", err)
	}
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		return f.Close()
	case !errors.Is(err, fs.ErrExist):
		return fmt.Errorf("store: sqlite database: %w", err)
	}
	if fi, err := os.Stat(abs); err == nil && fi.Mode().Perm()&0o077 != 0 {
		o.logger.Warn("the database file is readable by other users; the gateway creates it with mode 0600",
			"file", abs, "mode", fi.Mode().Perm().String())
	}
	return nil
}

// migrateSQLite migrates the file at abs on a connection of its own,
// holding the migration lock.
func migrateSQLite(ctx context.Context, abs string, o options) ([]string, error) {
	unlock, err := lockMigrations(ctx, abs)
	if err != nil {
		return nil, fmt.Errorf("store: sqlite migration lock: %w", err)
	}
	defer unlock()
	db, err := sql.Open("sqlite", writerDSN(abs, o))
	if err != nil {
		return nil, fmt.Errorf("store: open sqlite: %w", err)
	}
	defer db.Close()
	applied, err := sqliteDialect.migrate(ctx, db, o.logger)
	if err != nil {
		return applied, fmt.Errorf("store: sqlite %s: %w", abs, err)
	}
	return applied, nil
}

// openSQLiteDSN opens the database file named by dsn.
func openSQLiteDSN(ctx context.Context, dsn string, o options) (_ *DB, err error) {
	abs, err := sqlitePath(dsn)
	if err != nil {
		return nil, err
	}
	readOnly := o.mode == modeReadOnly
	if readOnly {
		if _, err := os.Stat(abs); err != nil {
			return nil, fmt.Errorf("store: sqlite database: %w", err)
		}
	} else if err := createSQLiteFile(abs, o); err != nil {
		return nil, err
	}

	var closers []func() error
	closeAll := func() error {
		var errs []error
		for i := len(closers) - 1; i >= 0; i-- {
			errs = append(errs, closers[i]())
		}
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()

	r, err := sql.Open("sqlite", readerDSN(abs, o, readOnly))
	if err != nil {
		return nil, fmt.Errorf("store: open sqlite: %w", err)
	}
	closers = append(closers, r.Close)
	r.SetMaxOpenConns(o.readConns)
	r.SetMaxIdleConns(o.readConns)

	switch o.mode {
	case modeMigrate:
		if _, err := migrateSQLite(ctx, abs, o); err != nil {
			return nil, err
		}
	default:
		if err := sqliteDialect.check(ctx, r); err != nil {
			return nil, fmt.Errorf("store: sqlite %s: %w", abs, err)
		}
	}

	// A read-only store writes nothing: its "writer" is a read-only
	// connection too, so that any write fails.
	w := r
	if !readOnly {
		if w, err = sql.Open("sqlite", writerDSN(abs, o)); err != nil {
			return nil, fmt.Errorf("store: open sqlite: %w", err)
		}
		closers = append(closers, w.Close)
		w.SetMaxOpenConns(1)
		w.SetMaxIdleConns(1)
		w.SetConnMaxLifetime(0)
		w.SetConnMaxIdleTime(0)
	}
	if err := w.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("store: open sqlite %s: %w", abs, err)
	}
	if err := r.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("store: open sqlite %s: %w", abs, err)
	}

	a, err := newSQLiteAudit(ctx, w, r, readOnly)
	if err != nil {
		return nil, fmt.Errorf("store: open sqlite %s: %w", abs, err)
	}
	closers = append(closers, a.close)
	return &DB{
		driver:    SQLite,
		audit:     a,
		approvals: &approvals{w: w, r: r},
		tasks:     newTasks(w, r, sqliteTasks),
		keys:      &idempotencyKeys{w: w, r: r},
		limiter:   ratelimit.NewMemory(nil),
		close:     closeAll,
	}, nil
}
