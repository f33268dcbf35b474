package task_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/tools"
	"github.com/toolgate/toolgate/internal/tools/task"
)

func TestToolsArePublishedInOrderWithValidSpecs(t *testing.T) {
	f := newFixture(t, task.Options{})
	want := []struct{ name, action string }{
		{"task-create", "task.create"}, {"task-update", "task.update"}, {"task-get", "task.read"}, {"task-list", "task.list"},
	}
	ts := task.Tools(f.store, task.Options{})
	if len(ts) != len(want) {
		t.Fatalf("Tools() has %d tools, want %d", len(ts), len(want))
	}
	if _, err := tools.NewRegistry(ts...); err != nil {
		t.Fatalf("registry refuses the tools: %v", err)
	}
	for i, tool := range ts {
		s := tool.Spec()
		if s.Name != want[i].name || s.Action != want[i].action {
			t.Errorf("tool %d is %s/%s, want %s/%s", i, s.Name, s.Action, want[i].name, want[i].action)
		}
		if s.Kind != tools.KindBuiltin || s.Description == "" || s.Limits.Timeout <= 0 || s.Limits.MaxOutputBytes <= 0 {
			t.Errorf("%s: incomplete spec %+v", s.Name, s)
		}
		if ro := s.Name == "task-get" || s.Name == "task-list"; s.Annotations.ReadOnly != ro {
			t.Errorf("%s: read_only = %v, want %v", s.Name, s.Annotations.ReadOnly, ro)
		}
	}
}

// Every string and array in every schema is bounded, so no argument can be
// larger than the schema allows by the time tool code sees it.
func TestSchemasAreStrictObjectsWithBoundedProperties(t *testing.T) {
	f := newFixture(t, task.Options{})
	for name, tool := range f.tools {
		var doc struct {
			Schema     string                    `json:"$schema"`
			Type       string                    `json:"type"`
			Additional *bool                     `json:"additionalProperties"`
			Properties map[string]map[string]any `json:"properties"`
		}
		if err := json.Unmarshal([]byte(tool.Spec().InputSchema), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Schema != "https://json-schema.org/draft/2020-12/schema" || doc.Type != "object" {
			t.Errorf("%s: $schema/type = %q/%q", name, doc.Schema, doc.Type)
		}
		if doc.Additional == nil || *doc.Additional {
			t.Errorf("%s: additionalProperties must be false", name)
		}
		for prop, p := range doc.Properties {
			if d, _ := p["description"].(string); d == "" {
				t.Errorf("%s.%s has no description", name, prop)
			}
			switch p["type"] {
			case "string":
				if p["maxLength"] == nil {
					t.Errorf("%s.%s has no maxLength", name, prop)
				}
			case "array":
				items, _ := p["items"].(map[string]any)
				if p["maxItems"] == nil || p["uniqueItems"] != true || items == nil || items["maxLength"] == nil {
					t.Errorf("%s.%s must be a bounded array of unique bounded strings: %v", name, prop, p)
				}
			default:
				t.Errorf("%s.%s: unexpected type %v", name, prop, p["type"])
			}
		}
	}
}

func TestSchemasRejectOversizeArgumentsBeforeAnyToolCode(t *testing.T) {
	ids := func(n int) string { // n distinct well-formed ids
		s := make([]string, n)
		for i := range s {
			s[i] = fmt.Sprintf(`"task_aaaaaaaaaa%c%c"`, 'a'+i/26, 'a'+i%26)
		}
		return strings.Join(s, ",")
	}
	long := func(n int) string { return strings.Repeat("é", n) } // characters, not bytes
	cases := []struct {
		tool, args string
		valid      bool
	}{
		{"task-create", `{"subject":"` + long(200) + `"}`, true},
		{"task-create", `{"subject":"` + long(201) + `"}`, false},
		{"task-create", `{"subject":""}`, false},
		{"task-create", `{"subject":"a","description":"` + long(4000) + `"}`, true},
		{"task-create", `{"subject":"a","description":"` + long(4001) + `"}`, false},
		{"task-create", `{"subject":"a","blocked_by":[` + ids(20) + `]}`, true},
		{"task-create", `{"subject":"a","blocked_by":[` + ids(21) + `]}`, false},
		{"task-create", `{"subject":"a","blocked_by":["task_aaaaaaaaaaaa","task_aaaaaaaaaaaa"]}`, false},
		{"task-create", `{"subject":"a","blocked_by":["task_AAAAAAAAAAAA"]}`, false},
		{"task-create", `{"subject":"a","blocked_by":["task_aaaaaaaaaaa1"]}`, false},
		{"task-create", `{"subject":"a","status":"completed"}`, false},
		{"task-create", `{"description":"a"}`, false},
		{"task-update", `{"task_id":"task_aaaaaaaaaaaa","status":"in_progress"}`, true},
		{"task-update", `{"task_id":"task_aaaaaaaaaaaa","status":"done"}`, false},
		{"task-update", `{"task_id":"task_aaaaaaaaaaaa","subject":"` + long(201) + `"}`, false},
		{"task-update", `{"task_id":"task_aaaaaaaaaaaa","add_blocked_by":[` + ids(21) + `]}`, false},
		{"task-update", `{"task_id":"task_aaaaaaaaaaaa","remove_blocked_by":[` + ids(21) + `]}`, false},
		{"task-update", `{"task_id":"x","status":"pending"}`, false},
		{"task-update", `{"status":"pending"}`, false},
		{"task-get", `{"task_id":"task_aaaaaaaaaaaa"}`, true},
		{"task-get", `{"task_id":"task_aaaaaaaaaaaa","extra":1}`, false},
		{"task-get", `{"task_id":"task_aaaaaaaaaaaaa"}`, false},
		{"task-list", `{}`, true},
		{"task-list", `{"status":"completed"}`, true},
		{"task-list", `{"status":"all"}`, false},
	}
	f := newFixture(t, task.Options{})
	for _, c := range cases {
		err := f.schemas[c.tool].Validate(decodeArgs(t, c.args))
		if (err == nil) != c.valid {
			short := c.args
			if len(short) > 80 {
				short = short[:80] + "…"
			}
			t.Errorf("%s %s: valid = %v, want %v", c.tool, short, err == nil, c.valid)
		}
	}
}

func TestSchemasPublishTheConfiguredLimits(t *testing.T) {
	f := newFixture(t, task.Options{MaxSubject: 10, MaxDescription: 20, MaxDependencies: 2})
	create := f.schemas["task-create"]
	for args, valid := range map[string]bool{
		`{"subject":"0123456789"}`:                                                                   true,
		`{"subject":"0123456789x"}`:                                                                  false,
		`{"subject":"a","description":"012345678901234567890"}`:                                      false,
		`{"subject":"a","blocked_by":["task_aaaaaaaaaaaa","task_aaaaaaaaaaab"]}`:                     true,
		`{"subject":"a","blocked_by":["task_aaaaaaaaaaaa","task_aaaaaaaaaaab","task_aaaaaaaaaaac"]}`: false,
	} {
		if err := create.Validate(decodeArgs(t, args)); (err == nil) != valid {
			t.Errorf("%s: valid = %v, want %v", args, err == nil, valid)
		}
	}
}

// Plan.Args is shown to policy as what will run: defaults filled in, and
// still valid against the published schema.
func TestPlannedArgsCarryDefaultsAndMatchTheSchema(t *testing.T) {
	f := newFixture(t, task.Options{})
	e := env("acme", "s-1")
	a := f.mustTask(t, "task-create", e, `{"subject":"a"}`)
	cases := []struct {
		tool, args string
		want       map[string]any
	}{
		{"task-create", `{"subject":"b"}`, map[string]any{"subject": "b", "description": "", "blocked_by": []any{}}},
		{"task-create", `{"subject":"b","blocked_by":["` + a.ID + `"]}`,
			map[string]any{"subject": "b", "description": "", "blocked_by": []any{a.ID}}},
		{"task-update", `{"task_id":"` + a.ID + `","status":"completed"}`,
			map[string]any{"task_id": a.ID, "status": "completed"}},
		{"task-get", `{"task_id":"` + a.ID + `"}`, map[string]any{"task_id": a.ID}},
		{"task-list", `{}`, map[string]any{"owner": "alice"}},
		{"task-list", `{"owner":"*"}`, map[string]any{"owner": "*"}},
	}
	for _, c := range cases {
		args := decodeArgs(t, c.args)
		given := fmt.Sprint(args)
		plan, err := f.tools[c.tool].Prepare(t.Context(), e, args)
		if err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		if fmt.Sprint(args) != given {
			t.Errorf("%s: Prepare modified the caller's args", c.tool)
		}
		if !reflect.DeepEqual(plan.Args, c.want) {
			t.Errorf("%s: Args = %#v, want %#v", c.tool, plan.Args, c.want)
		}
		if err := f.schemas[c.tool].Validate(plan.Args); err != nil {
			t.Errorf("%s: planned args fail the schema: %v", c.tool, err)
		}
	}
}

func TestResourcesAreTheShapesThePolicyPackExpects(t *testing.T) {
	f := newFixture(t, task.Options{})
	e := env("acme", "s-1")
	a := f.mustTask(t, "task-create", e, `{"subject":"a"}`)
	cases := []struct {
		tool, args string
		want       tools.Resource
	}{
		{"task-create", `{"subject":"b"}`, tools.Resource{"type": "task_list", "session": "s-1", "owner": "alice"}},
		{"task-update", `{"task_id":"` + a.ID + `","subject":"c"}`, tools.Resource{"type": "task", "id": a.ID, "session": "s-1", "owner": "alice"}},
		{"task-get", `{"task_id":"` + a.ID + `"}`, tools.Resource{"type": "task", "id": a.ID, "session": "s-1", "owner": "alice"}},
		{"task-list", `{"status":"pending"}`, tools.Resource{"type": "task_list", "session": "s-1", "owner": "alice"}},
		{"task-list", `{"owner":"bob"}`, tools.Resource{"type": "task_list", "session": "s-1", "owner": "bob"}},
		{"task-list", `{"owner":"*"}`, tools.Resource{"type": "task_list", "session": "s-1", "all_owners": true}},
	}
	for _, c := range cases {
		plan, err := f.tools[c.tool].Prepare(t.Context(), e, decodeArgs(t, c.args))
		if err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		if len(plan.Resources) != 1 || !reflect.DeepEqual(plan.Resources[0], c.want) {
			t.Errorf("%s: resources %v, want [%v]", c.tool, plan.Resources, c.want)
		}
	}
}

func TestCreateGetUpdateAndListWorkTogether(t *testing.T) {
	f := newFixture(t, task.Options{Now: fixedClock()})
	e := env("acme", "s-1")

	a := f.mustTask(t, "task-create", e, `{"subject":"Write the parser","description":"RFC 8259"}`)
	if !task.ValidID(a.ID) || a.Status != "pending" || *a.Description != "RFC 8259" || len(a.BlockedBy) != 0 {
		t.Fatalf("created %+v", a)
	}
	if a.CreatedAt != "2025-03-01T12:00:00.001Z" || a.UpdatedAt != a.CreatedAt {
		t.Fatalf("times %s / %s, want RFC 3339 UTC with milliseconds from the clock", a.CreatedAt, a.UpdatedAt)
	}
	b := f.mustTask(t, "task-create", e, `{"subject":"Test the parser","blocked_by":["`+a.ID+`"]}`)
	if !reflect.DeepEqual(b.BlockedBy, []string{a.ID}) || *b.Description != "" {
		t.Fatalf("created %+v", b)
	}
	if got := f.mustTask(t, "task-get", e, `{"task_id":"`+b.ID+`"}`); !reflect.DeepEqual(got, b) {
		t.Fatalf("get = %+v, want %+v", got, b)
	}

	u := f.mustTask(t, "task-update", e, `{"task_id":"`+a.ID+`","status":"in_progress","subject":"Write the JSON parser"}`)
	if u.Status != "in_progress" || u.Subject != "Write the JSON parser" || *u.Description != "RFC 8259" ||
		u.CreatedAt != a.CreatedAt || u.UpdatedAt <= a.UpdatedAt {
		t.Fatalf("updated %+v from %+v", u, a)
	}
	u = f.mustTask(t, "task-update", e, `{"task_id":"`+b.ID+`","remove_blocked_by":["`+a.ID+`"],"description":"all of it"}`)
	if len(u.BlockedBy) != 0 || *u.Description != "all of it" {
		t.Fatalf("updated %+v", u)
	}
	f.mustTask(t, "task-update", e, `{"task_id":"`+a.ID+`","status":"completed"}`)

	l := f.mustList(t, e, `{}`)
	if len(l.Tasks) != 2 || l.Tasks[0].ID != a.ID || l.Tasks[1].ID != b.ID || l.Truncated || l.DescriptionsOmitted {
		t.Fatalf("list = %+v", l)
	}
	for status, want := range map[string][]string{"completed": {a.ID}, "pending": {b.ID}, "in_progress": nil} {
		l := f.mustList(t, e, `{"status":"`+status+`"}`)
		var got []string
		for _, o := range l.Tasks {
			got = append(got, o.ID)
		}
		if !reflect.DeepEqual(got, want) || l.Tasks == nil {
			t.Errorf("list %s = %v, want %v", status, got, want)
		}
	}
	if owner := f.storedOwner(t, "acme", "s-1", a.ID); owner != "alice" {
		t.Errorf("owner = %q, want the creating principal", owner)
	}
}

func (f *fixture) storedOwner(t *testing.T, tenant, session, id string) string {
	t.Helper()
	tk, err := f.store.Get(t.Context(), tenant, session, id)
	if err != nil {
		t.Fatal(err)
	}
	return tk.Owner
}

func TestCallsWithoutASessionAreRefused(t *testing.T) {
	f := newFixture(t, task.Options{})
	a := f.mustTask(t, "task-create", env("acme", "s-1"), `{"subject":"a"}`)
	for tool, args := range map[string]string{
		"task-create": `{"subject":"x"}`,
		"task-update": `{"task_id":"` + a.ID + `","status":"completed"}`,
		"task-get":    `{"task_id":"` + a.ID + `"}`,
		"task-list":   `{}`,
	} {
		_, err := f.call(t, tool, env("acme", ""), args)
		ae := asArgError(t, err)
		if *ae != (tools.ArgError{Pointer: "", Rule: "requires a session_id in the call"}) {
			t.Errorf("%s without a session: %+v", tool, ae)
		}
	}
}

// A task of another session or tenant must look exactly like no task.
func TestForeignIdsBehaveExactlyLikeMissingOnes(t *testing.T) {
	f := newFixture(t, task.Options{})
	own := f.mustTask(t, "task-create", env("acme", "s-1"), `{"subject":"own"}`)
	otherSession := f.mustTask(t, "task-create", env("acme", "s-2"), `{"subject":"theirs"}`)
	otherTenant := f.mustTask(t, "task-create", env("globex", "s-1"), `{"subject":"theirs"}`)
	missing := "task_aaaaaaaaaaaa"
	e := env("acme", "s-1")

	calls := []struct {
		tool, args, want string // want: the pointer of the not_found error
	}{
		{"task-get", `{"task_id":"%s"}`, "/task_id"},
		{"task-update", `{"task_id":"%s","status":"completed"}`, "/task_id"},
		{"task-create", `{"subject":"x","blocked_by":["` + own.ID + `","%s"]}`, "/blocked_by/1"},
		{"task-update", `{"task_id":"` + own.ID + `","add_blocked_by":["%s"]}`, "/add_blocked_by/0"},
	}
	for _, c := range calls {
		var first *tools.ArgError
		for _, id := range []string{missing, otherSession.ID, otherTenant.ID} {
			_, err := f.call(t, c.tool, e, fmt.Sprintf(c.args, id))
			ae := asArgError(t, err)
			if *ae != (tools.ArgError{Pointer: c.want, Rule: "not_found: no such task"}) {
				t.Errorf("%s with %s: %+v", c.tool, id, ae)
			}
			if first != nil && *first != *ae {
				t.Errorf("%s: %+v differs from %+v", c.tool, ae, first)
			}
			first = ae
		}
	}
	for _, id := range []string{otherSession.ID, otherTenant.ID} {
		for _, o := range f.mustList(t, e, `{}`).Tasks {
			if o.ID == id {
				t.Errorf("list shows a foreign task %s", id)
			}
		}
	}
	// Nothing foreign changed.
	if got := f.mustTask(t, "task-get", env("acme", "s-2"), `{"task_id":"`+otherSession.ID+`"}`); got.Status != "pending" {
		t.Errorf("foreign task changed: %+v", got)
	}
}

func TestMalformedIdsAreArgumentErrors(t *testing.T) {
	f := newFixture(t, task.Options{})
	e := env("acme", "s-1")
	for _, id := range []string{"", "task_", "task_AAAAAAAAAAAA", "task_aaaaaaaaaaa1", "proc_aaaaaaaaaaaa", "task_aaaaaaaaaaaaa", "../../x"} {
		args := map[string]any{"task_id": id}
		_, err := f.tools["task-get"].Prepare(t.Context(), e, args)
		if ae := asArgError(t, err); ae.Pointer != "/task_id" || strings.Contains(ae.Rule, "not_found") {
			t.Errorf("id %q: %+v, want a format error on /task_id", id, ae)
		}
	}
	_, err := f.tools["task-create"].Prepare(t.Context(), e, map[string]any{"subject": "a", "blocked_by": []any{"task_aaaaaaaaaaaa", 7.0}})
	if ae := asArgError(t, err); ae.Pointer != "/blocked_by/1" {
		t.Errorf("non-string dependency: %+v", ae)
	}
}

func TestTextArgumentsAreCheckedByPrepareToo(t *testing.T) {
	f := newFixture(t, task.Options{MaxSubject: 5, MaxDescription: 5, MaxDependencies: 1})
	e := env("acme", "s-1")
	cases := []struct {
		args    map[string]any
		pointer string
	}{
		{map[string]any{"subject": "123456"}, "/subject"},
		{map[string]any{"subject": "   "}, "/subject"},
		{map[string]any{"subject": "a\nb"}, "/subject"},
		{map[string]any{"subject": "a\x00"}, "/subject"},
		{map[string]any{"subject": 5.0}, "/subject"},
		{map[string]any{}, "/subject"},
		{map[string]any{"subject": "a", "description": "123456"}, "/description"},
		{map[string]any{"subject": "a", "description": "\xff"}, "/description"},
		{map[string]any{"subject": "a", "blocked_by": []any{"task_aaaaaaaaaaaa", "task_aaaaaaaaaaab"}}, "/blocked_by"},
		{map[string]any{"subject": "a", "blocked_by": "task_aaaaaaaaaaaa"}, "/blocked_by"},
	}
	for _, c := range cases {
		_, err := f.tools["task-create"].Prepare(t.Context(), e, c.args)
		if ae := asArgError(t, err); ae.Pointer != c.pointer {
			t.Errorf("%v: %+v, want an error on %s", c.args, ae, c.pointer)
		}
	}
	// Up to the limit in characters, not bytes.
	f.mustTask(t, "task-create", e, `{"subject":"ééééé","description":"a\nb\tc"}`)
}

func TestUpdateMustChangeSomething(t *testing.T) {
	f := newFixture(t, task.Options{})
	e := env("acme", "s-1")
	a := f.mustTask(t, "task-create", e, `{"subject":"a"}`)
	b := f.mustTask(t, "task-create", e, `{"subject":"b"}`)
	for args, pointer := range map[string]string{
		`{"task_id":"` + a.ID + `"}`: "",
		`{"task_id":"` + a.ID + `","add_blocked_by":[],"remove_blocked_by":[]}`:                             "",
		`{"task_id":"` + a.ID + `","add_blocked_by":["` + b.ID + `"],"remove_blocked_by":["` + b.ID + `"]}`: "/remove_blocked_by/0",
	} {
		_, err := f.call(t, "task-update", e, args)
		if ae := asArgError(t, err); ae.Pointer != pointer {
			t.Errorf("%s: %+v, want an error on %q", args, ae, pointer)
		}
	}
}

func TestDependencyCyclesAreRefusedAtPrepare(t *testing.T) {
	f := newFixture(t, task.Options{})
	e := env("acme", "s-1")
	a := f.mustTask(t, "task-create", e, `{"subject":"a"}`)
	b := f.mustTask(t, "task-create", e, `{"subject":"b","blocked_by":["`+a.ID+`"]}`)
	c := f.mustTask(t, "task-create", e, `{"subject":"c","blocked_by":["`+b.ID+`"]}`)
	for name, args := range map[string]string{
		"self":      `{"task_id":"` + a.ID + `","add_blocked_by":["` + a.ID + `"]}`,
		"direct":    `{"task_id":"` + a.ID + `","add_blocked_by":["` + b.ID + `"]}`,
		"two steps": `{"task_id":"` + a.ID + `","add_blocked_by":["` + c.ID + `"]}`,
	} {
		_, err := f.call(t, "task-update", e, args)
		if ae := asArgError(t, err); ae.Pointer != "/add_blocked_by" || !strings.HasPrefix(ae.Rule, "cycle:") {
			t.Errorf("%s: %+v, want a cycle error", name, ae)
		}
	}
	// A diamond is fine, and re-adding an existing dependency changes nothing.
	d := f.mustTask(t, "task-update", e, `{"task_id":"`+c.ID+`","add_blocked_by":["`+a.ID+`","`+b.ID+`"]}`)
	if !reflect.DeepEqual(d.BlockedBy, []string{b.ID, a.ID}) {
		t.Fatalf("blocked_by = %v", d.BlockedBy)
	}
}

func TestTheCountLimitIsEnforcedAtRun(t *testing.T) {
	f := newFixture(t, task.Options{})
	e := env("acme", "s-1")
	for i := range task.DefaultMaxTasks {
		f.mustTask(t, "task-create", e, fmt.Sprintf(`{"subject":"task %d"}`, i))
	}
	// Prepare does not count: the limit is a property of the store at
	// write time, not of the arguments.
	create := f.tools["task-create"]
	plan, err := create.Prepare(t.Context(), e, map[string]any{"subject": "one too many"})
	if err != nil {
		t.Fatalf("Prepare at the limit: %v", err)
	}
	_, err = create.Run(t.Context(), e, plan.Artifact, create.Spec().Limits)
	if msg := modelMessage(t, err); msg != "limit_exceeded: a session may hold at most 100 tasks" {
		t.Fatalf("Run past the limit: %q", msg)
	}
	if n, _ := f.store.Count(t.Context(), "acme", "s-1"); n != 100 {
		t.Fatalf("count = %d after the refused create", n)
	}
	// Other sessions have their own budget.
	f.mustTask(t, "task-create", env("acme", "s-2"), `{"subject":"fine"}`)
}

func TestTwoPreparedCreatesCannotBothTakeTheLastSlot(t *testing.T) {
	f := newFixture(t, task.Options{MaxTasks: 2})
	e := env("acme", "s-1")
	f.mustTask(t, "task-create", e, `{"subject":"a"}`)
	create := f.tools["task-create"]
	p1, err1 := create.Prepare(t.Context(), e, map[string]any{"subject": "b"})
	p2, err2 := create.Prepare(t.Context(), e, map[string]any{"subject": "c"})
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if _, err := create.Run(t.Context(), e, p1.Artifact, create.Spec().Limits); err != nil {
		t.Fatal(err)
	}
	_, err := create.Run(t.Context(), e, p2.Artifact, create.Spec().Limits)
	if msg := modelMessage(t, err); msg != "limit_exceeded: a session may hold at most 2 tasks" {
		t.Fatalf("second run: %q", msg)
	}
}

func TestTheDependencyLimitCoversTheResultOfAnUpdate(t *testing.T) {
	f := newFixture(t, task.Options{MaxDependencies: 2})
	e := env("acme", "s-1")
	var ids []string
	for i := range 3 {
		ids = append(ids, f.mustTask(t, "task-create", e, fmt.Sprintf(`{"subject":"dep %d"}`, i)).ID)
	}
	x := f.mustTask(t, "task-create", e, `{"subject":"x","blocked_by":["`+ids[0]+`","`+ids[1]+`"]}`)
	_, err := f.call(t, "task-update", e, `{"task_id":"`+x.ID+`","add_blocked_by":["`+ids[2]+`"]}`)
	if ae := asArgError(t, err); ae.Pointer != "/add_blocked_by" || !strings.Contains(ae.Rule, "at most 2") {
		t.Fatalf("third dependency: %+v", ae)
	}
	// Swapping one for another stays within the limit.
	u := f.mustTask(t, "task-update", e, `{"task_id":"`+x.ID+`","add_blocked_by":["`+ids[2]+`"],"remove_blocked_by":["`+ids[0]+`"]}`)
	if !reflect.DeepEqual(u.BlockedBy, []string{ids[1], ids[2]}) {
		t.Fatalf("blocked_by = %v", u.BlockedBy)
	}
}

// What Prepare checked can change before Run; Run then writes nothing and
// tells the model to read again.
func TestRunReportsAConflictWhenTheSessionChangedAfterPrepare(t *testing.T) {
	f := newFixture(t, task.Options{})
	e := env("acme", "s-1")
	a := f.mustTask(t, "task-create", e, `{"subject":"a"}`)
	b := f.mustTask(t, "task-create", e, `{"subject":"b"}`)
	update := f.tools["task-update"]
	prep := func(args string) tools.Plan {
		t.Helper()
		p, err := update.Prepare(t.Context(), e, decodeArgs(t, args))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	run := func(p tools.Plan) error {
		_, err := update.Run(t.Context(), e, p.Artifact, update.Spec().Limits)
		return err
	}

	stale := prep(`{"task_id":"` + a.ID + `","subject":"stale"}`)
	f.mustTask(t, "task-update", e, `{"task_id":"`+a.ID+`","subject":"fresh"}`)
	err := run(stale)
	if msg := modelMessage(t, err); msg != "conflict: the task changed; read it again" || !errors.Is(err, tools.ErrTargetChanged) {
		t.Fatalf("stale update: %q, %v", msg, err)
	}
	if got := f.mustTask(t, "task-get", e, `{"task_id":"`+a.ID+`"}`); got.Subject != "fresh" {
		t.Fatalf("stale update was written: %+v", got)
	}

	// Each alone is acyclic; together they would be a cycle.
	ab := prep(`{"task_id":"` + a.ID + `","add_blocked_by":["` + b.ID + `"]}`)
	ba := prep(`{"task_id":"` + b.ID + `","add_blocked_by":["` + a.ID + `"]}`)
	if err := run(ab); err != nil {
		t.Fatal(err)
	}
	if msg := modelMessage(t, run(ba)); msg != "conflict: the task changed; read it again" {
		t.Fatalf("second half of a cycle: %q", msg)
	}
	if got := f.mustTask(t, "task-get", e, `{"task_id":"`+b.ID+`"}`); len(got.BlockedBy) != 0 {
		t.Fatalf("cycle was written: %+v", got)
	}
}

func TestAnArtifactRunsOnlyInTheSessionItWasPreparedFor(t *testing.T) {
	f := newFixture(t, task.Options{})
	e := env("acme", "s-1")
	a := f.mustTask(t, "task-create", e, `{"subject":"a"}`)
	for name, args := range map[string]string{
		"task-create": `{"subject":"x"}`,
		"task-update": `{"task_id":"` + a.ID + `","status":"completed"}`,
		"task-get":    `{"task_id":"` + a.ID + `"}`,
		"task-list":   `{}`,
	} {
		tool := f.tools[name]
		plan, err := tool.Prepare(t.Context(), e, decodeArgs(t, args))
		if err != nil {
			t.Fatal(err)
		}
		for _, other := range []*tools.Env{env("acme", "s-2"), env("globex", "s-1")} {
			if _, err := tool.Run(t.Context(), other, plan.Artifact, tool.Spec().Limits); !errors.Is(err, tools.ErrTargetChanged) {
				t.Errorf("%s run in %s/%s: %v, want ErrTargetChanged", name, other.Tenant, other.SessionID, err)
			}
		}
		if _, err := tool.Run(t.Context(), e, "forged", tool.Spec().Limits); err == nil {
			t.Errorf("%s ran a foreign artifact", name)
		}
	}
}

func TestLargeResultsStayValidJSONWithinTheOutputCap(t *testing.T) {
	f := newFixture(t, task.Options{})
	e := env("acme", "s-1")
	desc := strings.Repeat("\"quoted\" ", 440) // 3960 characters, more bytes once escaped
	var ids []string
	for i := range 30 {
		ids = append(ids, f.mustTask(t, "task-create", e, fmt.Sprintf(`{"subject":"task %d","description":%q}`, i, desc)).ID)
	}
	run := func(name, args string, max int) tools.Result {
		t.Helper()
		tool := f.tools[name]
		plan, err := tool.Prepare(t.Context(), e, decodeArgs(t, args))
		if err != nil {
			t.Fatal(err)
		}
		res, err := tool.Run(t.Context(), e, plan.Artifact, tools.Limits{MaxOutputBytes: max})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Content) > max {
			t.Fatalf("%s: %d bytes of content over a cap of %d", name, len(res.Content), max)
		}
		sameData(t, res)
		return res
	}

	res := run("task-get", `{"task_id":"`+ids[0]+`"}`, 1000)
	var o object
	decodeStrict(t, res.Content, &o)
	if o.ID != ids[0] || o.Description != nil || !o.Truncated || !res.Truncated {
		t.Fatalf("task over the cap: %s", res.Content)
	}

	res = run("task-list", `{}`, 64<<10) // all fit once descriptions go
	var l list
	decodeStrict(t, res.Content, &l)
	if len(l.Tasks) != 30 || !l.DescriptionsOmitted || l.Truncated || l.Tasks[0].Description != nil {
		t.Fatalf("list without descriptions: %d tasks, %+v", len(l.Tasks), l)
	}

	res = run("task-list", `{}`, 2000) // only some fit even without
	l = list{}
	decodeStrict(t, res.Content, &l)
	if len(l.Tasks) == 0 || len(l.Tasks) >= 30 || !l.Truncated || l.Total != 30 || l.Tasks[0].ID != ids[0] {
		t.Fatalf("cut list: %d tasks, %+v", len(l.Tasks), l)
	}

	res = run("task-list", `{}`, 1<<20) // everything fits
	l = list{}
	decodeStrict(t, res.Content, &l)
	if len(l.Tasks) != 30 || l.DescriptionsOmitted || *l.Tasks[29].Description != desc || res.Truncated {
		t.Fatalf("full list: %d tasks", len(l.Tasks))
	}
}

func TestNewIDsAreOpaqueAndWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := task.NewID()
		if !task.ValidID(id) || seen[id] {
			t.Fatalf("NewID() = %q (seen before: %v)", id, seen[id])
		}
		seen[id] = true
	}
}

func TestAnIdCollisionIsRedrawn(t *testing.T) {
	ids := []string{"task_aaaaaaaaaaaa", "task_aaaaaaaaaaaa", "task_bbbbbbbbbbbb"}
	n := 0
	f := newFixture(t, task.Options{NewID: func() string { n++; return ids[n-1] }})
	e := env("acme", "s-1")
	if got := f.mustTask(t, "task-create", e, `{"subject":"a"}`); got.ID != ids[0] {
		t.Fatal(got.ID)
	}
	if got := f.mustTask(t, "task-create", e, `{"subject":"b"}`); got.ID != ids[2] {
		t.Fatalf("second id %s, want the redrawn %s", got.ID, ids[2])
	}
	bad := newFixture(t, task.Options{NewID: func() string { return "42" }})
	if _, err := bad.call(t, "task-create", e, `{"subject":"a"}`); err == nil {
		t.Fatal("an id of the wrong form was stored")
	}
}
