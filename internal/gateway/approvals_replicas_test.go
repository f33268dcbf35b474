package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/auth"
	"github.com/toolgate/toolgate/internal/pgtest"
)

// A call held on one replica is approved on another (they share only
// PostgreSQL); approvers racing on both replicas run it exactly once.
func TestApprovalAcrossReplicasRunsOnce(t *testing.T) {
	t.Parallel() // its own gateway, workspace and database; mostly waiting
	c := newCluster(t, pgtest.DSN(t))
	must(t, os.MkdirAll(filepath.Join(c.dir, "ws/acme/release"), 0o755))
	must(t, os.WriteFile(filepath.Join(c.dir, "ws/acme/release/VERSION"), []byte("1\n"), 0o644))
	a, b := c.start("a", c.dsn), c.start("b", c.dsn)
	tok := func(sub string, roles ...string) string {
		s, err := auth.MintHS256(c.secret, auth.MintClaims{Tenant: "acme", Subject: sub, Roles: roles, TTL: time.Hour}, time.Now())
		must(t, err)
		return s
	}
	do := func(method, url, token, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := plainClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, nil
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var m map[string]any
		json.Unmarshal(raw, &m)
		return resp.StatusCode, m
	}

	alice := tok("alice", "developer")
	code, held := do("POST", a.base+"/v1/tools/write-file/calls", alice, `{"arguments":{"path":"release/VERSION","content":"2"}}`)
	if code != 200 || held["outcome"] != "approval_required" {
		t.Fatalf("held call: %d %v", code, held)
	}
	id := held["data"].(map[string]any)["approval_id"].(string)
	callID := held["call_id"].(string)

	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i, r := range []*replica{a, b} {
		wg.Go(func() {
			codes[i], _ = do("POST", r.base+"/v1/approvals/"+id+"/approve", tok([]string{"bob", "carol"}[i], "approver"), "")
		})
	}
	wg.Wait()
	if !(codes[0] == 200 && codes[1] == 409 || codes[0] == 409 && codes[1] == 200) {
		t.Fatalf("racing approvals answered %v, want one 200 and one 409", codes)
	}
	if got, _ := os.ReadFile(filepath.Join(c.dir, "ws/acme/release/VERSION")); string(got) != "2" {
		t.Fatalf("release/VERSION = %q", got)
	}
	for _, r := range []*replica{a, b} {
		if code, p := do("GET", r.base+"/v1/calls/"+callID, alice, ""); code != 200 || p["outcome"] != "ok" {
			t.Fatalf("poll on %s: %d %v", r.base, code, p)
		}
	}
	results := 0
	for _, e := range allEvents(t, a.base, c.token("auditor")) {
		if e["call_id"] == callID && e["phase"] == "result" {
			results++
		}
	}
	if results != 1 {
		t.Fatalf("%d result events for the approved call, want 1", results)
	}
}
