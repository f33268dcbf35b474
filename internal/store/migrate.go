package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
)

// migrations holds one numbered sequence per driver, NNNNN_name.sql in
// goose's format. Both sequences have the same versions and tables.
//
//go:embed migrations
var migrations embed.FS

// versionTable records the applied migrations (goose's table layout). Not
// goose's default name: a PostgreSQL schema is often shared with other
// applications, some of them using goose too.
const versionTable = "toolgate_schema_version"

// legacyTable is a migrations table of the gateway before this package,
// when the audit, approval and task stores each migrated on their own.
type legacyTable struct {
	name   string
	offset int64 // its version v is this package's version offset+v
	last   int64 // the highest version it ever recorded
}

// dialect is what migrating needs to know about a driver.
type dialect struct {
	driver string
	goose  goose.Dialect
	dir    string // in migrations
	legacy []legacyTable
	// tableExists reports whether the table is in the schema the
	// migrations create their tables in.
	tableExists func(ctx context.Context, q querier, table string) (bool, error)
}

// querier is a *sql.DB, *sql.Conn or *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

var sqliteDialect = dialect{
	driver: SQLite, goose: goose.DialectSQLite3, dir: "migrations/sqlite",
	legacy: []legacyTable{
		{"schema_migrations", 0, 3},          // audit: events, checkpoints, an index
		{"approval_schema_migrations", 3, 2}, // approvals, questions
		{"task_schema_migrations", 5, 1},     // tasks
	},
	tableExists: func(ctx context.Context, q querier, table string) (bool, error) {
		var n int
		err := q.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, table).Scan(&n)
		return n > 0, err
	},
}

var postgresDialect = dialect{
	driver: Postgres, goose: goose.DialectPostgres, dir: "migrations/postgres",
	legacy: []legacyTable{
		{"audit_schema_migrations", 0, 3},
		{"approval_schema_migrations", 3, 2},
		{"task_schema_migrations", 5, 1},
	},
	// The first schema of the search path, where unqualified CREATE TABLE
	// puts tables (goose's own check looks there too).
	tableExists: func(ctx context.Context, q querier, table string) (bool, error) {
		var ok bool
		err := q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_tables
			WHERE schemaname = current_schema() AND tablename = $1)`, table).Scan(&ok)
		return ok, err
	},
}

// source is one embedded migration.
type source struct {
	version int64
	name    string
}

// sources lists d's migrations in version order.
func (d dialect) sources() ([]source, error) {
	entries, err := fs.ReadDir(migrations, d.dir)
	if err != nil {
		return nil, err
	}
	var out []source
	for _, e := range entries {
		num, _, _ := strings.Cut(e.Name(), "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil || v <= 0 || path.Ext(e.Name()) != ".sql" {
			return nil, fmt.Errorf("store: migration %q: name must be NNNNN_name.sql", e.Name())
		}
		out = append(out, source{v, e.Name()})
	}
	slices.SortFunc(out, func(a, b source) int { return int(a.version - b.version) })
	return out, nil
}

// versionStore is goose's view of the version table.
func (d dialect) versionStore() (database.Store, error) {
	return database.NewStore(d.goose, versionTable)
}

// applied returns the versions recorded in the version table, and whether
// the table exists. It only reads.
func (d dialect) applied(ctx context.Context, q querier) (map[int64]bool, bool, error) {
	ok, err := d.tableExists(ctx, q, versionTable)
	if err != nil || !ok {
		return nil, false, err
	}
	vs, err := d.versionStore()
	if err != nil {
		return nil, false, err
	}
	list, err := vs.ListMigrations(ctx, q)
	if err != nil {
		return nil, false, err
	}
	out := map[int64]bool{}
	for _, m := range list {
		if m.IsApplied && m.Version > 0 {
			out[m.Version] = true
		}
	}
	return out, true, nil
}

// legacyApplied returns the versions, in this package's numbering, that
// the per-store migration tables of an earlier gateway recorded (none when
// there are no such tables). It only reads.
func (d dialect) legacyApplied(ctx context.Context, q querier) ([]int64, error) {
	var out []int64
	for _, l := range d.legacy {
		ok, err := d.tableExists(ctx, q, l.name)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		rows, err := q.QueryContext(ctx, `SELECT version FROM `+l.name)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", l.name, err)
		}
		for rows.Next() {
			var v int64
			if err := rows.Scan(&v); err != nil {
				rows.Close()
				return nil, err
			}
			if v < 1 || v > l.last {
				rows.Close()
				return nil, fmt.Errorf("%w: %s records version %d, newer than any this gateway knows (%d)", ErrSchema, l.name, v, l.last)
			}
			out = append(out, l.offset+v)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	slices.Sort(out)
	return out, nil
}

// check verifies, without writing anything, that the database is at this
// gateway's schema.
func (d dialect) check(ctx context.Context, q querier) error {
	srcs, err := d.sources()
	if err != nil {
		return err
	}
	applied, ok, err := d.applied(ctx, q)
	if err != nil {
		return fmt.Errorf("store: reading the schema version: %w", err)
	}
	if !ok {
		legacy, err := d.legacyApplied(ctx, q)
		if err != nil {
			return err
		}
		if len(legacy) > 0 {
			return fmt.Errorf("%w: the database was written by an earlier gateway and needs upgrading: run `gateway audit migrate`", ErrSchema)
		}
		return fmt.Errorf("%w: the database has no Toolgate schema: run `gateway audit migrate`", ErrSchema)
	}
	return compare(srcs, applied, true)
}

// compare reports a schema newer than srcs and, when missingToo, one that
// lacks some of them.
func compare(srcs []source, applied map[int64]bool, missingToo bool) error {
	known := map[int64]bool{}
	var missing []string
	for _, s := range srcs {
		known[s.version] = true
		if !applied[s.version] {
			missing = append(missing, s.name)
		}
	}
	last := srcs[len(srcs)-1].version
	for v := range applied {
		if !known[v] {
			return fmt.Errorf("%w: the database has schema version %d, newer than this gateway's (%d)", ErrSchema, v, last)
		}
	}
	if missingToo && len(missing) > 0 {
		return fmt.Errorf("%w: the database lacks migrations %s: run `gateway audit migrate`", ErrSchema, strings.Join(missing, ", "))
	}
	return nil
}

// migrate applies the pending migrations to db and returns their names.
// The caller holds the migration lock.
func (d dialect) migrate(ctx context.Context, db *sql.DB, log *slog.Logger) ([]string, error) {
	srcs, err := d.sources()
	if err != nil {
		return nil, err
	}
	applied, ok, err := d.applied(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("store: reading the schema version: %w", err)
	}
	if ok {
		if err := compare(srcs, applied, false); err != nil {
			return nil, err
		}
	} else if err := d.adopt(ctx, db, log); err != nil {
		return nil, err
	}

	sub, err := fs.Sub(migrations, d.dir)
	if err != nil {
		return nil, err
	}
	p, err := goose.NewProvider(d.goose, db, sub,
		goose.WithTableName(versionTable),
		// An adopted database may lack a migration older than its newest
		// (an earlier gateway's audit index, say): apply it too.
		goose.WithAllowOutofOrder(true),
		goose.WithDisableGlobalRegistry(true),
		goose.WithSlog(slog.New(slog.DiscardHandler)),
	)
	if err != nil {
		return nil, err
	}
	results, err := p.Up(ctx)
	var names []string
	var partial *goose.PartialError
	if errors.As(err, &partial) {
		results = partial.Applied
	}
	for _, r := range results {
		names = append(names, path.Base(r.Source.Path))
	}
	if err != nil {
		return names, fmt.Errorf("store: migrating: %w", err)
	}
	if len(names) > 0 {
		log.Info("database schema migrated", "driver", d.driver, "applied", names)
	}
	return names, nil
}

// adopt records the versions an earlier gateway's per-store migration
// tables hold in the version table, in one transaction, so that goose
// applies only what the database lacks. A database without such tables is
// left to goose.
func (d dialect) adopt(ctx context.Context, db *sql.DB, log *slog.Logger) error {
	legacy, err := d.legacyApplied(ctx, db)
	if err != nil || len(legacy) == 0 {
		return err
	}
	vs, err := d.versionStore()
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := vs.CreateVersionTable(ctx, tx); err != nil {
		return fmt.Errorf("store: adopting an earlier schema: %w", err)
	}
	// Version 0 is goose's marker of a created table.
	for _, v := range append([]int64{0}, legacy...) {
		if err := vs.Insert(ctx, tx, database.InsertRequest{Version: v}); err != nil {
			return fmt.Errorf("store: adopting an earlier schema: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: adopting an earlier schema: %w", err)
	}
	log.Info("adopted the schema of an earlier gateway", "driver", d.driver, "versions", legacy)
	return nil
}
