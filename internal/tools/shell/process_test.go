package shell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/command"
	"github.com/toolgate/toolgate/internal/tools"
)

// startBackground runs bash with background:true and returns the id.
func startBackground(t testing.TB, sh *Shell, env *tools.Env, command string) string {
	t.Helper()
	res := runBash(t, sh, env, map[string]any{"command": command, "background": true})
	id, _ := res.Data["process_id"].(string)
	if !strings.HasPrefix(id, "proc_") || res.Content != "started process "+id {
		t.Fatalf("background start: %q %v", res.Content, res.Data)
	}
	return id
}

// callProcess prepares and runs a process tool; a Prepare error fails
// the test.
func callProcess(t testing.TB, tool tools.Tool, env *tools.Env, args map[string]any) (tools.Result, error) {
	t.Helper()
	plan := mustPrepare(t, tool, env, args)
	lim := tool.Spec().Limits
	ctx, cancel := context.WithTimeout(context.Background(), lim.Timeout)
	defer cancel()
	return tool.Run(ctx, env, plan.Artifact, lim)
}

// output is a decoded process-output result.
type output struct {
	ProcessID    string `json:"process_id"`
	Status       string `json:"status"`
	ExitCode     *int   `json:"exit_code"`
	Output       string `json:"output"`
	NextCursor   int64  `json:"next_cursor"`
	DroppedBytes int64  `json:"dropped_bytes"`
}

func readOutput(t testing.TB, sh *Shell, env *tools.Env, id string, cursor int64, waitMS int) output {
	t.Helper()
	res, err := callProcess(t, sh.Tools()[1], env, map[string]any{
		"process_id": id, "cursor": float64(cursor), "wait_ms": float64(waitMS)})
	if err != nil {
		t.Fatal(err)
	}
	var o output
	if err := json.Unmarshal([]byte(res.Content), &o); err != nil {
		t.Fatalf("content is not JSON: %q", res.Content)
	}
	if res.Data["process_id"] != id || res.Data["next_cursor"] != float64(o.NextCursor) {
		t.Errorf("data %v does not mirror content", res.Data)
	}
	return o
}

// readUntil polls output from cursor until it contains want or the
// process ends; it returns all text read and the final cursor.
func readUntil(t testing.TB, sh *Shell, env *tools.Env, id string, cursor int64, want string) (string, int64, output) {
	t.Helper()
	var text strings.Builder
	deadline := time.Now().Add(20 * time.Second)
	for {
		o := readOutput(t, sh, env, id, cursor, 2000)
		text.WriteString(o.Output)
		cursor = o.NextCursor
		if strings.Contains(text.String(), want) || o.Status != StateRunning || time.Now().After(deadline) {
			return text.String(), cursor, o
		}
	}
}

func TestBackgroundProcessTakesInputAndStops(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, _ := testEnv(t, "acme", "s-1")
	id := startBackground(t, sh, env, `sh -c 'trap "" TERM; while read l; do echo got $l; done; echo eof'`)

	in, err := callProcess(t, sh.Tools()[2], env, map[string]any{"process_id": id, "input": "one\ntwo\n"})
	if err != nil {
		t.Fatal(err)
	}
	if in.Content != fmt.Sprintf(`{"process_id":%q,"bytes_written":8,"status":"running"}`, id) {
		t.Errorf("input result = %q", in.Content)
	}
	text, cursor, _ := readUntil(t, sh, env, id, 0, "got two\n")
	if text != "got one\ngot two\n" || cursor != int64(len(text)) {
		t.Fatalf("output %q cursor %d", text, cursor)
	}
	// Reading from the start again gives the same bytes: cursors are absolute.
	if o := readOutput(t, sh, env, id, 0, 0); o.Output != text {
		t.Errorf("re-read = %q", o.Output)
	}

	// The program ignores SIGTERM: stop must escalate to SIGKILL.
	stop, err := callProcess(t, sh.Tools()[3], env, map[string]any{"process_id": id, "grace_ms": float64(200)})
	if err != nil {
		t.Fatal(err)
	}
	if stop.Content != fmt.Sprintf(`{"process_id":%q,"status":"killed","exit_code":137}`, id) {
		t.Errorf("stop = %q", stop.Content)
	}
	if _, err := callProcess(t, sh.Tools()[2], env, map[string]any{"process_id": id, "input": "x\n"}); !isModelError(err, CodeProcessExited) {
		t.Errorf("input after exit: %v", err)
	}
	// Stopping again reports the same final state.
	again, err := callProcess(t, sh.Tools()[3], env, map[string]any{"process_id": id})
	if err != nil || again.Content != stop.Content {
		t.Errorf("second stop = %q, %v", again.Content, err)
	}
}

func TestStopEndsAProgramThatHonoursSIGTERM(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, _ := testEnv(t, "acme", "s-1")
	marker := fmt.Sprintf("40.%06d", rand.IntN(1000000))
	id := startBackground(t, sh, env, fmt.Sprintf("sh -c 'sleep %s & sleep %s'", marker, marker))
	stop, err := callProcess(t, sh.Tools()[3], env, map[string]any{"process_id": id, "grace_ms": float64(5000)})
	if err != nil {
		t.Fatal(err)
	}
	if stop.Content != fmt.Sprintf(`{"process_id":%q,"status":"killed","exit_code":143}`, id) {
		t.Errorf("stop = %q", stop.Content)
	}
	assertNoStrays(t, marker)
}

func TestCloseStdinEndsInputAndProcessExits(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, _ := testEnv(t, "acme", "s-1")
	id := startBackground(t, sh, env, "wc -l")
	if _, err := callProcess(t, sh.Tools()[2], env, map[string]any{"process_id": id, "input": "a\nb\nc\n", "close_stdin": true}); err != nil {
		t.Fatal(err)
	}
	text, _, o := readUntil(t, sh, env, id, 0, "\x00never")
	if strings.TrimSpace(text) != "3" || o.Status != StateExited || o.ExitCode == nil || *o.ExitCode != 0 {
		t.Errorf("output %q, final %+v", text, o)
	}
}

func TestStdinClosedIsAStableError(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, _ := testEnv(t, "acme", "s-1")
	id := startBackground(t, sh, env, "sleep 30")
	if _, err := callProcess(t, sh.Tools()[2], env, map[string]any{"process_id": id, "close_stdin": true}); err != nil {
		t.Fatal(err)
	}
	if _, err := callProcess(t, sh.Tools()[2], env, map[string]any{"process_id": id, "input": "x"}); !isModelError(err, CodeStdinClosed) {
		t.Errorf("err = %v", err)
	}
}

func TestInputLargerThanTheLimitIsRejectedAtPrepare(t *testing.T) {
	sh := newTestShell(t, Options{Limits: Limits{MaxInputBytes: 8}})
	env, _ := testEnv(t, "acme", "s-1")
	id := startBackground(t, sh, env, "sleep 30")
	_, err := sh.Tools()[2].Prepare(t.Context(), env, map[string]any{"process_id": id, "input": "123456789"})
	argErr(t, err, "/input", CodeInputTooLarge)
}

func TestOutputCursorBeforeTheRetainedWindowReportsDroppedBytes(t *testing.T) {
	sh := newTestShell(t, Options{Limits: Limits{RetainedOutput: 1000}})
	env, _ := testEnv(t, "acme", "s-1")
	// 5000 bytes: "0123456789" × 500.
	id := startBackground(t, sh, env, `sh -c 'i=0; while [ $i -lt 500 ]; do printf 0123456789; i=$((i+1)); done'`)
	_, _, o := readUntil(t, sh, env, id, 5000, "\x00never")
	if o.Status != StateExited {
		t.Fatalf("not exited: %+v", o)
	}
	got := readOutput(t, sh, env, id, 100, 0)
	if got.DroppedBytes != 3900 || got.NextCursor != 5000 || len(got.Output) != 1000 || got.Output[:10] != "0123456789" {
		t.Errorf("dropped=%d next=%d len=%d", got.DroppedBytes, got.NextCursor, len(got.Output))
	}
	// max_bytes pages through the window.
	res, err := callProcess(t, sh.Tools()[1], env, map[string]any{"process_id": id, "cursor": float64(4500), "max_bytes": float64(10)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Data["output"] != "0123456789" || res.Data["next_cursor"] != float64(4510) || res.Data["exit_code"] != float64(0) {
		t.Errorf("page = %v", res.Data)
	}
}

func TestOutputWaitReturnsWhenOutputArrives(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, _ := testEnv(t, "acme", "s-1")
	id := startBackground(t, sh, env, "sleep 0.2; echo late; sleep 30")
	text, _, o := readUntil(t, sh, env, id, 0, "late\n")
	if text != "late\n" || o.Status != StateRunning || o.ExitCode != nil {
		t.Errorf("text %q state %+v", text, o)
	}
}

func TestProcessQuotaPerSessionAndTenant(t *testing.T) {
	sh := newTestShell(t, Options{Limits: Limits{SessionProcesses: 2, TenantProcesses: 3}})
	env, _ := testEnv(t, "acme", "s-1")
	other := otherEnv(env, "acme", "s-2")
	startBackground(t, sh, env, "sleep 30")
	first := startBackground(t, sh, env, "sleep 30")
	tool := bashTool(sh)
	try := func(e *tools.Env) error {
		plan := mustPrepare(t, tool, e, map[string]any{"command": "sleep 30", "background": true})
		_, err := tool.Run(context.Background(), e, plan.Artifact, tool.Spec().Limits)
		return err
	}
	if err := try(env); !isModelError(err, CodeQuotaExceeded) {
		t.Errorf("3rd in session: %v", err)
	}
	startBackground(t, sh, other, "sleep 30")
	if err := try(other); !isModelError(err, CodeQuotaExceeded) {
		t.Errorf("4th in tenant: %v", err)
	}
	if _, err := callProcess(t, sh.Tools()[3], env, map[string]any{"process_id": first, "grace_ms": float64(0)}); err != nil {
		t.Fatal(err)
	}
	startBackground(t, sh, env, "sleep 30") // a slot is free again
	startBackground(t, sh, otherEnv(env, "globex", "s-1"), "sleep 30")
}

func TestDefaultQuotaRefusesTheFifthProcessOfASession(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, _ := testEnv(t, "acme", "s-1")
	for range 4 {
		startBackground(t, sh, env, "sleep 30")
	}
	tool := bashTool(sh)
	plan := mustPrepare(t, tool, env, map[string]any{"command": "sleep 30", "background": true})
	_, err := tool.Run(context.Background(), env, plan.Artifact, tool.Spec().Limits)
	if !isModelError(err, CodeQuotaExceeded) || err.Error() != "quota_exceeded: too many running processes" {
		t.Errorf("err = %v", err)
	}
}

func TestForeignProcessIDsLookExactlyLikeMissingOnes(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, _ := testEnv(t, "acme", "s-1")
	id := startBackground(t, sh, env, "sleep 30")
	cases := map[string]struct {
		env *tools.Env
		id  string
	}{
		"missing":       {env, "proc_aaaaaaaaaaaaaaaa"},
		"other session": {otherEnv(env, "acme", "s-2"), id},
		"other tenant":  {otherEnv(env, "globex", "s-1"), id},
	}
	for _, tool := range sh.Tools()[1:] {
		var first error
		for name, c := range cases {
			_, err := tool.Prepare(t.Context(), c.env, map[string]any{"process_id": c.id})
			argErr(t, err, "/process_id", "not_found: no such process")
			if first == nil {
				first = err
			} else if !reflect.DeepEqual(err, first) {
				t.Errorf("%s/%s: %#v differs from %#v", tool.Spec().Name, name, err, first)
			}
		}
		_, err := tool.Prepare(t.Context(), otherEnv(env, "acme", ""), map[string]any{"process_id": id})
		argErr(t, err, "", "requires a session_id")
	}
}

func TestProcessResourceCarriesTheOriginalCommand(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, _ := testEnv(t, "acme", "s-1")
	env.Principal = "alice"
	id := startBackground(t, sh, env, "sleep 30 && echo done")
	for _, tool := range sh.Tools()[1:] {
		plan := mustPrepare(t, tool, env, map[string]any{"process_id": id})
		want := []tools.Resource{{"type": "process", "id": id, "owner": "alice", "command": "sleep 30 && echo done",
			"segments": []any{[]any{"sleep", "30"}, []any{"echo", "done"}}}}
		if !reflect.DeepEqual(plan.Resources, want) {
			t.Errorf("%s: resources = %#v", tool.Spec().Name, plan.Resources)
		}
	}
}

// Another principal of the session reaches policy with the process's
// owner, not the caller, in the resource: the tool does not judge, policy
// does. What a concealed denial answers is exactly the missing-id error.
func TestProcessResourceNamesTheOwnerNotTheCaller(t *testing.T) {
	sh := newTestShell(t, Options{})
	alice, _ := testEnv(t, "acme", "s-1")
	alice.Principal = "alice"
	id := startBackground(t, sh, alice, "sleep 30")
	bob := otherEnv(alice, "acme", "s-1")
	bob.Principal = "bob"
	_, missing := sh.Tools()[1].Prepare(t.Context(), bob, map[string]any{"process_id": "proc_aaaaaaaaaaaaaaaa"})
	for _, tool := range sh.Tools()[1:] {
		plan := mustPrepare(t, tool, bob, map[string]any{"process_id": id})
		if len(plan.Resources) != 1 || plan.Resources[0]["owner"] != "alice" {
			t.Errorf("%s: resources = %#v, want the owner alice", tool.Spec().Name, plan.Resources)
		}
		c, ok := tool.(tools.Concealer)
		if !ok {
			t.Fatalf("%s is not a tools.Concealer", tool.Spec().Name)
		}
		if got := c.Concealed(); !reflect.DeepEqual(error(got), missing) {
			t.Errorf("%s: Concealed() = %#v, want the missing-id error %#v", tool.Spec().Name, got, missing)
		}
	}
}

// Argument errors come before the lookup: an error only an existing
// process could give would tell it from a missing one before policy (and
// its conceal) could decide.
func TestProcessArgumentErrorsDoNotDependOnTheProcess(t *testing.T) {
	sh := newTestShell(t, Options{Limits: Limits{MaxInputBytes: 8}})
	env, _ := testEnv(t, "acme", "s-1")
	id := startBackground(t, sh, env, "sleep 30")
	for _, pid := range []string{id, "proc_aaaaaaaaaaaaaaaa"} {
		_, err := sh.Tools()[2].Prepare(t.Context(), env, map[string]any{"process_id": pid, "input": "123456789"})
		argErr(t, err, "/input", CodeInputTooLarge)
		_, err = sh.Tools()[1].Prepare(t.Context(), env, map[string]any{"process_id": pid, "max_bytes": float64(0)})
		argErr(t, err, "/max_bytes", "must be between")
		_, err = sh.Tools()[3].Prepare(t.Context(), env, map[string]any{"process_id": pid, "grace_ms": 1.5})
		argErr(t, err, "/grace_ms", "must be an integer")
	}
}

func TestBackgroundRefusesUnapprovedPrograms(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, _ := testEnv(t, "acme", "s-1")
	id := startBackground(t, sh, env, "for c in echo id; do $c hi; done")
	text, _, o := readUntil(t, sh, env, id, 0, "\x00never")
	if text != "hi\n"+command.RefusedNotice || o.Status != StateExited || *o.ExitCode != 126 {
		t.Errorf("output %q final %+v", text, o)
	}
}

func TestCloseKillsEveryProcessTree(t *testing.T) {
	sh, err := New(Options{Runner: JailRunner{Jailer: testJailer(t)}})
	if err != nil {
		t.Fatal(err)
	}
	env, _ := testEnv(t, "acme", "s-1")
	marker := fmt.Sprintf("41.%06d", rand.IntN(1000000))
	cmd := fmt.Sprintf("sh -c 'trap \"\" TERM; sleep %s & sleep %s' || sleep 0", marker, marker)
	ids := []string{startBackground(t, sh, env, cmd), startBackground(t, sh, otherEnv(env, "globex", "s-9"), cmd)}

	// A foreground command in flight is ended too.
	tool := bashTool(sh)
	plan := mustPrepare(t, tool, env, map[string]any{"command": "sleep " + marker})
	fg := make(chan error, 1)
	go func() {
		_, err := tool.Run(context.Background(), env, plan.Artifact, tool.Spec().Limits)
		fg <- err
	}()
	waitFor(t, func() bool { return len(strayProcesses(t, marker)) >= 5 })

	if err := sh.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-fg; !errors.Is(err, errClosed) {
		t.Errorf("foreground err = %v", err)
	}
	assertNoStrays(t, marker)
	for _, id := range ids {
		p := sh.sup.procs[id]
		if s := p.snapshot(); s.Status != StateKilled {
			t.Errorf("%s: %+v", id, s)
		}
	}
	if err := sh.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := tool.Run(context.Background(), env, plan.Artifact, tool.Spec().Limits); !errors.Is(err, errClosed) {
		t.Errorf("run after Close: %v", err)
	}
}

func TestExitedProcessesAreForgottenAfterRetention(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var clock = func() time.Time { return now }
	sh := newTestShell(t, Options{Now: func() time.Time { return clock() }})
	env, _ := testEnv(t, "acme", "s-1")
	id := startBackground(t, sh, env, "true")
	readUntil(t, sh, env, id, 0, "\x00never")
	clock = func() time.Time { return now.Add(11 * time.Minute) }
	_, err := sh.Tools()[1].Prepare(t.Context(), env, map[string]any{"process_id": id})
	argErr(t, err, "/process_id", CodeNotFound)
}

func isModelError(err error, code string) bool {
	var me *tools.ModelError
	return errors.As(err, &me) && strings.HasPrefix(me.Message, code+":")
}

// waitFor polls cond for up to 10 s.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStopEndsAnInterpreterBlockedOnInput(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, _ := testEnv(t, "acme", "s-1")
	// read and echo are builtins: no program runs, the interpreter itself waits.
	id := startBackground(t, sh, env, "while read l; do echo got $l; done")
	if _, err := callProcess(t, sh.Tools()[2], env, map[string]any{"process_id": id, "input": "x\n"}); err != nil {
		t.Fatal(err)
	}
	readUntil(t, sh, env, id, 0, "got x\n")
	stop, err := callProcess(t, sh.Tools()[3], env, map[string]any{"process_id": id, "grace_ms": float64(5000)})
	if err != nil {
		t.Fatal(err)
	}
	if stop.Data["status"] != StateKilled || stop.Data["exit_code"] != float64(143) {
		t.Errorf("stop = %q", stop.Content)
	}
}

func TestBackgroundProcessIsKilledAtTheEndOfItsLifetime(t *testing.T) {
	sh := newTestShell(t, Options{Limits: Limits{Lifetime: 200 * time.Millisecond}})
	env, _ := testEnv(t, "acme", "s-1")
	id := startBackground(t, sh, env, "sleep 30")
	_, _, o := readUntil(t, sh, env, id, 0, "\x00never")
	if o.Status != StateKilled || o.ExitCode == nil || *o.ExitCode != 137 {
		t.Errorf("final %+v", o)
	}
}

// Shutdown has a bound no stuck command can extend: a foreground command
// and a background one blocked opening a FIFO nobody writes end when the
// shell closes.
func TestCloseEndsCommandsBlockedOnAFIFO(t *testing.T) {
	sh, err := New(Options{Runner: JailRunner{Jailer: testJailer(t)}})
	if err != nil {
		t.Fatal(err)
	}
	env, dir := testEnv(t, "acme", "s-1")
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o666); err != nil {
		t.Fatal(err)
	}
	ownWorkspace(t, dir)
	marker := fmt.Sprintf("fifo-%06d", rand.IntN(1000000))
	if err := os.Symlink("fifo", filepath.Join(dir, marker)); err != nil {
		t.Fatal(err)
	}
	startBackground(t, sh, env, "cat "+marker)
	tool := bashTool(sh)
	plan := mustPrepare(t, tool, env, map[string]any{"command": "cat " + marker})
	fg := make(chan error, 1)
	go func() {
		_, err := tool.Run(context.Background(), env, plan.Artifact, tool.Spec().Limits)
		fg <- err
	}()
	waitFor(t, func() bool { return len(strayProcesses(t, marker)) >= 2 })
	closed := make(chan error, 1)
	go func() { closed <- sh.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Close did not return: a blocked command held it")
	}
	if err := <-fg; !errors.Is(err, errClosed) {
		t.Errorf("foreground err = %v", err)
	}
	assertNoStrays(t, marker)
}
