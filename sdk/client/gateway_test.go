package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/toolgate/toolgate/internal/auth"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/gateway"
)

// testGateway is a real gateway on loopback, built from a gateway.yaml by
// the same code as `gateway serve`, with the shipped policy pack and a
// shadow policy that denies read-file. Tests and examples of this package
// talk to it over HTTP.
type testGateway struct {
	URL    string
	dir    string
	secret []byte
	stop   func()
}

// startGateway starts a gateway in a temporary folder; stop removes it.
func startGateway() (*testGateway, error) {
	dir, err := os.MkdirTemp("", "toolgate-sdk-")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*testGateway, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := os.CopyFS(filepath.Join(dir, "policies"), os.DirFS("../../policies")); err != nil {
		return fail(err)
	}
	files := map[string]string{
		"ws/acme/docs/guide.md":         "# Guide\nline two\n",
		"ws/acme/release/VERSION":       "1\n",
		"shadow/availability.rego":      "package toolgate.availability\n\nallow := true\n",
		"shadow/authz.rego":             "package toolgate.authz\n\ndecision := {\"allow\": input.tool.name != \"read-file\", \"reasons\": [\"shadow\"]}\n",
		"shadow/.manifest":              `{"revision":"shadow-1"}`,
		"ws/acme/notes/.keep":           "",
		"ws/acme/secrets/db.env":        "PASSWORD=x\n",
		"ws/globex/docs/globex-only.md": "globex\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fail(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return fail(err)
		}
	}
	yaml := `listen: "127.0.0.1:0"
policy:
  dir: policies
  shadow: shadow
audit:
  driver: sqlite
  dsn: audit.db
auth:
  jwt:
    hs256_secret_file: secret
tenants:
  acme:
    workspace: ws/acme
  globex:
    workspace: ws/globex
tools:
  builtin: [read-file, write-file, ask-user]
`
	cfgFile := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfgFile, []byte(yaml), 0o644); err != nil {
		return fail(err)
	}
	cfg, err := config.Load(cfgFile)
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g, err := gateway.New(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		cancel()
		return fail(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		g.Close()
		return fail(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx, ln) }()
	secret, err := auth.ReadHS256Secret(filepath.Join(dir, "secret"))
	if err != nil {
		cancel()
		<-done
		g.Close()
		return fail(err)
	}
	return &testGateway{
		URL: "http://" + ln.Addr().String(), dir: dir, secret: secret,
		stop: func() {
			cancel()
			<-done
			g.Close()
			os.RemoveAll(dir)
		},
	}, nil
}

// mustStart is startGateway for examples, which have no *testing.T.
func mustStart() *testGateway {
	gw, err := startGateway()
	if err != nil {
		panic(fmt.Sprintf("starting a gateway: %v", err))
	}
	return gw
}

// token mints a JWT as `gateway token` does.
func (g *testGateway) token(tenant, sub string, roles ...string) string {
	tok, err := auth.MintHS256(g.secret, auth.MintClaims{Tenant: tenant, Subject: sub, Roles: roles, TTL: time.Hour}, time.Now())
	if err != nil {
		panic(err)
	}
	return tok
}
