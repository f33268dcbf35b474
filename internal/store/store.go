// Package store owns Toolgate's database. It opens one handle per driver
// (SQLite through modernc.org/sqlite, PostgreSQL through pgx), brings one
// numbered schema up to date with one migration runner (goose), and hands
// out the repositories the rest of the gateway persists through: the audit
// log's audit.Store, the approvals' approval.Store, the task tools'
// task.Store and the idempotency keys' idempotency.Store. No other package opens the database or knows which driver
// it is.
//
// Because every repository lives in one database, the audit store can
// commit a row of another repository in the same transaction as the event
// that announces it (audit.Entry.Record): a held call's approval with its
// decision event, an ask-user question with its result event.
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/approval"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/idempotency"
	"github.com/toolgate/toolgate/internal/ratelimit"
	"github.com/toolgate/toolgate/internal/tools/task"
)

// Drivers Open accepts.
const (
	SQLite   = "sqlite"   // dsn: a database file path
	Postgres = "postgres" // dsn: a postgres:// URL or a keyword/value DSN
)

// Errors callers inspect with errors.Is.
var (
	// ErrUnknownDriver: the driver is neither SQLite nor Postgres.
	ErrUnknownDriver = errors.New("store: unknown driver")
	// ErrSchema: opened without migrating (ReadOnly, WithoutMigrations),
	// the database is not at this gateway's schema: older (the message
	// says to run `gateway audit migrate`), newer, or not a Toolgate
	// database at all. Migrating also refuses a newer schema with it.
	ErrSchema = errors.New("store: database schema does not match this gateway")
)

// DB is an open database and its repositories. Its methods are safe for
// concurrent use; Close releases every connection.
type DB struct {
	driver    string
	audit     audit.Store
	approvals approval.Store
	tasks     task.Store
	keys      idempotency.Store
	limiter   Limiter
	close     func() error
	closeOnce sync.Once
	closeErr  error
}

// Driver returns SQLite or Postgres.
func (db *DB) Driver() string { return db.driver }

// Audit returns the audit events' repository (for audit.NewLog).
func (db *DB) Audit() audit.Store { return db.audit }

// Approvals returns the repository of held calls and ask-user questions.
func (db *DB) Approvals() approval.Store { return db.approvals }

// Tasks returns the task tools' repository.
func (db *DB) Tasks() task.Store { return db.tasks }

// Idempotency returns the repository of the call ids callers chose as
// idempotency keys.
func (db *DB) Idempotency() idempotency.Store { return db.keys }

// Limiter counts the buckets of the rate_limit obligation and drops the
// full ones (Prune).
type Limiter interface {
	ratelimit.Limiter
	// Prune drops the buckets that are full; it returns how many.
	Prune(ctx context.Context) (int64, error)
}

// Limiter returns the rate_limit obligation's buckets: on PostgreSQL a
// table every replica shares (rate_buckets, one statement per take, the
// database's clock), on SQLite a map in this process
// (ratelimit.Memory): a gateway on SQLite is one process.
func (db *DB) Limiter() Limiter { return db.limiter }

// Close releases the database; it is idempotent. Repositories must not be
// used afterwards.
func (db *DB) Close() error {
	db.closeOnce.Do(func() { db.closeErr = db.close() })
	return db.closeErr
}

// Option tunes Open and Migrate.
type Option func(*options)

type mode int

const (
	modeMigrate  mode = iota // apply pending migrations, then serve
	modeCheck                // refuse unless the schema is current, then serve
	modeReadOnly             // refuse unless current; nothing may be written
)

type options struct {
	mode   mode
	logger *slog.Logger
	// SQLite
	busyTimeout time.Duration
	readConns   int
	// PostgreSQL
	maxConns       int32
	connectTimeout time.Duration
	writeTimeout   time.Duration
}

func newOptions(opts []Option) options {
	o := options{
		logger:         slog.New(slog.DiscardHandler),
		busyTimeout:    5 * time.Second,
		readConns:      4,
		connectTimeout: 5 * time.Second,
		writeTimeout:   10 * time.Second,
	}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// ReadOnly opens the database for reading only, for offline readers such
// as `gateway policy replay`: nothing is migrated, created or written (a
// missing SQLite file is an error, not a new database; every PostgreSQL
// transaction is read-only), and a schema that is not current is refused
// with ErrSchema.
func ReadOnly() Option { return func(o *options) { o.mode = modeReadOnly } }

// WithoutMigrations makes Open check that the schema is current (else
// ErrSchema) instead of migrating it, for a gateway whose database role may
// not change the schema: run Migrate (`gateway audit migrate`) with a role
// that may.
func WithoutMigrations() Option {
	return func(o *options) {
		if o.mode == modeMigrate {
			o.mode = modeCheck
		}
	}
}

// WithLogger receives what Open did (migrations applied, warnings).
// Default: discard.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithBusyTimeout sets how long an SQLite connection waits for a lock held
// by another process (default 5s).
func WithBusyTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.busyTimeout = d
		}
	}
}

// WithReadConns sets the size of the SQLite read pool (default 4).
func WithReadConns(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.readConns = n
		}
	}
}

// WithMaxConns bounds the PostgreSQL pool (default: pgxpool's, the larger
// of 4 and the number of CPUs, unless the DSN sets pool_max_conns).
func WithMaxConns(n int32) Option {
	return func(o *options) {
		if n > 0 {
			o.maxConns = n
		}
	}
}

// WithConnectTimeout bounds establishing one PostgreSQL connection when
// the DSN sets no connect_timeout (default 5s).
func WithConnectTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.connectTimeout = d
		}
	}
}

// WithWriteTimeout bounds one audit Insert, Heads or Probe on PostgreSQL
// (default 10s). The audit log writes with a context that never ends, so
// without a bound a server that stopped answering, rather than refusing,
// would stall every append; past it the batch fails and the log reloads
// its heads.
func WithWriteTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.writeTimeout = d
		}
	}
}

// Open opens the database named by driver and dsn and, unless told
// otherwise (ReadOnly, WithoutMigrations), brings its schema up to date
// first, including a database written by a gateway from before this
// package (see Migrate). An SQLite database file that does not exist is
// created with mode 0600, and its missing folders with mode 0700; SQLite
// gives its -wal and -shm files the database file's mode.
func Open(ctx context.Context, driver, dsn string, opts ...Option) (*DB, error) {
	o := newOptions(opts)
	switch driver {
	case SQLite:
		return openSQLiteDSN(ctx, dsn, o)
	case Postgres:
		return openPostgresDSN(ctx, dsn, o)
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownDriver, driver)
}

// Migrate brings the schema of the database named by driver and dsn up to
// date and returns the names of the migrations it applied (none when it
// already was), then closes it. It is what Open does first, for `gateway
// audit migrate` and for deployments whose gateway role may not change the
// schema. Concurrent migrators (replicas starting together) take turns.
// It refuses a schema written by a newer gateway with ErrSchema.
//
// A database from before this package, whose audit, approval and task
// tables each recorded their own migrations, is adopted: its applied
// versions are recorded in the one version table, then whatever it lacks
// is applied. Its tables and rows are left as they are.
func Migrate(ctx context.Context, driver, dsn string, opts ...Option) ([]string, error) {
	o := newOptions(opts)
	switch driver {
	case SQLite:
		path, err := sqlitePath(dsn)
		if err != nil {
			return nil, err
		}
		if err := createSQLiteFile(path, o); err != nil {
			return nil, err
		}
		return migrateSQLite(ctx, path, o)
	case Postgres:
		return migratePostgres(ctx, dsn, o)
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownDriver, driver)
}
