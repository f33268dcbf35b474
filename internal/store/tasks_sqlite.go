package store

import (
	"context"
	"database/sql"
	"errors"

	"github.com/go-json-experiment/json"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// sqliteTasks is the task store on the embedded database. Writes run on
// the one writer connection, whose transactions take the write lock at
// BEGIN (IMMEDIATE): that lock is every session's, also against other
// processes on the file. blocked_by is a JSON array in a TEXT column.
var sqliteTasks = taskDialect{
	depsColumn: `blocked_by`,
	depsTable:  `json_each(?) d`,
	depsArg: func(deps []string) (any, error) {
		if deps == nil {
			deps = []string{}
		}
		b, err := json.Marshal(deps)
		return string(b), err
	},
	begin: func(ctx context.Context, w *sql.DB, _, _ string) (*sql.Tx, error) {
		return w.BeginTx(ctx, nil)
	},
	duplicate: func(err error) bool {
		var e *sqlite.Error
		return errors.As(err, &e) && (e.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || e.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE)
	},
}
