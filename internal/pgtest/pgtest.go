// Package pgtest gives PostgreSQL integration tests an isolated database
// schema of their own.
//
// The server comes from, in order:
//
//  1. the DSN in TOOLGATE_TEST_POSTGRES_DSN (CI exports it after starting
//     the machine's PostgreSQL, so it never needs Docker);
//  2. a Docker engine, when one is reachable: testcontainers-go starts one
//     PostgreSQL container per test process (Ryuk removes it when the
//     process exits).
//
// With neither — no variable, and no engine or one that cannot start the
// container (it cannot pull the image, say) — DSN skips the test, saying
// why, except under CI=true, where it fails: a CI run must not pass by
// silently skipping the PostgreSQL tests.
//
// Every call creates a fresh schema (tg_<time>_<random>) and returns a DSN
// whose search_path is that schema, so tests in parallel processes (go test
// runs packages in parallel) can share one database without seeing each
// other's tables. The schema is dropped when the test ends.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// EnvDSN names the environment variable holding the test server's DSN.
const EnvDSN = "TOOLGATE_TEST_POSTGRES_DSN"

// SchemaPrefix starts every schema DSN creates.
const SchemaPrefix = "tg_"

// staleAfter is the age beyond which a leftover test schema (from a process
// killed before its cleanup ran, such as a test timeout) is swept.
const staleAfter = 24 * time.Hour

// server is the per-process connection to the test server, set up once.
type server struct {
	once   sync.Once
	dsn    string // base DSN; "" when no server is available
	source string // "docker" or EnvDSN, for messages
	none   string // why there is no server, when dsn is ""
	admin  *pgxpool.Pool
	err    error
}

// The one process-wide server: tests of a package share it, each in its
// own schema. A global is unavoidable here, since DSN is called from
// independent tests and the container must start at most once.
var srv server

// DSN returns a DSN for a fresh schema on the test server; see the package
// documentation. It skips (or, with CI=true, fails) the test when no server
// is available, and fails it when the server cannot be used.
func DSN(t testing.TB) string {
	t.Helper()
	srv.once.Do(srv.start)
	if srv.err != nil {
		t.Fatalf("pgtest: %v", srv.err)
	}
	if srv.dsn == "" {
		noServer(t, srv.none)
		return ""
	}

	schema, err := newSchemaName(time.Now())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := srv.admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("pgtest: create schema on %s: %v", srv.source, err)
	}
	t.Cleanup(func() {
		// t.Context() is already canceled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := srv.admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	dsn, err := WithSearchPath(srv.dsn, schema)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// noServer skips t, or fails it under CI=true, saying why.
func noServer(t testing.TB, why string) {
	t.Helper()
	msg := "pgtest: no PostgreSQL: " + why + "; set " + EnvDSN + " to a server's DSN to run this test"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true: the PostgreSQL tests must not silently skip in CI)")
		return
	}
	t.Skip(msg)
}

// start finds the server and connects the admin pool.
func (s *server) start() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if s.dsn = os.Getenv(EnvDSN); s.dsn != "" {
		s.source = EnvDSN
	} else {
		dsn, err := startContainer(ctx)
		switch {
		case err != nil:
			// An engine that answers but cannot start the container (no
			// registry, no image) is a machine without PostgreSQL, not a
			// failure of the code under test.
			s.none = err.Error()
			return
		case dsn == "":
			s.none = "no Docker engine is reachable and " + EnvDSN + " is not set"
			return
		}
		s.dsn, s.source = dsn, "docker"
	}
	cfg, err := pgxpool.ParseConfig(s.dsn)
	if err != nil {
		// The DSN may hold a password: do not echo it.
		s.err = fmt.Errorf("%s does not parse as a PostgreSQL DSN", s.source)
		return
	}
	cfg.MaxConns = 2 // schema DDL only; test stores bring their own pools
	cfg.ConnConfig.RuntimeParams["application_name"] = "toolgate-pgtest"
	s.admin, err = pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		err = s.admin.Ping(ctx)
	}
	if err != nil {
		s.err = fmt.Errorf("PostgreSQL from %s unreachable: %w", s.source, err)
		return
	}
	sweep(ctx, s.admin, time.Now())
}

// newSchemaName is tg_<unix seconds>_<64 random bits>: unique across
// processes, and dated so that sweep can recognize leftovers.
func newSchemaName(now time.Time) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return SchemaPrefix + strconv.FormatInt(now.Unix(), 10) + "_" + hex.EncodeToString(b[:]), nil
}

// schemaTime parses the creation time out of a schema name of newSchemaName.
func schemaTime(name string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(name, SchemaPrefix)
	if !ok {
		return time.Time{}, false
	}
	secs, _, ok := strings.Cut(rest, "_")
	n, err := strconv.ParseInt(secs, 10, 64)
	if !ok || err != nil {
		return time.Time{}, false
	}
	return time.Unix(n, 0), true
}

// sweep drops test schemas left behind long ago. Failures are ignored: it
// is housekeeping, and another process may be sweeping the same ones.
func sweep(ctx context.Context, admin *pgxpool.Pool, now time.Time) {
	rows, err := admin.Query(ctx, `SELECT nspname FROM pg_namespace
		WHERE starts_with(nspname, $1) AND pg_get_userbyid(nspowner) = current_user`, SchemaPrefix)
	if err != nil {
		return
	}
	var stale []string
	for rows.Next() {
		var name string
		if rows.Scan(&name) != nil {
			continue
		}
		if at, ok := schemaTime(name); ok && now.Sub(at) > staleAfter {
			stale = append(stale, name)
		}
	}
	rows.Close()
	for _, name := range stale {
		admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+quoteIdent(name)+" CASCADE")
	}
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// WithSearchPath returns dsn with the server-side search_path set to
// schema, through the libpq "options" parameter, so that psql and any
// libpq-compatible client honour it as well as pgx. dsn may be a URL
// (postgres://...) or a keyword/value string; existing options are kept.
func WithSearchPath(dsn, schema string) (string, error) {
	if schema == "" || strings.ContainsAny(schema, ` '\,"`) {
		return "", fmt.Errorf("schema name %q needs quoting", schema)
	}
	opt := "-c search_path=" + schema
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", errors.New("the PostgreSQL DSN does not parse as a URL")
		}
		q := u.Query()
		if old := q.Get("options"); old != "" {
			opt = old + " " + opt
		}
		q.Set("options", opt)
		// libpq and pgx percent-decode the query but read '+' literally;
		// QueryEscape has already turned a literal '+' into %2B.
		u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
		return u.String(), nil
	}
	// Keyword/value form: a later keyword overrides an earlier one, so a
	// second options= would drop the first; refuse rather than lose it.
	if strings.Contains(dsn, "options") {
		return "", errors.New("a keyword/value DSN with options is not supported; use a URL")
	}
	return strings.TrimSpace(dsn) + " options='" + opt + "'", nil
}
