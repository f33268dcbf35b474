package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// postgresTasks is the task store for gateway replicas sharing one
// PostgreSQL database; blocked_by is a TEXT[] column, read back as JSON.
//
// Every write runs in a READ COMMITTED transaction that first takes a
// transaction-scoped advisory lock on its (tenant, session): writers of one
// session queue on it, in any process, while other sessions proceed in
// parallel. Holding it, each statement sees everything the previous holder
// committed, so the checks are atomic with the write. (Under REPEATABLE
// READ the snapshot would predate the lock and the checks could read stale
// data, hence the explicit level.)
var postgresTasks = taskDialect{
	dollar:     true,
	refusesNUL: true,
	depsColumn: `array_to_json(blocked_by)::text`,
	depsTable:  `unnest(?::text[]) d(value)`,
	depsArg: func(deps []string) (any, error) {
		if deps == nil {
			deps = []string{}
		}
		return deps, nil
	},
	begin: func(ctx context.Context, w *sql.DB, tenant, session string) (*sql.Tx, error) {
		tx, err := w.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, sessionLockKey(tenant, session)); err != nil {
			tx.Rollback()
			return nil, err
		}
		return tx, nil
	},
	duplicate: func(err error) bool {
		var e *pgconn.PgError
		return errors.As(err, &e) && e.Code == "23505"
	},
}

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
