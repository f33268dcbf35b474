package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// checkNotNewer refuses a database written by a newer gateway.
func checkNotNewer(ms []Migration, current int) error {
	if n := len(ms); n > 0 && current > ms[n-1].Version {
		return fmt.Errorf("database schema version %d is newer than this gateway's (%d)", current, ms[n-1].Version)
	}
	return nil
}

// ApplySQLite applies the migrations db has not seen, recording them in
// table, all in one transaction, and refuses a database written by a newer
// schema. It returns the names it applied.
func ApplySQLite(ctx context.Context, db *sql.DB, table string, ms []Migration) ([]string, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at TEXT NOT NULL)`); err != nil {
		return nil, err
	}
	var current int
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM `+table).Scan(&current); err != nil {
		return nil, err
	}
	if err := checkNotNewer(ms, current); err != nil {
		return nil, err
	}
	var applied []string
	for _, m := range ms {
		if m.Version <= current {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return nil, fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+table+` (version, name, applied_at) VALUES (?, ?, ?)`,
			m.Version, m.Name, time.Now().UTC().Format(time.RFC3339)); err != nil {
			return nil, err
		}
		applied = append(applied, m.Name)
	}
	return applied, tx.Commit()
}

// TxBeginner is a *pgx.Conn or a *pgxpool.Pool.
type TxBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// ApplyPostgres applies the migrations the database has not seen, recording
// them in table, all in one transaction (PostgreSQL DDL is transactional: a
// failed step leaves nothing behind). The transaction first takes an
// advisory lock named by lockKey and the current schema, so concurrent
// migrators (replicas starting together) queue instead of racing; the lock
// goes with the transaction, also when the connection dies.
func ApplyPostgres(ctx context.Context, db TxBeginner, table, lockKey string, ms []Migration) ([]string, error) {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1 || coalesce(current_schema(), ''), 0))`,
		lockKey); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
		return nil, err
	}
	var current int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+table).Scan(&current); err != nil {
		return nil, err
	}
	if err := checkNotNewer(ms, current); err != nil {
		return nil, err
	}
	var applied []string
	for _, m := range ms {
		if m.Version <= current {
			continue
		}
		// No arguments: the simple protocol, which runs a multi-statement file.
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return nil, fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+table+` (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			return nil, err
		}
		applied = append(applied, m.Name)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	return applied, nil
}
