package pgtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolgate/toolgate/internal/pgtest"
)

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func currentSchema(t *testing.T, c *pgx.Conn) string {
	t.Helper()
	var s string
	if err := c.QueryRow(t.Context(), "SELECT current_schema()").Scan(&s); err != nil {
		t.Fatalf("current_schema: %v", err)
	}
	return s
}

func TestEachCallGetsASchemaOfItsOwn(t *testing.T) {
	conns := []*pgx.Conn{connect(t, pgtest.DSN(t)), connect(t, pgtest.DSN(t))}
	a, b := currentSchema(t, conns[0]), currentSchema(t, conns[1])
	if a == b || !strings.HasPrefix(a, pgtest.SchemaPrefix) || !strings.HasPrefix(b, pgtest.SchemaPrefix) {
		t.Fatalf("schemas %q and %q: want two distinct %s* schemas", a, b, pgtest.SchemaPrefix)
	}
	// The same unqualified table name in both: each sees only its own rows.
	for i, c := range conns {
		if _, err := c.Exec(t.Context(), "CREATE TABLE t (v int)"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(t.Context(), "INSERT INTO t VALUES ($1)", i); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range conns {
		var n, v int
		if err := c.QueryRow(t.Context(), "SELECT count(*), max(v) FROM t").Scan(&n, &v); err != nil || n != 1 || v != i {
			t.Fatalf("schema %d sees %d rows (max %d), %v; want only its own row", i, n, v, err)
		}
	}
}

func TestTheSchemaIsDroppedWhenTheTestEnds(t *testing.T) {
	c := connect(t, pgtest.DSN(t)) // skips here when there is no server
	var schema string
	t.Run("user", func(t *testing.T) {
		c := connect(t, pgtest.DSN(t))
		schema = currentSchema(t, c)
		if _, err := c.Exec(t.Context(), "CREATE TABLE t (v int)"); err != nil {
			t.Fatal(err)
		}
	})
	if schema == "" {
		t.Fatal("the subtest did not get a schema")
	}
	var n int
	if err := c.QueryRow(t.Context(), "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&n); err != nil || n != 0 {
		t.Fatalf("schema %s after its test: %d found, %v; want dropped", schema, n, err)
	}
}

func TestWithSearchPath(t *testing.T) {
	tests := []struct {
		name, dsn, want string
	}{
		{"url", "postgres://u:p@127.0.0.1:5432/db?sslmode=disable",
			"postgres://u:p@127.0.0.1:5432/db?options=-c%20search_path%3Dtg_x&sslmode=disable"},
		{"url keeps existing options", "postgresql://u@h/db?options=-c%20work_mem%3D4MB",
			"postgresql://u@h/db?options=-c%20work_mem%3D4MB%20-c%20search_path%3Dtg_x"},
		{"keyword/value", "host=127.0.0.1 user=u dbname=db",
			"host=127.0.0.1 user=u dbname=db options='-c search_path=tg_x'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pgtest.WithSearchPath(tc.dsn, "tg_x")
			if err != nil || got != tc.want {
				t.Fatalf("WithSearchPath = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	for _, bad := range []struct{ dsn, schema string }{
		{"postgres://h/db", "a b"},
		{"postgres://h/db", `x"y`},
		{"postgres://h/db", ""},
		{"host=h options='-c x=1'", "tg_x"},
	} {
		if got, err := pgtest.WithSearchPath(bad.dsn, bad.schema); err == nil {
			t.Errorf("WithSearchPath(%q, %q) = %q; want an error", bad.dsn, bad.schema, got)
		}
	}
}
