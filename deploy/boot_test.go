package deploy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/auth"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/pgtest"
)

// TestComposeConfigServesCallsOnPostgreSQL builds a real gateway from the
// config compose runs (container paths mirrored into temp dirs, audit.dsn
// pointed at the test PostgreSQL) and drives it in-process: it becomes
// ready, serves a tool call from the seeded workspace, and audits it in a
// chain that verifies. That is what `docker compose up` should give, short
// of the image itself. Without a PostgreSQL it skips (fails under CI=true).
func TestComposeConfigServesCallsOnPostgreSQL(t *testing.T) {
	dsn := pgtest.DSN(t)
	cfg := containerConfig(t, loadCompose(t), dsn)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, err := gateway.New(ctx, cfg.Config, nil)
	if err != nil {
		t.Fatalf("the compose config does not start a gateway: %v", err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	h := g.Handler()

	secret, err := auth.ReadHS256Secret(cfg.Auth.JWT.HS256SecretFile)
	if err != nil {
		t.Fatal(err)
	}
	token, err := auth.MintHS256(secret, auth.MintClaims{
		Tenant: "acme", Subject: "alice", Roles: []string{"developer", "auditor"}, TTL: time.Hour,
		TenantClaim: cfg.Auth.JWT.TenantClaim, RolesClaim: cfg.Auth.JWT.RolesClaim,
	}, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	do := func(method, target, body string) (int, map[string]any) {
		t.Helper()
		req := httptest.NewRequestWithContext(ctx, method, target, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s %s: %d, body is not a JSON object: %v", method, target, rec.Code, err)
		}
		return rec.Code, out
	}

	if code, body := do(http.MethodGet, "/readyz", ""); code != http.StatusOK {
		t.Fatalf("/readyz = %d %v; want 200", code, body)
	}
	code, body := do(http.MethodPost, "/v1/tools/read-file/calls", `{"arguments":{"path":"docs/guide.md"},"session_id":"s-1"}`)
	if code != http.StatusOK || body["outcome"] != "ok" {
		t.Fatalf("read-file of the seeded docs/guide.md = %d %v; want outcome ok", code, body)
	}
	code, body = do(http.MethodGet, "/v1/audit/verify", "")
	if code != http.StatusOK || body["ok"] != true {
		t.Fatalf("/v1/audit/verify = %d %v; want ok", code, body)
	}
	if n, _ := body["events_checked"].(float64); n < 2 {
		t.Errorf("verify checked %v events; want the call's decision and result", body["events_checked"])
	}
}
