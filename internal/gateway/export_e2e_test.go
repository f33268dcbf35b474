package gateway

import (
	"bufio"
	"bytes"
	"cmp"
	stdjson "encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/open-policy-agent/opa/v1/plugins/logs"

	"github.com/toolgate/toolgate/internal/audit"
)

// interruptedLine is how an export that failed after its first byte ends.
const interruptedLine = `{"error":{"code":"unavailable","message":"export interrupted"}}`

// export runs GET /v1/audit/export (checked against the OpenAPI document
// line by line by h.do) and returns its lines.
func (h *harness) export(token, query string) (response, [][]byte) {
	h.t.Helper()
	r := h.do("GET", "/v1/audit/export?"+query, token, nil)
	if r.status != 200 {
		return r, nil
	}
	if ct := r.header.Get("Content-Type"); ct != "application/x-ndjson" {
		h.t.Fatalf("export content type %q", ct)
	}
	if len(r.raw) == 0 {
		return r, nil
	}
	return r, bytes.Split(bytes.TrimSuffix(r.raw, []byte("\n")), []byte("\n"))
}

// exportAs exports as an auditor of tenant and fails on anything but 200.
func (h *harness) exportAs(tenant, query string) [][]byte {
	h.t.Helper()
	r, lines := h.export(h.token(tenant, "auditor-1", "auditor"), query)
	if r.status != 200 {
		h.t.Fatalf("export %q: %d %s", query, r.status, r.raw)
	}
	return lines
}

// allEvents pages through GET /v1/audit/events, newest first.
func (h *harness) allEvents(tenant, query string) []map[string]any {
	h.t.Helper()
	tok := h.token(tenant, "auditor-1", "auditor")
	var out []map[string]any
	cursor := ""
	for {
		q := "limit=1000&" + query
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		r := h.do("GET", "/v1/audit/events?"+q, tok, nil)
		if r.status != 200 {
			h.t.Fatalf("audit query: %d %s", r.status, r.raw)
		}
		for _, e := range r.body["events"].([]any) {
			out = append(out, e.(map[string]any))
		}
		if cursor = r.str("next_cursor"); cursor == "" {
			return out
		}
	}
}

func decodeLine(t *testing.T, line []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("line is not a JSON object: %v: %s", err, line)
	}
	return m
}

func canonicalJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	c := jsontext.Value(b)
	if err := c.Canonicalize(); err != nil {
		t.Fatal(err)
	}
	return string(c)
}

func lineIDs(t *testing.T, lines [][]byte, key string) []string {
	t.Helper()
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i], _ = decodeLine(t, l)[key].(string)
	}
	return out
}

func eventIDs(evs []map[string]any) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i], _ = e["id"].(string)
	}
	return out
}

func reversed[T any](s []T) []T {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// appendEvents commits n synthetic decision events of tenant straight to
// the gateway's audit log, concurrently (group commit), at the times at(i),
// each input padded with pad bytes. It returns their ids by i.
func (h *harness) appendEvents(tenant string, n int, at func(i int) time.Time, pad int) []string {
	h.t.Helper()
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	const workers = 16
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				ev := &audit.Event{
					Tenant: tenant, Principal: "loader", CallID: fmt.Sprintf("load-%d", i),
					DecisionID: fmt.Sprintf("load-dec-%d", i), Tool: "read-file", Action: "fs.read",
					Phase: audit.PhaseDecision, Outcome: "allow", Reasons: []string{"seeded"},
					PolicyRevision: "sha256:" + strings.Repeat("0", 64),
					Input:          map[string]any{"args": map[string]any{"path": fmt.Sprintf("docs/%d.md", i), "pad": strings.Repeat("x", pad)}},
					DurationsUS:    map[string]int64{"decide": int64(i)},
				}
				if at != nil {
					ev.Time = audit.FormatTime(at(i))
				}
				if err := h.g.audit.Append(h.t.Context(), ev); err != nil {
					errs <- err
					return
				}
				ids[i] = ev.ID
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		h.t.Fatalf("append: %v", err)
	}
	return ids
}

func TestExportStreamsEveryEventOldestFirstVerifiably(t *testing.T) {
	t.Parallel()
	h := start(t)
	dev := h.token("acme", "alice", "developer")
	const secret = "export-secret-7f3a9c"
	for _, c := range []struct{ token, tool, body, outcome string }{
		{dev, "read-file", `{"arguments":{"path":"docs/guide.md"},"session_id":"s-1"}`, "ok"},
		{dev, "read-file", `{"arguments":{"path":"secrets/db.env"}}`, "denied"},
		{dev, "read-file", `{"arguments":{"path":"../globex/docs/guide.md"}}`, "invalid_arguments"},
		{dev, "write-file", `{"arguments":{"path":"notes/export.txt","content":"` + secret + `"}}`, "ok"},
		{h.token("acme", "vera", "viewer"), "write-file", `{"arguments":{"path":"notes/v.txt","content":"` + secret + `"}}`, "unavailable"},
		{dev, "no-such-tool", `{"arguments":{}}`, "unavailable"},
		{dev, "write-file", `{"arguments":{"path":"release/VERSION","content":"` + secret + `"}}`, "approval_required"},
	} {
		if r := h.call(c.token, c.tool, c.body); r.str("outcome") != c.outcome {
			t.Fatalf("%s %s: %s, want %s", c.tool, c.body, r.raw, c.outcome)
		}
	}
	events := h.allEvents("acme", "")
	oldestFirst := reversed(events)

	t.Run("ndjson", func(t *testing.T) {
		lines := h.exportAs("acme", "")
		if explicit := h.exportAs("acme", "format=ndjson"); !slices.EqualFunc(lines, explicit, bytes.Equal) {
			t.Fatal("format=ndjson differs from the default format")
		}
		if got, want := lineIDs(t, lines, "id"), eventIDs(oldestFirst); !slices.Equal(got, want) {
			t.Fatalf("exported ids %v,\nwant /v1/audit/events reversed %v", got, want)
		}
		if n := h.verify("acme"); n != len(lines) {
			t.Fatalf("exported %d events, verify checked %d", len(lines), n)
		}
		for i, line := range lines {
			m := decodeLine(t, line)
			// Exactly what /v1/audit/events returns for the event.
			if got, want := canonicalJSON(t, m), canonicalJSON(t, oldestFirst[i]); got != want {
				t.Fatalf("line %d differs from the queried event:\n%s\n%s", i, got, want)
			}
			// Each line verifies offline: its hash is the hash of its own
			// canonical form (log_index left out), and it carries its
			// place in the tenant's tree (calls made one after another:
			// log order is time order).
			hash, err := audit.ComputeHash(line)
			if err != nil || hash != m["hash"] {
				t.Fatalf("line %d: recomputed hash %q (%v), line says %v", i, hash, err, m["hash"])
			}
			if m["log_index"] != float64(i) || m["prev_hash"] != "" || m["seq"] != float64(0) {
				t.Fatalf("line %d: log_index %v prev_hash %v seq %v, want %d, no chain link", i, m["log_index"], m["prev_hash"], m["seq"], i)
			}
		}
		if bytes.Contains(bytes.Join(lines, nil), []byte(secret)) {
			t.Fatal("masked write-file content appears in the ndjson export")
		}
	})

	t.Run("opa", func(t *testing.T) {
		lines := h.exportAs("acme", "format=opa")
		// The decisions policy evaluated: an invalid_arguments event
		// (its arguments never reached policy) is not OPA's to log.
		var decisions []map[string]any
		invalid := 0
		for _, e := range oldestFirst {
			switch {
			case e["phase"] != audit.PhaseDecision:
			case e["outcome"] == "invalid_arguments":
				invalid++
			default:
				decisions = append(decisions, e)
			}
		}
		if len(lines) != len(decisions) || len(decisions) != 6 || invalid != 1 {
			t.Fatalf("opa export has %d lines for %d evaluated decision events (want 6, and 1 invalid_arguments left out, not %d)", len(lines), len(decisions), invalid)
		}
		if bytes.Contains(bytes.Join(lines, nil), []byte(secret)) {
			t.Fatal("masked write-file content appears in the opa export")
		}
		for i, line := range lines {
			// OPA's own decision-log type reads the line.
			var ev logs.EventV1
			if err := stdjson.Unmarshal(line, &ev); err != nil {
				t.Fatalf("line %d is not an OPA EventV1: %v: %s", i, err, line)
			}
			d := decisions[i]
			wantPath := "toolgate/authz/decision"
			if d["outcome"] == "unavailable" {
				wantPath = "toolgate/availability/allow"
			}
			evTime, _ := time.Parse(time.RFC3339Nano, d["time"].(string))
			if ev.DecisionID != d["decision_id"] || ev.Path != wantPath || !ev.Timestamp.Equal(evTime) ||
				ev.Bundles["toolgate"].Revision != d["policy_revision"] || ev.Labels["tenant"] != "acme" ||
				ev.Labels["id"] != d["chain"] || ev.Labels["version"] != "toolgate" ||
				len(ev.Erased) != 0 || ev.RequestID != 0 || ev.TraceID != "" || ev.NDBuiltinCache != nil {
				t.Fatalf("line %d does not carry decision %v:\n%s", i, d, line)
			}
			if canonicalJSON(t, ev.Input) != canonicalJSON(t, d["input"]) {
				t.Fatalf("line %d input differs from the audited input", i)
			}
			// The result is the policy's, exactly as the audit event
			// recorded it; absent where no policy ran.
			switch dec, has := d["decision"]; {
			case !has && ev.Result != nil:
				t.Fatalf("line %d has a result %v, but no policy ran (%v)", i, *ev.Result, d["outcome"])
			case has && (ev.Result == nil || canonicalJSON(t, *ev.Result) != canonicalJSON(t, dec)):
				t.Fatalf("line %d result differs from the audited decision %v", i, dec)
			}
			if wantDecision := d["outcome"] != "invalid_arguments" && d["tool"] != "no-such-tool"; wantDecision != (d["decision"] != nil) {
				t.Fatalf("event %v: decision recorded %v, want %v", d["id"], d["decision"] != nil, wantDecision)
			}
			if _, ok := ev.Metrics["timer_server_handler_ns"]; !ok {
				t.Fatalf("line %d metrics %v lack timer_server_handler_ns", i, ev.Metrics)
			}
			m := decodeLine(t, line)
			if custom := m["custom"].(map[string]any); custom["event_id"] != d["id"] || custom["hash"] != d["hash"] || custom["outcome"] != d["outcome"] {
				t.Fatalf("line %d custom %v does not name event %v", i, custom, d["id"])
			}
			wantMasked := []string{}
			if d["tool"] == "write-file" && d["outcome"] != "unavailable" {
				wantMasked = []string{"/input/args/content"}
				if d["input"].(map[string]any)["args"].(map[string]any)["content"] != audit.MaskedValue {
					t.Fatalf("write-file content is not masked in the audit log: %v", d["input"])
				}
			}
			if !slices.Equal(ev.Masked, wantMasked) && !(len(ev.Masked) == 0 && len(wantMasked) == 0) {
				t.Fatalf("line %d masked %v, want %v", i, ev.Masked, wantMasked)
			}
		}
	})
}

func TestExportFromAndToAreInclusive(t *testing.T) {
	t.Parallel()
	h := start(t)
	t0 := time.Date(2025, 6, 1, 8, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	ids := h.appendEvents("acme", 10, at, 0)
	// A live call after them, now.
	if r := h.call(h.token("acme", "alice", "developer"), "read-file", `{"arguments":{"path":"docs/guide.md"}}`); r.str("outcome") != "ok" {
		t.Fatalf("call: %s", r.raw)
	}
	ts := func(i int) string { return at(i).Format(time.RFC3339Nano) }
	for _, tc := range []struct {
		name, query string
		want        []string
	}{
		{"both bounds", "from=" + ts(2) + "&to=" + ts(5), ids[2:6]},
		{"sub-second bounds", "from=" + at(2).Add(-time.Microsecond).Format(time.RFC3339Nano) + "&to=" + at(5).Add(999*time.Microsecond).Format(time.RFC3339Nano), ids[2:6]},
		{"one instant", "from=" + ts(7) + "&to=" + ts(7), ids[7:8]},
		{"to only", "to=" + ts(3), ids[:4]},
		{"from only, past the seeded range", "from=" + ts(9), nil}, // plus the live events, checked below
		{"nothing", "from=2000-01-01T00:00:00Z&to=2000-01-02T00:00:00Z", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := lineIDs(t, h.exportAs("acme", tc.query), "id")
			want := eventIDs(reversed(h.allEvents("acme", tc.query)))
			if !slices.Equal(got, want) {
				t.Fatalf("export %v, /v1/audit/events reversed %v", got, want)
			}
			if tc.want != nil && !slices.Equal(got, tc.want) {
				t.Fatalf("export %v, want %v", got, tc.want)
			}
			if tc.name == "from only, past the seeded range" && (len(got) != 3 || got[0] != ids[9]) {
				t.Fatalf("from only: %v, want the last seeded event and the live call's two", got)
			}
			opa := lineIDs(t, h.exportAs("acme", "format=opa&"+tc.query), "decision_id")
			var wantOPA []string
			for _, e := range reversed(h.allEvents("acme", tc.query+"&phase=decision")) {
				wantOPA = append(wantOPA, e["decision_id"].(string))
			}
			if !slices.Equal(opa, wantOPA) && !(len(opa) == 0 && len(wantOPA) == 0) {
				t.Fatalf("opa export %v, want %v", opa, wantOPA)
			}
		})
	}
}

func TestExportIsScopedToTheCallersTenant(t *testing.T) {
	t.Parallel()
	h := start(t)
	a := h.token("acme", "alice", "developer")
	b := h.token("globex", "bob", "developer")
	for range 3 {
		h.call(a, "read-file", `{"arguments":{"path":"docs/guide.md"}}`)
	}
	h.call(b, "read-file", `{"arguments":{"path":"docs/guide.md"}}`)
	h.call(b, "write-file", `{"arguments":{"path":"notes/x","content":"globex"}}`)

	acme := lineIDs(t, h.exportAs("acme", ""), "id")
	for _, format := range []string{"ndjson", "opa"} {
		lines := h.exportAs("globex", "format="+format)
		for i, line := range lines {
			m := decodeLine(t, line)
			tenant := m["tenant"]
			if format == "opa" {
				tenant = m["labels"].(map[string]any)["tenant"]
				m["id"] = m["custom"].(map[string]any)["event_id"]
			}
			if tenant != "globex" || slices.Contains(acme, m["id"].(string)) {
				t.Fatalf("%s line %d of globex's export is not globex's: %s", format, i, line)
			}
		}
		if format == "ndjson" && len(lines) != h.verify("globex") {
			t.Fatalf("globex export has %d events, its chain %d", len(lines), h.verify("globex"))
		}
	}
	if len(acme) != h.verify("acme") {
		t.Fatalf("acme export has %d events, its chain %d", len(acme), h.verify("acme"))
	}
}

func TestExportNeedsTheAuditorRoleAndValidParameters(t *testing.T) {
	t.Parallel()
	h := start(t)
	for name, tok := range map[string]string{
		"developer":    h.token("acme", "alice", "developer"),
		"policy-admin": h.token("acme", "pat", "policy-admin"),
	} {
		if r := h.do("GET", "/v1/audit/export", tok, nil); r.status != 403 || r.errCode() != "forbidden" {
			t.Errorf("%s: %d %s", name, r.status, r.raw)
		}
	}
	if r := h.do("GET", "/v1/audit/export", "", nil); r.status != 401 || r.errCode() != "unauthenticated" {
		t.Errorf("no token: %d %s", r.status, r.raw)
	}
	aud := h.token("acme", "ann", "auditor")
	// A tenant with no events exports an empty body.
	for _, q := range []string{"", "format=opa"} {
		if r := h.do("GET", "/v1/audit/export?"+q, aud, nil); r.status != 200 || len(r.raw) != 0 || r.header.Get("Content-Type") != "application/x-ndjson" {
			t.Fatalf("empty export %q: %d %q", q, r.status, r.raw)
		}
	}
	for _, q := range []string{
		"format=xml", "format=", "format=NDJSON", "format=ndjson&format=opa", "bogus=1", "limit=10", "cursor=x",
		"phase=decision", "from=yesterday", "to=2026-13-01T00:00:00Z", "from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z",
	} {
		r := h.do("GET", "/v1/audit/export?"+q, aud, nil)
		if q == "format=" { // an empty format is the default
			if r.status != 200 {
				t.Errorf("%q: %d %s", q, r.status, r.raw)
			}
			continue
		}
		if r.status != 400 || r.errCode() != "invalid_request" {
			t.Errorf("%q: %d %s", q, r.status, r.raw)
		}
	}
}

func TestExportStreamsThousandsOfEvents(t *testing.T) {
	t.Parallel()
	h := start(t)
	crowded := time.Date(2025, 7, 1, 0, 0, 0, 0, time.UTC)
	const n = 3000
	// 1,200 events share one millisecond (more than a page); the rest are
	// one millisecond apart after it.
	h.appendEvents("acme", n, func(i int) time.Time {
		if i < 1200 {
			return crowded
		}
		return crowded.Add(time.Duration(i-1199) * time.Millisecond)
	}, 64)
	lines := h.exportAs("acme", "")
	if len(lines) != n {
		t.Fatalf("exported %d events, want %d", len(lines), n)
	}
	type pos struct{ time, id string }
	var prev pos
	for i, line := range lines {
		m := decodeLine(t, line)
		p := pos{m["time"].(string), m["id"].(string)}
		if i > 0 && cmp.Or(cmp.Compare(p.time, prev.time), cmp.Compare(p.id, prev.id)) <= 0 {
			t.Fatalf("line %d %v is not after %v", i, p, prev)
		}
		if hash, err := audit.ComputeHash(line); err != nil || hash != m["hash"] {
			t.Fatalf("line %d does not verify", i)
		}
		prev = p
	}
	if got, want := lineIDs(t, lines, "id"), eventIDs(reversed(h.allEvents("acme", ""))); !slices.Equal(got, want) {
		t.Fatal("export differs from /v1/audit/events reversed")
	}
	if opa := h.exportAs("acme", "format=opa"); len(opa) != n {
		t.Fatalf("opa export has %d lines, want %d", len(opa), n)
	}
}

// A small receive buffer on the client keeps the server from writing far
// ahead of what the test reads, so the export provably streams: the first
// line arrives while most of the log is still unread on the server.
func smallBufferClient() *http.Client {
	d := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10)
		})
		return cmp.Or(err, serr)
	}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: 2 * time.Minute}
}

func TestExportInterruptedMidStreamEndsWithAnErrorLine(t *testing.T) {
	t.Parallel()
	h := start(t)
	// About 17 MB of events: several times what the socket buffers and one
	// server-side batch can hold, so the server is still querying when the
	// store goes away.
	const n = 4000
	h.appendEvents("acme", n, nil, 4096)

	req, err := http.NewRequest("GET", h.base+"/v1/audit/export", nil)
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+h.token("acme", "ann", "auditor"))
	resp, err := smallBufferClient().Do(req)
	must(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("export: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	br := bufio.NewReaderSize(resp.Body, 1<<20)
	first, err := br.ReadBytes('\n')
	must(t, err)
	if hash, err := audit.ComputeHash(first); err != nil || hash != decodeLine(t, first)["hash"] {
		t.Fatalf("first line is not a verifiable event: %.200s", first)
	}

	h.g.db.Close() // the database goes away mid-export
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("the interrupted stream did not end cleanly: %v", err)
	}
	body := append(first, rest...)
	h.mu.Lock()
	err = h.spec.Check("GET", "/v1/audit/export", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	h.mu.Unlock()
	if err != nil {
		t.Fatalf("OpenAPI conformance: %v", err)
	}
	lines := bytes.Split(bytes.TrimSuffix(body, []byte("\n")), []byte("\n"))
	if last := string(lines[len(lines)-1]); last != interruptedLine {
		t.Fatalf("last line %.200q, want %s", last, interruptedLine)
	}
	events := lines[:len(lines)-1]
	if len(events) == 0 || len(events) >= n {
		t.Fatalf("%d events before the error line, want some but not all %d", len(events), n)
	}
	t.Logf("%d of %d events before the store went away", len(events), n)
	seen := map[string]bool{}
	for i, line := range events {
		m := decodeLine(t, line)
		if id := m["id"].(string); m["tenant"] != "acme" || seen[id] {
			t.Fatalf("line %d: tenant %v, id %s repeated: %v", i, m["tenant"], id, seen[id])
		}
		seen[m["id"].(string)] = true
	}
}
