package gateway

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/auth"
	"github.com/toolgate/toolgate/internal/pgtest"
	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/tlog"
)

// These tests run the real gateway binary as separate processes against
// one PostgreSQL database: several replicas, a database outage, and a
// SIGKILL mid-load. Effects (files written by write-file) are reconciled
// against the audit log afterwards: no effect may lack its committed
// decision event.

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

func gatewayBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "toolgate-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "gateway")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/toolgate/toolgate/cmd/gateway").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// cluster is a shared workspace, policy folder and secret for replicas.
type cluster struct {
	t      *testing.T
	dir    string
	dsn    string
	secret []byte
}

func newCluster(t *testing.T, dsn string) *cluster {
	dir := t.TempDir()
	must(t, os.CopyFS(filepath.Join(dir, "policies"), os.DirFS("../../policies")))
	must(t, os.MkdirAll(filepath.Join(dir, "ws", "acme", "notes"), 0o755))
	secret := []byte(strings.Repeat("k", 48))
	must(t, os.WriteFile(filepath.Join(dir, "secret"), secret, 0o600))
	return &cluster{t: t, dir: dir, dsn: dsn, secret: secret}
}

type replica struct {
	cmd  *exec.Cmd
	base string
	done chan struct{}
}

// start runs one gateway process named name (for its log lines) reaching
// PostgreSQL at dsn. Every replica of the cluster reads the same
// configuration file: identical pods, no per-replica value, one shared
// checkpoint key (var/audit-signing.key).
func (c *cluster) start(name, dsn string) *replica {
	c.t.Helper()
	cfg := fmt.Sprintf(`listen: "127.0.0.1:0"
policy: {dir: policies, watch: false}
audit: {driver: postgres, dsn: %q, checkpoint_file: checkpoints.txt}
auth: {jwt: {hs256_secret_file: secret}}
tenants: {acme: {workspace: ws/acme}}
tools: {builtin: [read-file, write-file]}
log: {level: info}
`, dsn)
	file := filepath.Join(c.dir, "gateway.yaml")
	if dsn != c.dsn { // a replica reaching the database another way
		file = filepath.Join(c.dir, name+".yaml")
	}
	must(c.t, os.WriteFile(file, []byte(cfg), 0o644))
	cmd := exec.Command(gatewayBinary(c.t), "serve", "--config", file)
	stderr, err := cmd.StderrPipe()
	must(c.t, err)
	must(c.t, cmd.Start())
	r := &replica{cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`msg="gateway listening" addr=(\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
			if testing.Verbose() {
				fmt.Fprintln(os.Stderr, name+": "+sc.Text())
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	go func() { cmd.Wait(); close(r.done) }()
	c.t.Cleanup(func() { r.kill(syscall.SIGTERM) })
	select {
	case a := <-addr:
		r.base = "http://" + a
	case <-r.done:
		c.t.Fatalf("replica %s exited at start", name)
	case <-time.After(60 * time.Second):
		c.t.Fatalf("replica %s did not start", name)
	}
	return r
}

func (r *replica) kill(sig syscall.Signal) {
	select {
	case <-r.done:
		return
	default:
	}
	r.cmd.Process.Signal(sig)
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		r.cmd.Process.Kill()
		<-r.done
	}
}

func (c *cluster) token(roles ...string) string {
	tok, err := auth.MintHS256(c.secret, auth.MintClaims{Tenant: "acme", Subject: "alice", Roles: roles, TTL: time.Hour}, time.Now())
	must(c.t, err)
	return tok
}

var plainClient = &http.Client{Timeout: 30 * time.Second}

// post returns the status and the outcome of one call.
func post(base, token, tool string, body any) (int, string, error) {
	code, out, err := postCall(base, token, tool, body)
	outcome, _ := out["outcome"].(string)
	return code, outcome, err
}

// postCall returns the status and the whole body of one call.
func postCall(base, token, tool string, body any) (int, map[string]any, error) {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", base+"/v1/tools/"+tool+"/calls", strings.NewReader(string(b)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := plainClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	json.Unmarshal(raw, &out)
	return resp.StatusCode, out, nil
}

func get(base, token, path string) (int, map[string]any) {
	req, _ := http.NewRequest("GET", base+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := plainClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var m map[string]any
	raw, _ := io.ReadAll(resp.Body)
	json.Unmarshal(raw, &m)
	return resp.StatusCode, m
}

// allEvents pages through the tenant's whole log, after a verify (which
// integrates everything committed, on any replica: each can integrate any
// tenant).
func allEvents(t *testing.T, base, token string) []map[string]any {
	t.Helper()
	if code, v := get(base, token, "/v1/audit/verify"); code != 200 || v["ok"] != true {
		t.Fatalf("verify before listing: %d %v", code, v)
	}
	var out []map[string]any
	cursor := ""
	for {
		q := "/v1/audit/events?limit=1000"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		code, page := get(base, token, q)
		if code != 200 {
			t.Fatalf("audit query: %d %v", code, page)
		}
		for _, e := range page["events"].([]any) {
			out = append(out, e.(map[string]any))
		}
		cursor, _ = page["next_cursor"].(string)
		if cursor == "" {
			return out
		}
	}
}

// reconcile checks every written file against the log: each effect has
// its committed allow decision. It returns the decision events by call id.
func (c *cluster) reconcile(t *testing.T, events []map[string]any) map[string]map[string]any {
	t.Helper()
	decisions := map[string]map[string]any{}
	seen := map[string]bool{}
	for _, e := range events {
		id := e["id"].(string)
		if seen[id] {
			t.Fatalf("event %s appears twice", id)
		}
		seen[id] = true
		if e["phase"] == "decision" {
			decisions[e["call_id"].(string)] = e
		}
	}
	files, err := os.ReadDir(filepath.Join(c.dir, "ws", "acme", "notes"))
	must(t, err)
	for _, f := range files {
		callID := strings.TrimSuffix(f.Name(), ".txt")
		d := decisions[callID]
		if d == nil || d["outcome"] != "allow" {
			t.Errorf("effect %s ran without a committed allow decision", f.Name())
		}
	}
	return decisions
}

func writeCall(callID string) map[string]any {
	return map[string]any{"call_id": callID, "arguments": map[string]any{"path": "notes/" + callID + ".txt", "content": callID}}
}

// TestIdenticalReplicasShareOnePostgres starts two, then three, gateway
// processes from one configuration file on one database (the way a
// Kubernetes Deployment starts pods) and drives write calls spread across
// them concurrently: every call is answered 200, every decision recorded
// exactly once, the tenant has one tree with every event integrated once,
// every replica serves the same checkpoint and verify passes everywhere.
func TestIdenticalReplicasShareOnePostgres(t *testing.T) {
	t.Parallel() // its own gateway, workspace and database; mostly waiting
	c := newCluster(t, pgtest.DSN(t))
	tok := c.token("developer", "auditor")
	var replicas []*replica
	calls := 0
	for _, n := range []int{2, 3} {
		for len(replicas) < n {
			replicas = append(replicas, c.start(fmt.Sprintf("replica-%d", len(replicas)+1), c.dsn))
		}
		const workers, perWorker = 16, 25 // 400 calls per round
		var wg sync.WaitGroup
		var mu sync.Mutex
		failures := map[string]int{}
		for w := range workers {
			wg.Go(func() {
				for i := range perWorker {
					r := replicas[(w+i)%len(replicas)]
					code, outcome, err := post(r.base, tok, "write-file", writeCall(fmt.Sprintf("r%d-w%d-%d", n, w, i)))
					if err != nil || code != 200 || outcome != "ok" {
						mu.Lock()
						failures[fmt.Sprintf("%d %s %v", code, outcome, err)]++
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		if len(failures) != 0 {
			t.Fatalf("%d replicas: calls failed: %v", n, failures)
		}
		calls += workers * perWorker

		events := allEvents(t, replicas[0].base, tok)
		if len(events) != 2*calls {
			t.Fatalf("%d replicas: %d events, want %d", n, len(events), 2*calls)
		}
		decisions := c.reconcile(t, events) // each event once, every effect decided
		if len(decisions) != calls {
			t.Fatalf("%d replicas: %d decisions, want %d", n, len(decisions), calls)
		}
		// One tree: log indexes 0..2*calls-1, each once.
		seen := make([]bool, len(events))
		for _, e := range events {
			li, ok := e["log_index"].(float64)
			if !ok || li < 0 || int(li) >= len(seen) || seen[int(li)] {
				t.Fatalf("%d replicas: event %v has log_index %v: not one tree with each event once", n, e["id"], e["log_index"])
			}
			seen[int(li)] = true
		}
		// Every replica verifies the whole log.
		for _, r := range replicas {
			code, v := get(r.base, tok, "/v1/audit/verify")
			if code != 200 || v["ok"] != true || int(v["events_checked"].(float64)) != len(events) || int(v["tree_size"].(float64)) != len(events) {
				t.Fatalf("%d replicas: verify on %s: %d %v", n, r.base, code, v)
			}
		}
		// Checkpoints, whichever replica signed them, agree: the latest
		// covers the whole log, every one opens with the shared key, one
		// size has one note, and each extends the one before.
		latest := c.awaitCheckpoint(len(events))
		c.checkCheckpoints(latest)
	}
}

// awaitCheckpoint waits until the tenant's latest signed checkpoint (what
// GET /v1/audit/checkpoint serves from any replica: the tree row they
// share) covers size events, and returns it.
func (c *cluster) awaitCheckpoint(size int) string {
	c.t.Helper()
	db, err := store.Open(context.Background(), store.Postgres, c.dsn, store.WithoutMigrations(), store.WithMaxConns(1))
	must(c.t, err)
	defer db.Close()
	want := fmt.Sprintf("toolgate/acme\n%d\n", size)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		h, err := db.Audit().Tree(context.Background(), "acme")
		must(c.t, err)
		if strings.HasPrefix(string(h.Checkpoint), want) {
			return string(h.Checkpoint)
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no checkpoint of %d events; latest:\n%s", size, h.Checkpoint)
		}
	}
}

// checkCheckpoints reads every checkpoint the replicas appended to their
// shared audit.checkpoint_file and checks that they agree: each opens with
// the shared key, one size has one note (Ed25519 is deterministic), each
// extends the one before (a consistency proof from the stored tree), and
// the latest stored one is among them.
func (c *cluster) checkCheckpoints(latest string) {
	c.t.Helper()
	key, err := tlog.LoadOrCreateSigner(filepath.Join(c.dir, "var", "audit-signing.key"), tlog.KeyName)
	must(c.t, err)
	raw, err := os.ReadFile(filepath.Join(c.dir, "checkpoints.txt"))
	must(c.t, err)
	notes := splitNotes(string(raw))
	bySize := map[uint64]string{}
	var cps []tlog.Checkpoint
	for _, n := range notes {
		cp, err := key.Verifier().Open([]byte(n), tlog.Origin("acme"))
		if err != nil {
			c.t.Fatalf("checkpoint in the file does not open: %v\n%s", err, n)
		}
		if prev, ok := bySize[cp.Size]; ok {
			if prev != n {
				c.t.Fatalf("two different checkpoints of size %d:\n%s\n%s", cp.Size, prev, n)
			}
			continue
		}
		bySize[cp.Size] = n
		cps = append(cps, cp)
	}
	slices.SortFunc(cps, func(a, b tlog.Checkpoint) int { return cmp.Compare(a.Size, b.Size) })
	db, err := store.Open(context.Background(), store.Postgres, c.dsn, store.WithoutMigrations(), store.WithMaxConns(1))
	must(c.t, err)
	defer db.Close()
	nodes := nodeReader{db.Audit(), "acme"}
	for i := 1; i < len(cps); i++ {
		p, err := tlog.ProveConsistency(context.Background(), nodes, cps[i-1].Size, cps[i].Size)
		must(c.t, err)
		if err := tlog.VerifyConsistency(p, cps[i-1], cps[i]); err != nil {
			c.t.Fatalf("checkpoint of %d does not extend the one of %d: %v", cps[i].Size, cps[i-1].Size, err)
		}
	}
	if len(cps) == 0 || bySize[cps[len(cps)-1].Size] != latest {
		c.t.Fatalf("the latest checkpoint is not the file's last:\n%s", latest)
	}
	c.t.Logf("%d checkpoint lines, %d distinct sizes, all consistent", len(notes), len(cps))
}

// splitNotes splits a checkpoint file into its notes: each is its lines up
// to its signature lines ("— …"), then one empty line.
func splitNotes(file string) []string {
	var out []string
	var cur strings.Builder
	lines := strings.Split(file, "\n")
	for i := 0; i < len(lines); i++ {
		cur.WriteString(lines[i] + "\n")
		if strings.HasPrefix(lines[i], "— ") && i+1 < len(lines) && lines[i+1] == "" {
			if i+2 >= len(lines) || !strings.HasPrefix(lines[i+2], "— ") {
				out = append(out, cur.String())
				cur.Reset()
				i++ // the empty line after the note
			}
		}
	}
	return out
}

// nodeReader reads the tenant's tree nodes from the store.
type nodeReader struct {
	s      audit.Store
	tenant string
}

func (n nodeReader) Nodes(ctx context.Context, ids []tlog.NodeID) ([][]byte, error) {
	return n.s.Nodes(ctx, n.tenant, ids)
}

// proxy is a loopback TCP proxy to PostgreSQL that a test can cut, to
// take the database away from one gateway without touching the server
// other tests share.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]bool
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.down {
				p.mu.Unlock()
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns[c], p.conns[up] = true, true
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close(); c.Close() }()
			go func() { io.Copy(c, up); up.Close(); c.Close() }()
		}
	}()
	return p
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

func (p *proxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// through rewrites dsn to reach the server through the proxy.
func (p *proxy) through(t *testing.T, dsn string) string {
	u, err := url.Parse(dsn)
	must(t, err)
	u.Host = p.ln.Addr().String()
	return u.String()
}

func targetOf(t *testing.T, dsn string) string {
	u, err := url.Parse(dsn)
	must(t, err)
	host := u.Host
	if !strings.Contains(host, ":") {
		host += ":5432"
	}
	return host
}

func waitStatus(t *testing.T, base, path string, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if code, _ := get(base, "", path); code == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered %d", path, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestDatabaseOutageFailsClosedAndRecovers(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	px := newProxy(t, targetOf(t, dsn))
	outage(t, dsn, px.through(t, dsn), px.cut, px.restore)
}

// TestPostgresStoppedMidLoad stops and restarts the PostgreSQL server
// itself. It cannot share the server with tests running in parallel, so
// `go test ./...` skips it and .ci/run runs it on its own afterwards with
// the commands in TOOLGATE_TEST_PG_STOP / TOOLGATE_TEST_PG_START.
func TestPostgresStoppedMidLoad(t *testing.T) {
	stop, start := os.Getenv("TOOLGATE_TEST_PG_STOP"), os.Getenv("TOOLGATE_TEST_PG_START")
	if stop == "" || start == "" {
		t.Skip("set TOOLGATE_TEST_PG_STOP and TOOLGATE_TEST_PG_START to run (.ci/run does, in a step of its own)")
	}
	sh := func(cmd string) func() {
		return func() {
			if out, err := exec.Command("sh", "-c", cmd).CombinedOutput(); err != nil {
				t.Errorf("%s: %v\n%s", cmd, err, out)
			}
		}
	}
	dsn := pgtest.DSN(t)
	outage(t, dsn, dsn, sh(stop), sh(start))
}

// outage drives write calls through one gateway while the database goes
// away (down) and comes back (up), then reconciles effects with the log.
func outage(t *testing.T, dsn, gatewayDSN string, down, up func()) {
	c := newCluster(t, dsn)
	r := c.start("main", gatewayDSN)
	tok := c.token("developer", "auditor")

	var n, ok, refusals atomic.Int64
	var mu sync.Mutex
	refused := map[string]bool{}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				id := fmt.Sprintf("o%d-%d", w, n.Add(1))
				code, outcome, err := post(r.base, tok, "write-file", writeCall(id))
				switch {
				case err != nil:
					t.Errorf("call %s: %v", id, err)
					return
				case code == 503:
					mu.Lock()
					refused[id] = true
					mu.Unlock()
					refusals.Add(1)
				case code != 200 || outcome != "ok":
					t.Errorf("call %s: %d %s", id, code, outcome)
				default:
					ok.Add(1)
				}
			}
		}()
	}
	// Waits for events, asserts nothing about time: calls succeed before
	// the outage, are refused during it, succeed again after it.
	waitFor(t, "calls before the outage", func() bool { return ok.Load() >= 8 })
	down()
	waitStatus(t, r.base, "/readyz", 503)
	during := refusals.Load()
	waitFor(t, "calls refused while the database is away", func() bool { return refusals.Load() >= during+4 })
	up()
	waitStatus(t, r.base, "/readyz", 200)
	after := ok.Load()
	waitFor(t, "calls after the recovery", func() bool { return ok.Load() >= after+8 })
	stop.Store(true)
	wg.Wait()

	if len(refused) == 0 {
		t.Fatal("no call was refused while the database was down")
	}
	for id := range refused {
		if _, err := os.Stat(filepath.Join(c.dir, "ws", "acme", "notes", id+".txt")); err == nil {
			t.Errorf("call %s was refused with 503 but its effect happened", id)
		}
	}
	resp, err := plainClient.Get(r.base + "/metrics")
	must(t, err)
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !regexp.MustCompile(`toolgate_fail_closed_total\{cause="audit"\} [1-9]`).Match(metrics) {
		t.Error("metrics do not show the calls that failed closed")
	}
	// After recovery: calls work (a pooled connection broken by the outage
	// may fail one more call), every effect has its decision, the log verifies.
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, outcome, _ := post(r.base, tok, "write-file", writeCall(fmt.Sprintf("after-recovery-%d", n.Add(1))))
		if code == 200 && outcome == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no successful call after recovery: %d %s", code, outcome)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A refused call retried with its call_id runs now: failing closed kept
	// no idempotency key (released at once, or, when the database was
	// away, as soon as it was back), so the retry is not left waiting.
	retried := 0
	for id := range refused {
		if retried == 5 {
			break
		}
		retried++
		deadline := time.Now().Add(20 * time.Second)
		for {
			code, outcome, err := post(r.base, tok, "write-file", writeCall(id))
			if err == nil && code == 200 && outcome == "ok" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("refused call %s retried after recovery: %d %s %v", id, code, outcome, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	c.reconcile(t, allEvents(t, r.base, tok))
	if code, v := get(r.base, tok, "/v1/audit/verify"); code != 200 || v["ok"] != true {
		t.Fatalf("verify after the outage: %d %v", code, v)
	}
}

func TestSIGKILLMidLoadNeverLosesADecision(t *testing.T) {
	t.Parallel()
	c := newCluster(t, pgtest.DSN(t))
	r := c.start("main", c.dsn)
	tok := c.token("developer", "auditor")
	var n, answered atomic.Int64
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, _, err := post(r.base, tok, "write-file", writeCall(fmt.Sprintf("k%d-%d", w, n.Add(1)))); err != nil {
					return // the process is gone
				}
				answered.Add(1)
			}
		}()
	}
	// Killed mid-load: once calls have been answered, with more in flight.
	waitFor(t, "calls answered before the kill", func() bool { return answered.Load() >= 8 })
	r.kill(syscall.SIGKILL)
	cancel()
	wg.Wait()
	if n.Load() < 8 {
		t.Fatalf("only %d calls before the kill", n.Load())
	}
	// A new process on the same chain continues it; the log must account
	// for every effect the killed one caused.
	r2 := c.start("main", c.dsn)
	events := allEvents(t, r2.base, tok)
	c.reconcile(t, events)
	if code, v := get(r2.base, tok, "/v1/audit/verify"); code != 200 || v["ok"] != true {
		t.Fatalf("verify after SIGKILL: %d %v", code, v)
	}
	if code, outcome, _ := post(r2.base, tok, "write-file", writeCall("after-restart")); code != 200 || outcome != "ok" {
		t.Fatalf("after restart: %d %s", code, outcome)
	}
}
