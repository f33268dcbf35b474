package gateway

import (
	"bytes"
	"crypto/rand"
	"encoding/base32"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
)

// ownerCalls drives one session's process and task tools as several
// principals of one tenant.
type ownerCalls struct {
	h       *harness
	session string
}

func (o ownerCalls) call(tok, tool string, args map[string]any) response {
	o.h.t.Helper()
	b, err := json.Marshal(map[string]any{"arguments": args, "session_id": o.session})
	must(o.h.t, err)
	return o.h.call(tok, tool, string(b))
}

func (o ownerCalls) decide(tok, tool string, args map[string]any) response {
	o.h.t.Helper()
	b, err := json.Marshal(map[string]any{"arguments": args, "session_id": o.session})
	must(o.h.t, err)
	return o.h.do("POST", "/v1/tools/"+tool+"/decisions", tok, b)
}

// task decodes a task object from a call's content.
func (o ownerCalls) task(r response) map[string]any {
	o.h.t.Helper()
	var v map[string]any
	if r.str("outcome") != "ok" {
		o.h.t.Fatalf("task call: %s", r.raw)
	}
	must(o.h.t, json.Unmarshal([]byte(r.str("content")), &v))
	return v
}

// listed is the ids a task-list answer shows.
func (o ownerCalls) listed(r response) []string {
	o.h.t.Helper()
	var v struct {
		Tasks []struct {
			ID string `json:"id"`
		} `json:"tasks"`
	}
	if r.str("outcome") != "ok" {
		o.h.t.Fatalf("task-list: %s", r.raw)
	}
	must(o.h.t, json.Unmarshal([]byte(r.str("content")), &v))
	ids := []string{}
	for _, t := range v.Tasks {
		ids = append(ids, t.ID)
	}
	return ids
}

// waitOutput reads a process's output as tok until it contains want.
func (o ownerCalls) waitOutput(tok, pid, want string) map[string]any {
	o.h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := o.call(tok, "process-output", map[string]any{"process_id": pid, "wait_ms": 2000})
		var out map[string]any
		if r.str("outcome") != "ok" {
			o.h.t.Fatalf("process-output: %s", r.raw)
		}
		must(o.h.t, json.Unmarshal([]byte(r.str("content")), &out))
		if s, _ := out["output"].(string); strings.Contains(s, want) {
			return out
		}
		if time.Now().After(deadline) {
			o.h.t.Fatalf("output never showed %q: %s", want, r.raw)
		}
	}
}

// randomID is an id of the tools' form that names nothing.
func randomID(prefix string, n int) string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	return prefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))[:n]
}

// withoutIDs is a response body with its own call and decision ids
// replaced, so that two answers can be compared byte for byte.
func withoutIDs(r response) []byte {
	raw := r.raw
	for _, k := range []string{"call_id", "decision_id"} {
		if id := r.str(k); id != "" {
			raw = bytes.ReplaceAll(raw, []byte(id), []byte(k))
		}
	}
	return raw
}

// Bob, a developer of Alice's tenant who knows her session id and her
// process and task ids, gets exactly what an id that does not exist gets;
// Alice's process keeps running, her task is unchanged, and the audit log
// records Bob's attempts as the denials they are. A supervisor may read,
// feed and stop them.
func TestAnotherPrincipalsProcessesAndTasksAnswerLikeUnknownIDs(t *testing.T) {
	t.Parallel()
	asGatewayUsers(t, testAnotherPrincipalsProcessesAndTasks)
}

func testAnotherPrincipalsProcessesAndTasks(t *testing.T) {
	h := start(t, withAllTools)
	o := ownerCalls{h: h, session: "s-shared"}
	alice := h.token("acme", "alice", "developer")
	bob := h.token("acme", "bob", "developer")
	carol := h.token("acme", "carol", "developer", "supervisor")

	r := o.call(alice, "bash", map[string]any{"command": "cat", "background": true})
	data, _ := r.body["data"].(map[string]any)
	pid, _ := data["process_id"].(string)
	if r.str("outcome") != "ok" || pid == "" {
		t.Fatalf("background start: %s", r.raw)
	}
	if r := o.call(alice, "process-input", map[string]any{"process_id": pid, "input": "ping\n"}); r.str("outcome") != "ok" {
		t.Fatalf("alice's input: %s", r.raw)
	}
	o.waitOutput(alice, pid, "ping")
	aliceTask := o.task(o.call(alice, "task-create", map[string]any{"subject": "alice's task"}))
	bobTask := o.task(o.call(bob, "task-create", map[string]any{"subject": "bob's task"}))
	tid := aliceTask["id"].(string)

	missingProc, missingTask := randomID("proc_", 16), randomID("task_", 12)
	attempts := []struct {
		tool          string
		args, missing map[string]any
	}{
		{"process-output", map[string]any{"process_id": pid}, map[string]any{"process_id": missingProc}},
		{"process-input", map[string]any{"process_id": pid, "input": "from bob\n"}, map[string]any{"process_id": missingProc, "input": "from bob\n"}},
		{"process-stop", map[string]any{"process_id": pid, "grace_ms": 0}, map[string]any{"process_id": missingProc, "grace_ms": 0}},
		{"task-get", map[string]any{"task_id": tid}, map[string]any{"task_id": missingTask}},
		{"task-update", map[string]any{"task_id": tid, "status": "completed", "subject": "bob was here"},
			map[string]any{"task_id": missingTask, "status": "completed", "subject": "bob was here"}},
	}
	for _, a := range attempts {
		got, want := o.call(bob, a.tool, a.args), o.call(bob, a.tool, a.missing)
		if got.status != want.status || !bytes.Equal(withoutIDs(got), withoutIDs(want)) {
			t.Errorf("%s: bob's answer for alice's id differs from an unknown id's:\n%d %s\n%d %s", a.tool, got.status, got.raw, want.status, want.raw)
		}
		if want.str("outcome") != "invalid_arguments" || !strings.Contains(want.str("content"), "not_found") {
			t.Errorf("%s: the unknown id's answer: %s", a.tool, want.raw)
		}
		// PDP mode answers the same way.
		got, want = o.decide(bob, a.tool, a.args), o.decide(bob, a.tool, a.missing)
		if got.status != want.status || !bytes.Equal(withoutIDs(got), withoutIDs(want)) {
			t.Errorf("%s decision: bob's answer differs from an unknown id's:\n%s\n%s", a.tool, got.raw, want.raw)
		}
	}

	// task-list shows Bob his own tasks; asking for Alice's is denied the
	// same way as asking for a principal that has none.
	if got := o.listed(o.call(bob, "task-list", map[string]any{})); len(got) != 1 || got[0] != bobTask["id"] {
		t.Errorf("bob's task-list shows %v, want only his task %v", got, bobTask["id"])
	}
	forAlice := o.call(bob, "task-list", map[string]any{"owner": "alice"})
	forNobody := o.call(bob, "task-list", map[string]any{"owner": "nobody-" + randomID("", 8)})
	if forAlice.str("outcome") != "denied" || forAlice.str("content") != forNobody.str("content") || forAlice.status != forNobody.status {
		t.Errorf("bob asking for alice's tasks: %s\nfor nobody's: %s", forAlice.raw, forNobody.raw)
	}
	if strings.Contains(string(forAlice.raw), tid) {
		t.Errorf("bob's task-list showed alice's task: %s", forAlice.raw)
	}
	if r := o.call(bob, "task-list", map[string]any{"owner": "*"}); r.str("outcome") != "denied" {
		t.Errorf("bob listing every principal's tasks: %s", r.raw)
	}

	// Nothing of Alice's changed: her process runs and got no input from
	// Bob, her task is as she left it.
	out := o.waitOutput(alice, pid, "ping")
	if out["status"] != "running" || strings.Contains(out["output"].(string), "bob") {
		t.Fatalf("alice's process after bob's attempts: %v", out)
	}
	if got := o.task(o.call(alice, "task-get", map[string]any{"task_id": tid})); got["status"] != "pending" ||
		got["subject"] != "alice's task" || got["updated_at"] != aliceTask["updated_at"] {
		t.Fatalf("alice's task after bob's attempts: %v", got)
	}
	if got := o.listed(o.call(alice, "task-list", map[string]any{})); len(got) != 1 || got[0] != tid {
		t.Errorf("alice's task-list shows %v", got)
	}

	// The audit log records each of Bob's attempts as a denial; the
	// concealed ones say so.
	concealed := map[string]int{}
	for _, ev := range h.events("acme", "principal=bob&outcome=denied") {
		tool, _ := ev["tool"].(string)
		if ev["concealed"] == true {
			concealed[tool]++
			if reasons, _ := ev["reasons"].([]any); len(reasons) != 1 || !strings.Contains(reasons[0].(string), "belongs to another principal") {
				t.Errorf("%s: reasons %v", tool, ev["reasons"])
			}
		} else if tool != "task-list" {
			t.Errorf("a denial of bob's is not marked concealed: %v", ev)
		}
	}
	for _, a := range attempts {
		if concealed[a.tool] != 2 { // the call and the decision
			t.Errorf("%s: %d concealed denials of bob's in the audit log, want 2", a.tool, concealed[a.tool])
		}
	}
	if n := len(h.events("acme", "principal=bob&outcome=denied&tool=task-list")); n != 3 {
		t.Errorf("%d task-list denials of bob's in the audit log, want 3", n)
	}

	// A supervisor may read, feed, list, update and stop them.
	if r := o.call(carol, "process-input", map[string]any{"process_id": pid, "input": "from carol\n"}); r.str("outcome") != "ok" {
		t.Fatalf("supervisor's input: %s", r.raw)
	}
	o.waitOutput(carol, pid, "from carol")
	if got := o.task(o.call(carol, "task-get", map[string]any{"task_id": tid})); got["subject"] != "alice's task" {
		t.Errorf("supervisor's task-get: %v", got)
	}
	if got := o.listed(o.call(carol, "task-list", map[string]any{"owner": "alice"})); len(got) != 1 || got[0] != tid {
		t.Errorf("supervisor lists alice's tasks: %v", got)
	}
	if got := o.listed(o.call(carol, "task-list", map[string]any{"owner": "*"})); len(got) != 2 {
		t.Errorf("supervisor lists every principal's tasks: %v", got)
	}
	if got := o.task(o.call(carol, "task-update", map[string]any{"task_id": tid, "status": "in_progress"})); got["status"] != "in_progress" {
		t.Errorf("supervisor's task-update: %v", got)
	}
	r = o.call(carol, "process-stop", map[string]any{"process_id": pid, "grace_ms": 100})
	if r.str("outcome") != "ok" || !strings.Contains(r.str("content"), `"status":"killed"`) {
		t.Fatalf("supervisor's process-stop: %s", r.raw)
	}
}
