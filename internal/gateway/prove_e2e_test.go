package gateway

import (
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/toolgate/toolgate/internal/audit"
	"golang.org/x/mod/sumdb/tlog"
	_ "modernc.org/sqlite"
)

// The provable log checked as a third party would, with an implementation
// of RFC 6962 and signed notes that is not the one that wrote it
// (golang.org/x/mod/sumdb/tlog and note, where the gateway uses
// transparency-dev): checkpoints open with the published verifier key,
// every event's inclusion proof checks against a saved checkpoint, a later
// tree is consistent with it, and tampering with the database — even by
// someone who recomputes hashes — is caught by POST /v1/audit/verify.

func withFastCheckpoints(s *setup) {
	s.auditYAML = "  driver: sqlite\n  dsn: audit.db\n  checkpoint_interval: 50ms\n"
}

type xcheckpoint struct {
	origin string
	size   int64
	root   tlog.Hash
	text   string
}

// checkpointAtLeast waits for a checkpoint covering at least n events and
// opens it with x/mod's note verifier.
func (h *harness) checkpointAtLeast(token string, vkey string, n int64) xcheckpoint {
	h.t.Helper()
	v, err := note.NewVerifier(vkey)
	if err != nil {
		h.t.Fatalf("x/mod cannot read the verifier key %q: %v", vkey, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := h.do("GET", "/v1/audit/checkpoint", token, nil)
		if r.status == 503 && r.header.Get("Retry-After") != "" && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond) // no checkpoint signed yet
			continue
		}
		if r.status != 200 {
			h.t.Fatalf("checkpoint: %d %s", r.status, r.raw)
		}
		msg, err := note.Open(r.raw, note.VerifierList(v))
		if err != nil {
			h.t.Fatalf("x/mod cannot open the checkpoint: %v\n%s", err, r.raw)
		}
		lines := strings.Split(msg.Text, "\n")
		if len(lines) < 3 {
			h.t.Fatalf("checkpoint body: %q", msg.Text)
		}
		size, err := strconv.ParseInt(lines[1], 10, 64)
		if err != nil {
			h.t.Fatalf("checkpoint size %q", lines[1])
		}
		rb, err := base64.StdEncoding.DecodeString(lines[2])
		if err != nil || len(rb) != 32 {
			h.t.Fatalf("checkpoint root %q", lines[2])
		}
		if size >= n {
			var root tlog.Hash
			copy(root[:], rb)
			return xcheckpoint{origin: lines[0], size: size, root: root, text: string(r.raw)}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("no checkpoint covers %d events (latest %d)", n, size)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func decodeHashes(t *testing.T, v any) []tlog.Hash {
	t.Helper()
	list, _ := v.([]any)
	var out []tlog.Hash
	for _, e := range list {
		b, err := base64.StdEncoding.DecodeString(e.(string))
		if err != nil || len(b) != 32 {
			t.Fatalf("proof hash %v", e)
		}
		var h tlog.Hash
		copy(h[:], b)
		out = append(out, h)
	}
	return out
}

func TestAuditLogProvesItselfToAThirdParty(t *testing.T) {
	t.Parallel()
	h := start(t, withFastCheckpoints)
	alice := h.token("acme", "alice", "developer")
	auditor := h.token("acme", "audrey", "auditor")
	for i := range 5 {
		h.call(alice, "read-file", fmt.Sprintf(`{"arguments":{"path":"docs/guide.md","offset":%d}}`, i+1))
	}
	vk := h.do("GET", "/v1/audit/checkpoint/verifier", auditor, nil)
	if vk.status != 200 {
		t.Fatalf("verifier: %d %s", vk.status, vk.raw)
	}
	vkey := strings.TrimSpace(string(vk.raw))
	events := h.allEvents("acme", "")
	saved := h.checkpointAtLeast(auditor, vkey, int64(len(events)))
	if saved.origin != "toolgate/acme" {
		t.Fatalf("origin %q", saved.origin)
	}
	events = h.allEvents("acme", "")
	// Every event integrated into the saved tree proves its inclusion.
	proven := 0
	for _, ev := range events {
		idx, ok := ev["log_index"].(float64)
		if !ok || int64(idx) >= saved.size {
			continue
		}
		p := h.do("GET", fmt.Sprintf("/v1/audit/events/%s/proof?size=%d", ev["id"], saved.size), auditor, nil)
		if p.status != 200 {
			t.Fatalf("proof of %s: %d %s", ev["id"], p.status, p.raw)
		}
		raw, _ := hex.DecodeString(strings.TrimPrefix(ev["hash"].(string), "sha256:"))
		leaf := tlog.RecordHash(raw)
		if err := tlog.CheckRecord(decodeHashes(t, p.body["hashes"]), saved.size, saved.root, int64(idx), leaf); err != nil {
			t.Fatalf("x/mod rejects the inclusion proof of event %v at %v: %v", ev["id"], idx, err)
		}
		proven++
	}
	if proven < 10 || int64(proven) != saved.size {
		t.Fatalf("proved %d events against a checkpoint of %d (%d events listed)", proven, saved.size, len(events))
	}
	// More events, a later checkpoint, and the consistency proof between.
	for i := range 3 {
		h.call(alice, "read-file", fmt.Sprintf(`{"arguments":{"path":"notes/todo.txt","offset":%d}}`, i+1))
	}
	later := h.checkpointAtLeast(auditor, vkey, saved.size+6)
	c := h.do("GET", fmt.Sprintf("/v1/audit/consistency?from=%d&to=%d", saved.size, later.size), auditor, nil)
	if c.status != 200 {
		t.Fatalf("consistency: %d %s", c.status, c.raw)
	}
	if err := tlog.CheckTree(decodeHashes(t, c.body["hashes"]), later.size, later.root, saved.size, saved.root); err != nil {
		t.Fatalf("x/mod rejects the consistency proof %d→%d: %v", saved.size, later.size, err)
	}
	verify := func(cp xcheckpoint) response {
		b, _ := json.Marshal(map[string]string{"checkpoint": cp.text})
		return h.do("POST", "/v1/audit/verify", auditor, b)
	}
	// It reports the checkpoint it was given, beside the latest.
	if r := verify(saved); r.status != 200 || r.body["ok"] != true || r.body["given_checkpoint_size"] != float64(saved.size) ||
		r.body["checkpoint_size"].(float64) < float64(later.size) {
		t.Fatalf("verify against the saved checkpoint: %d %s", r.status, r.raw)
	}
	// Bad requests: a forged note, another tenant's, garbage.
	forged := strings.Replace(saved.text, "\n"+strconv.FormatInt(saved.size, 10)+"\n", "\n"+strconv.FormatInt(saved.size+1, 10)+"\n", 1)
	if r := verify(xcheckpoint{text: forged}); r.status != 400 {
		t.Errorf("a forged checkpoint: %d %s", r.status, r.raw)
	}
	if r := h.do("POST", "/v1/audit/verify", auditor, []byte(`{"checkpoint":""}`)); r.status != 400 {
		t.Errorf("an empty checkpoint: %d %s", r.status, r.raw)
	}
	for _, bad := range []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/v1/audit/verify", `{"checkpoint":"x","extra":1}`, 400},
		{"POST", "/v1/audit/verify", `{"checkpoint":`, 400},
		{"POST", "/v1/audit/verify", `{"checkpoint":"` + strings.Repeat("a", 20000) + `"}`, 413},
		{"POST", "/v1/audit/verify", `{"checkpoint":"not a note"}`, 400},
		{"GET", "/v1/audit/events/x/proof", "", 400},
		{"GET", "/v1/audit/events/x/proof?size=0", "", 400},
		{"GET", "/v1/audit/events/x/proof?size=abc", "", 400},
		{"GET", "/v1/audit/events/x/proof?size=1&size=2", "", 400},
		{"GET", "/v1/audit/events/x/proof?size=1&other=1", "", 400},
		{"GET", "/v1/audit/consistency?from=3&to=2", "", 400},
		{"GET", "/v1/audit/consistency?from=1", "", 400},
	} {
		var body []byte
		if bad.body != "" {
			body = []byte(bad.body)
		}
		if r := h.do(bad.method, bad.path, auditor, body); r.status != bad.status {
			t.Errorf("%s %s %.40s: %d, want %d: %.200s", bad.method, bad.path, bad.body, r.status, bad.status, r.raw)
		}
	}
	// Another tenant's event is not found in this tenant's log.
	globexAlice := h.token("globex", "gina", "developer")
	h.call(globexAlice, "read-file", `{"arguments":{"path":"docs/guide.md"}}`)
	gev := h.allEvents("globex", "")
	if len(gev) == 0 {
		t.Fatal("no globex event")
	}
	if r := h.do("GET", fmt.Sprintf("/v1/audit/events/%s/proof?size=%d", gev[0]["id"], saved.size), auditor, nil); r.status != 404 {
		t.Errorf("acme's auditor got a proof of globex's event: %d %s", r.status, r.raw)
	}
	if r := h.do("GET", "/v1/audit/events/nope/proof?size=1", auditor, nil); r.status != 404 {
		t.Errorf("proof of an unknown event: %d %s", r.status, r.raw)
	}
	if r := h.do("GET", fmt.Sprintf("/v1/audit/consistency?from=%d&to=%d", later.size, later.size+1000), auditor, nil); r.status != 400 {
		t.Errorf("consistency beyond the tree: %d %s", r.status, r.raw)
	}
	if r := h.do("GET", "/v1/audit/checkpoint", alice, nil); r.status != 403 {
		t.Errorf("a developer read the checkpoint: %d", r.status)
	}

	// Offline: an export that is exactly the checkpointed log verifies
	// with nothing but the note and the key; a truncated, edited or longer
	// one does not.
	all := h.checkpointAtLeast(auditor, vkey, int64(len(h.allEvents("acme", ""))))
	ex := h.do("GET", "/v1/audit/export?format=ndjson", auditor, nil)
	if ex.status != 200 {
		t.Fatalf("export: %d %s", ex.status, ex.raw)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(ex.raw), "\n"), "\n")
	offline := func(export string, cp xcheckpoint) error {
		_, _, err := audit.VerifyExport(strings.NewReader(export), []byte(cp.text), []string{vkey})
		return err
	}
	if int64(len(lines)) != all.size {
		t.Fatalf("export has %d events, the checkpoint %d", len(lines), all.size)
	}
	if err := offline(string(ex.raw), all); err != nil {
		t.Fatalf("offline verification of an exact export: %v", err)
	}
	if err := offline(strings.Join(lines[:len(lines)-1], ""), all); err == nil {
		t.Error("a truncated export verified")
	}
	edited := strings.Replace(string(ex.raw), `"principal":"alice"`, `"principal":"mallory"`, 1)
	if err := offline(edited, all); err == nil {
		t.Error("an edited export verified")
	}
	if err := offline(string(ex.raw), saved); err == nil {
		t.Error("an export longer than the checkpoint verified as exactly its log")
	}
	if err := offline(string(ex.raw), xcheckpoint{text: forged}); err == nil {
		t.Error("an export verified against a forged checkpoint")
	}

	// Tampering by someone with the database but not the key: delete the
	// newest event.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(h.dir, "audit.db")+"?_pragma=busy_timeout(30000)") // the gateway writes too
	must(t, err)
	defer db.Close()
	if _, err := db.Exec(`DELETE FROM audit_events WHERE tenant = 'acme' AND log_index = (SELECT MAX(log_index) FROM audit_events WHERE tenant = 'acme')`); err != nil {
		t.Fatal(err)
	}
	if r := verify(later); r.status != 200 || r.body["ok"] != false || r.str("problem") == "" {
		t.Fatalf("verify after deleting the newest event: %d %s", r.status, r.raw)
	}
	if r := h.do("GET", "/v1/audit/verify", auditor, nil); r.status != 200 || r.body["ok"] != false {
		t.Fatalf("GET verify after deleting the newest event: %d %s", r.status, r.raw)
	}
}
