package gateway

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/open-policy-agent/opa/v1/plugins/logs"
)

// opaBinary is the OPA CLI pinned in go.mod (`tool github.com/open-policy-
// agent/opa`), built once through the Go build cache.
func opaBinary(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "tool", "-n", "opa").Output()
	if p := strings.TrimSpace(string(out)); err == nil && p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	bin := filepath.Join(t.TempDir(), "opa")
	if b, err := exec.Command("go", "build", "-o", bin, "github.com/open-policy-agent/opa").CombinedOutput(); err != nil {
		t.Fatalf("building the pinned opa CLI: %v\n%s", err, b)
	}
	return bin
}

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(l.b.Bytes()))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// realOPA runs `opa run --server --set decision_logs.console=true` on dir,
// on loopback, and returns its base URL and its console output.
func realOPA(t *testing.T, dir string) (string, *lockedBuffer) {
	t.Helper()
	bin := opaBinary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	out := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "run", "--server", "--addr", addr, "--skip-version-check",
		"--set", "decision_logs.console=true", "--log-format", "json", dir)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	base := "http://" + addr
	for deadline := time.Now().Add(60 * time.Second); ; {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return base, out
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("opa did not become healthy: %v\n%s", err, strings.Join(out.lines(), "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// opaDecide posts input to a real OPA's data API at path and returns the
// console decision-log line OPA wrote for it.
func opaDecide(t *testing.T, base string, out *lockedBuffer, path string, input any) map[string]any {
	t.Helper()
	body, err := json.Marshal(map[string]any{"input": input})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(base+"/v1/data/"+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var answer struct {
		DecisionID string `json:"decision_id"`
	}
	if err := json.Unmarshal(raw, &answer, json.RejectUnknownMembers(false)); err != nil || answer.DecisionID == "" {
		t.Fatalf("opa answered %d %s (%v)", resp.StatusCode, raw, err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, l := range out.lines() {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "Decision Log" && m["decision_id"] == answer.DecisionID {
				return m
			}
		}
	}
	t.Fatalf("opa logged no decision %s:\n%s", answer.DecisionID, strings.Join(out.lines(), "\n"))
	return nil
}

// rfc3339Nano is the form of OPA's and Toolgate's timestamps: RFC 3339 with
// up to nine fractional digits (Go's time.RFC3339Nano).
var rfc3339Nano = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)$`)

// The opa export is what a real OPA logs for the same decision: the same
// bundle (the shipped policy folder) and the same input give the same
// path, input and result — the whole decision object, approval_required
// and message included, and availability's boolean — and every member OPA
// logs is there in the same form, with Toolgate's extras only in labels
// and custom.
func TestOPAExportMatchesARealOPAsDecisionLog(t *testing.T) {
	t.Parallel()
	h := start(t)
	dev := h.token("acme", "alice", "developer")
	calls := map[string]struct{ token, tool, body, outcome string }{
		"allow":             {dev, "read-file", `{"arguments":{"path":"docs/guide.md"}}`, "ok"},
		"denied":            {dev, "read-file", `{"arguments":{"path":"secrets/db.env"}}`, "denied"},
		"approval_required": {dev, "write-file", `{"arguments":{"path":"release/VERSION","content":"2"}}`, "approval_required"},
		"unavailable":       {h.token("acme", "vera", "viewer"), "write-file", `{"arguments":{"path":"notes/v.txt","content":"v"}}`, "unavailable"},
	}
	byDecision := map[string]string{}
	for name, c := range calls {
		r := h.call(c.token, c.tool, c.body)
		if r.str("outcome") != c.outcome {
			t.Fatalf("%s: %s", name, r.raw)
		}
		byDecision[r.str("decision_id")] = name
	}
	lines := h.exportAs("acme", "format=opa")
	if len(lines) != len(calls) {
		t.Fatalf("%d lines for %d decisions", len(lines), len(calls))
	}
	base, out := realOPA(t, filepath.Join(h.dir, "policies"))

	eventV1 := map[string]bool{}
	evType := reflect.TypeFor[logs.EventV1]()
	for i := range evType.NumField() {
		f := evType.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			eventV1[name] = true
		}
	}
	// What the console logger adds around the event, and what only a
	// server knows (its request counter, the client's address).
	notEvent := map[string]bool{"level": true, "msg": true, "time": true, "type": true, "req_id": true, "requested_by": true}

	seen := map[string]bool{}
	for _, line := range lines {
		var tg map[string]any
		if err := json.Unmarshal(line, &tg); err != nil {
			t.Fatal(err)
		}
		name := byDecision[tg["decision_id"].(string)]
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			opa := opaDecide(t, base, out, tg["path"].(string), tg["input"])
			for _, key := range []string{"path", "input", "result"} {
				if got, want := canonicalJSON(t, tg[key]), canonicalJSON(t, opa[key]); got != want {
					t.Errorf("%s differs from OPA's:\ntoolgate: %s\nopa:      %s", key, got, want)
				}
			}
			if res, ok := tg["result"].(map[string]any); ok {
				if _, has := res["outcome"]; has {
					t.Errorf("result has an added outcome: %v", res)
				}
			}
			for key := range tg {
				if !eventV1[key] {
					t.Errorf("member %q is not one of OPA's EventV1", key)
				}
			}
			for key := range opa {
				if _, ok := tg[key]; !ok && !notEvent[key] {
					t.Errorf("OPA logs %q, the export does not: %v", key, opa[key])
				}
			}
			for _, ev := range []map[string]any{tg, opa} {
				if ts, _ := ev["timestamp"].(string); !rfc3339Nano.MatchString(ts) {
					t.Errorf("timestamp %q is not RFC 3339 with nanoseconds", ev["timestamp"])
				}
				if id, _ := ev["decision_id"].(string); id == "" {
					t.Errorf("no decision_id: %v", ev)
				}
				labels, _ := ev["labels"].(map[string]any)
				if _, ok := labels["id"].(string); !ok {
					t.Errorf("labels without id: %v", ev["labels"])
				}
				if _, ok := labels["version"].(string); !ok {
					t.Errorf("labels without version: %v", ev["labels"])
				}
				if e, has := ev["erased"]; has {
					t.Errorf("erased present though empty: %v", e)
				}
			}
			opaMetrics, _ := opa["metrics"].(map[string]any)
			tgMetrics, _ := tg["metrics"].(map[string]any)
			if len(tgMetrics) == 0 {
				t.Errorf("no metrics")
			}
			for k, v := range tgMetrics {
				if _, ok := opaMetrics[k]; !ok {
					t.Errorf("metric %q is not one OPA logs (OPA's: %v)", k, mapsKeys(opaMetrics))
				}
				if n, ok := v.(float64); !ok || n < 0 {
					t.Errorf("metric %q = %v", k, v)
				}
			}
			masked, hasMasked := tg["masked"]
			if wantMasked := name == "approval_required"; hasMasked != wantMasked {
				t.Errorf("masked %v present %v, want %v", masked, hasMasked, wantMasked)
			}
			if _, has := opa["masked"]; has {
				t.Errorf("OPA masked something: %v", opa["masked"])
			}
			t.Logf("toolgate: %s", line)
			b, _ := json.Marshal(opa)
			t.Logf("opa:      %s", b)
		})
	}
	for name := range calls {
		if !seen[name] {
			t.Errorf("no line for %s", name)
		}
	}
	// Numbers stay numbers: the shipped pack sets timeout_ms.
	for _, line := range lines {
		if bytes.Contains(line, []byte(`"timeout_ms":"`)) {
			t.Fatalf("an obligation became a string: %s", line)
		}
	}
}

func mapsKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// A number the policy returns is a JSON number wherever Toolgate shows it:
// /v1/policy/eval's decision, and the audit event's obligations and
// decision (the shipped pack sets "timeout_ms": 30000).
func TestPolicyNumbersStayNumbers(t *testing.T) {
	t.Parallel()
	h := start(t)
	admin := h.token("acme", "pat", "policy-admin")
	r := h.do("POST", "/v1/policy/eval", admin, []byte(`{"tool":"read-file","arguments":{"path":"docs/guide.md"},"principal":{"id":"alice","roles":["developer"]}}`))
	if r.status != 200 {
		t.Fatalf("eval: %d %s", r.status, r.raw)
	}
	if bytes.Contains(r.raw, []byte(`"30000"`)) || !bytes.Contains(r.raw, []byte(`"timeout_ms":30000`)) {
		t.Fatalf("eval shows timeout_ms as other than the number 30000: %s", r.raw)
	}
	ob := r.body["decision"].(map[string]any)["obligations"].(map[string]any)
	if ob["timeout_ms"] != float64(30000) {
		t.Fatalf("eval decision obligations %#v", ob)
	}

	dev := h.token("acme", "alice", "developer")
	call := h.call(dev, "read-file", `{"arguments":{"path":"docs/guide.md"}}`)
	ev := h.events("acme", "phase=decision&decision_id="+call.str("decision_id"))
	if len(ev) != 1 {
		t.Fatalf("%d decision events", len(ev))
	}
	dec := ev[0]["decision"].(map[string]any)
	if ev[0]["obligations"].(map[string]any)["timeout_ms"] != float64(30000) ||
		dec["obligations"].(map[string]any)["timeout_ms"] != float64(30000) || dec["allow"] != true {
		t.Fatalf("audit event obligations %v decision %v", ev[0]["obligations"], dec)
	}
	raw := h.do("GET", "/v1/audit/events/"+ev[0]["id"].(string), h.token("acme", "aud", "auditor"), nil).raw
	if bytes.Contains(raw, []byte(`"30000"`)) {
		t.Fatalf("the stored event has a string number: %s", raw)
	}
}
