package task_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/tools"
	"github.com/toolgate/toolgate/internal/tools/task"
)

// envAs is a call of principal in (tenant, session).
func envAs(tenant, session, principal string) *tools.Env {
	return &tools.Env{Tenant: tenant, Principal: principal, SessionID: session}
}

// ids are the ids of a listed task-list result, in order.
func ids(l list) []string {
	out := []string{}
	for _, o := range l.Tasks {
		out = append(out, o.ID)
	}
	return out
}

// The tools do not judge ownership, policy does: another principal of the
// session reaches policy with a resource naming the task's owner.
func TestTaskResourcesNameTheOwnerNotTheCaller(t *testing.T) {
	f := newFixture(t, task.Options{})
	alice, bob := envAs("acme", "s-1", "alice"), envAs("acme", "s-1", "bob")
	a := f.mustTask(t, "task-create", alice, `{"subject":"alice's"}`)
	cases := []struct {
		tool, args string
		want       tools.Resource
	}{
		{"task-get", `{"task_id":"` + a.ID + `"}`, tools.Resource{"type": "task", "id": a.ID, "session": "s-1", "owner": "alice"}},
		{"task-update", `{"task_id":"` + a.ID + `","status":"completed"}`, tools.Resource{"type": "task", "id": a.ID, "session": "s-1", "owner": "alice"}},
		{"task-create", `{"subject":"bob's"}`, tools.Resource{"type": "task_list", "session": "s-1", "owner": "bob"}},
		{"task-list", `{}`, tools.Resource{"type": "task_list", "session": "s-1", "owner": "bob"}},
		{"task-list", `{"owner":"alice"}`, tools.Resource{"type": "task_list", "session": "s-1", "owner": "alice"}},
	}
	for _, c := range cases {
		plan, err := f.tools[c.tool].Prepare(t.Context(), bob, decodeArgs(t, c.args))
		if err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		if len(plan.Resources) != 1 || !reflect.DeepEqual(plan.Resources[0], c.want) {
			t.Errorf("%s: resources %v, want [%v]", c.tool, plan.Resources, c.want)
		}
	}
}

// What a concealed denial answers is exactly what a missing id answers.
func TestConcealedIsTheMissingIdAnswer(t *testing.T) {
	f := newFixture(t, task.Options{})
	e := env("acme", "s-1")
	for tool, args := range map[string]string{
		"task-get":    `{"task_id":"task_aaaaaaaaaaaa"}`,
		"task-update": `{"task_id":"task_aaaaaaaaaaaa","status":"completed"}`,
	} {
		_, missing := f.call(t, tool, e, args)
		c, ok := f.tools[tool].(tools.Concealer)
		if !ok {
			t.Fatalf("%s is not a tools.Concealer", tool)
		}
		if got := c.Concealed(); *got != *asArgError(t, missing) {
			t.Errorf("%s: Concealed() = %+v, want the missing-id answer %+v", tool, got, missing)
		}
	}
	for _, tool := range []string{"task-create", "task-list"} {
		if _, ok := f.tools[tool].(tools.Concealer); ok {
			t.Errorf("%s conceals, but names no task by id", tool)
		}
	}
}

// task-list shows the caller's own tasks unless it names another owner
// (or "*"), which policy judges; the tool filters by what was prepared.
func TestListShowsTheTasksOfTheAskedOwner(t *testing.T) {
	f := newFixture(t, task.Options{})
	alice, bob := envAs("acme", "s-1", "alice"), envAs("acme", "s-1", "bob")
	a := f.mustTask(t, "task-create", alice, `{"subject":"alice's"}`)
	b := f.mustTask(t, "task-create", bob, `{"subject":"bob's"}`)
	a2 := f.mustTask(t, "task-create", alice, `{"subject":"alice's too"}`)
	star := f.mustTask(t, "task-create", envAs("acme", "s-1", "*"), `{"subject":"of a principal named *"}`)
	cases := []struct {
		e    *tools.Env
		args string
		want []string
	}{
		{bob, `{}`, []string{b.ID}},
		{alice, `{}`, []string{a.ID, a2.ID}},
		{bob, `{"owner":"alice"}`, []string{a.ID, a2.ID}},
		{bob, `{"owner":"carol"}`, []string{}},
		{bob, `{"owner":"*"}`, []string{a.ID, b.ID, a2.ID, star.ID}},
		{bob, `{"owner":"*","status":"completed"}`, []string{}},
		// A principal named "*" lists its own by default, not everyone's.
		{envAs("acme", "s-1", "*"), `{}`, []string{star.ID}},
	}
	for _, c := range cases {
		if got := ids(f.mustList(t, c.e, c.args)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s lists %s: %v, want %v", c.e.Principal, c.args, got, c.want)
		}
	}
	_, err := f.tools["task-list"].Prepare(t.Context(), bob, map[string]any{"owner": ""})
	if ae := asArgError(t, err); ae.Pointer != "/owner" {
		t.Errorf("empty owner: %+v", ae)
	}
	plan, err := f.tools["task-list"].Prepare(t.Context(), envAs("acme", "s-1", "*"), map[string]any{})
	if err != nil || !reflect.DeepEqual(plan.Resources, []tools.Resource{{"type": "task_list", "session": "s-1", "owner": "*"}}) {
		t.Errorf("a principal named *: %v %v, want its own task list", plan.Resources, err)
	}
}

// A principal's tasks wait only for its own: another principal's task is
// not found as a dependency, exactly like a missing id.
func TestDependenciesOnAnotherPrincipalsTaskAreNotFound(t *testing.T) {
	f := newFixture(t, task.Options{})
	alice, bob := envAs("acme", "s-1", "alice"), envAs("acme", "s-1", "bob")
	a := f.mustTask(t, "task-create", alice, `{"subject":"alice's"}`)
	b := f.mustTask(t, "task-create", bob, `{"subject":"bob's"}`)
	for _, c := range []struct{ tool, args, ptr string }{
		{"task-create", `{"subject":"x","blocked_by":["%s"]}`, "/blocked_by/0"},
		{"task-update", `{"task_id":"` + b.ID + `","add_blocked_by":["%s"]}`, "/add_blocked_by/0"},
	} {
		for _, id := range []string{a.ID, "task_aaaaaaaaaaaa"} {
			_, err := f.call(t, c.tool, bob, strings.Replace(c.args, "%s", id, 1))
			if ae := asArgError(t, err); *ae != (tools.ArgError{Pointer: c.ptr, Rule: "not_found: no such task"}) {
				t.Errorf("%s with %s: %+v", c.tool, id, ae)
			}
		}
	}
	// Alice's own tasks may wait for each other.
	a2 := f.mustTask(t, "task-create", alice, `{"subject":"then","blocked_by":["`+a.ID+`"]}`)
	if !reflect.DeepEqual(a2.BlockedBy, []string{a.ID}) {
		t.Errorf("own dependency: %+v", a2)
	}
}

// Until policy has decided, another principal's task answers exactly like a
// missing one: argument errors come first for both, and what Prepare finds
// about the task's dependencies is deferred to Run (reached only when
// policy allows, e.g. for a supervisor).
func TestAnotherPrincipalsTaskIsIndistinguishableBeforePolicy(t *testing.T) {
	f := newFixture(t, task.Options{MaxDependencies: 1})
	alice, bob := envAs("acme", "s-1", "alice"), envAs("acme", "s-1", "bob")
	a1 := f.mustTask(t, "task-create", alice, `{"subject":"first"}`)
	a2 := f.mustTask(t, "task-create", alice, `{"subject":"second","blocked_by":["`+a1.ID+`"]}`)
	a3 := f.mustTask(t, "task-create", alice, `{"subject":"third"}`)
	missing := "task_aaaaaaaaaaaa"

	// The same argument error for Alice's task and a missing one.
	for _, id := range []string{a2.ID, missing} {
		_, err := f.call(t, "task-update", bob, `{"task_id":"`+id+`"}`)
		if ae := asArgError(t, err); ae.Pointer != "" || !strings.Contains(ae.Rule, "must change at least one") {
			t.Errorf("no change to %s: %+v", id, ae)
		}
	}
	for note, change := range map[string]string{
		"an unknown dependency":   `"add_blocked_by":["` + missing + `"]`,
		"a cycle":                 `"add_blocked_by":["` + a2.ID + `"]`,
		"too many dependencies":   `"add_blocked_by":["` + a3.ID + `"]`,
		"bob's own task":          `"add_blocked_by":["` + f.mustTask(t, "task-create", bob, `{"subject":"b"}`).ID + `"]`,
		"a plain status change":   `"status":"completed"`,
		"a dependency of alice's": `"remove_blocked_by":["` + a1.ID + `"]`,
	} {
		target := a2.ID
		if note == "a cycle" {
			target = a1.ID
		}
		_, err := f.call(t, "task-update", bob, `{"task_id":"`+missing+`",`+change+`}`)
		if ae := asArgError(t, err); *ae != *notFoundID {
			t.Errorf("%s, missing task: %+v", note, ae)
		}
		plan, err := f.tools["task-update"].Prepare(t.Context(), bob, decodeArgs(t, `{"task_id":"`+target+`",`+change+`}`))
		if err != nil {
			t.Errorf("%s: Alice's task answered before policy decided: %v", note, err)
			continue
		}
		if plan.Resources[0]["owner"] != "alice" {
			t.Errorf("%s: resource %v", note, plan.Resources[0])
		}
	}
	// Policy allowed (a supervisor): Run gives the deferred feedback and
	// writes nothing.
	before := f.mustTask(t, "task-get", alice, `{"task_id":"`+a1.ID+`"}`)
	_, err := f.call(t, "task-update", bob, `{"task_id":"`+a1.ID+`","add_blocked_by":["`+a2.ID+`"]}`)
	var me *tools.ModelError
	if !errors.As(err, &me) || !strings.HasPrefix(me.Message, "invalid arguments: /add_blocked_by: cycle") {
		t.Errorf("deferred cycle at Run: %v", err)
	}
	if after := f.mustTask(t, "task-get", alice, `{"task_id":"`+a1.ID+`"}`); !reflect.DeepEqual(after, before) {
		t.Errorf("a refused change was written: %+v", after)
	}
	// The owner is answered at Prepare, as before.
	_, err = f.call(t, "task-update", alice, `{"task_id":"`+a1.ID+`","add_blocked_by":["`+a2.ID+`"]}`)
	if ae := asArgError(t, err); ae.Pointer != "/add_blocked_by" || !strings.HasPrefix(ae.Rule, "cycle") {
		t.Errorf("the owner's cycle: %+v", ae)
	}
	// A change policy allowed that is valid runs (a supervisor's).
	if u := f.mustTask(t, "task-update", bob, `{"task_id":"`+a3.ID+`","status":"in_progress"}`); u.Status != "in_progress" {
		t.Errorf("allowed update: %+v", u)
	}
}

var notFoundID = &tools.ArgError{Pointer: "/task_id", Rule: "not_found: no such task"}
