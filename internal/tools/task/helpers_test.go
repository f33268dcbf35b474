package task_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/tools"
	"github.com/toolgate/toolgate/internal/tools/task"
)

// fixture is a store on a real SQLite file and the four tools over it.
type fixture struct {
	path    string
	store   handle
	opts    task.Options
	tools   map[string]tools.Tool
	schemas map[string]*jsonschema.Schema
}

// fixedClock ticks one millisecond per reading from a fixed start.
func fixedClock() func() time.Time {
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	return func() time.Time {
		at = at.Add(time.Millisecond)
		return at
	}
}

// handle is the task repository of a database the test opened, with the
// database's Close.
type handle struct {
	task.Store
	db *store.DB
}

func (h handle) Close() error { return h.db.Close() }

// openDB opens a database that closes when the test ends.
func openDB(t testing.TB, driver, dsn string) handle {
	t.Helper()
	db, err := store.Open(context.Background(), driver, dsn)
	if err != nil {
		t.Fatalf("store.Open(%s): %v", driver, err)
	}
	t.Cleanup(func() { db.Close() })
	return handle{db.Tasks(), db}
}

func openStore(t testing.TB, path string) handle { return openDB(t, store.SQLite, path) }

func newFixture(t testing.TB, opts task.Options) *fixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db", "audit.db")
	return fixtureOn(t, path, opts)
}

func fixtureOn(t testing.TB, path string, opts task.Options) *fixture {
	t.Helper()
	return fixtureFor(t, path, openStore(t, path), opts)
}

func fixtureFor(t testing.TB, path string, s handle, opts task.Options) *fixture {
	t.Helper()
	f := &fixture{path: path, store: s, opts: opts, tools: map[string]tools.Tool{}, schemas: map[string]*jsonschema.Schema{}}
	for _, tool := range task.Tools(f.store, opts) {
		f.tools[tool.Spec().Name] = tool
		f.schemas[tool.Spec().Name] = compileSchema(t, tool)
	}
	return f
}

func env(tenant, session string) *tools.Env {
	return &tools.Env{Tenant: tenant, Principal: "alice", SessionID: session}
}

// decodeArgs parses JSON arguments as the gateway's decoder does.
func decodeArgs(t testing.TB, raw string) map[string]any {
	t.Helper()
	var args map[string]any
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		t.Fatalf("test arguments %s: %v", raw, err)
	}
	return args
}

func compileSchema(t testing.TB, tool tools.Tool) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(tool.Spec().InputSchema))
	if err != nil {
		t.Fatalf("%s: schema is not JSON: %v", tool.Spec().Name, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	url := "mem://" + tool.Spec().Name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(url)
	if err != nil {
		t.Fatalf("%s: schema does not compile: %v", tool.Spec().Name, err)
	}
	return s
}

// errSchema marks arguments the published schema rejects.
var errSchema = errors.New("rejected by the input schema")

// call does what the gateway does with one call: validate raw against the
// tool's schema, Prepare, Run with the tool's own limits. It is safe to use
// from several goroutines.
func (f *fixture) call(t testing.TB, name string, e *tools.Env, raw string) (tools.Result, error) {
	tool := f.tools[name]
	var args map[string]any
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		return tools.Result{}, err
	}
	if err := f.schemas[name].Validate(args); err != nil {
		return tools.Result{}, errSchema
	}
	plan, err := tool.Prepare(context.Background(), e, args)
	if err != nil {
		return tools.Result{}, err
	}
	return tool.Run(context.Background(), e, plan.Artifact, tool.Spec().Limits)
}

// object is a task object as the model reads it.
type object struct {
	ID          string   `json:"id"`
	Subject     string   `json:"subject"`
	Description *string  `json:"description"`
	Status      string   `json:"status"`
	BlockedBy   []string `json:"blocked_by"`
	CreatedAt   string   `json:"created_at"`
	UpdatedAt   string   `json:"updated_at"`
	Truncated   bool     `json:"truncated"`
}

// mustTask calls a single-task tool and decodes its result, checking that
// Data is the same object as the content.
func (f *fixture) mustTask(t testing.TB, name string, e *tools.Env, raw string) object {
	t.Helper()
	res, err := f.call(t, name, e, raw)
	if err != nil {
		t.Fatalf("%s %s: %v", name, raw, err)
	}
	var o object
	decodeStrict(t, res.Content, &o)
	sameData(t, res)
	return o
}

type list struct {
	Tasks               []object `json:"tasks"`
	DescriptionsOmitted bool     `json:"descriptions_omitted"`
	Truncated           bool     `json:"truncated"`
	Total               int      `json:"total"`
}

func (f *fixture) mustList(t testing.TB, e *tools.Env, raw string) list {
	t.Helper()
	res, err := f.call(t, "task-list", e, raw)
	if err != nil {
		t.Fatalf("task-list %s: %v", raw, err)
	}
	var l list
	decodeStrict(t, res.Content, &l)
	sameData(t, res)
	return l
}

func decodeStrict(t testing.TB, content string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(content))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("result is not the documented JSON: %v\n%s", err, content)
	}
}

// sameData checks that Result.Data encodes to the same JSON as Content.
func sameData(t testing.TB, res tools.Result) {
	t.Helper()
	var content any
	if err := json.Unmarshal([]byte(res.Content), &content); err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(content)
	b, err := json.Marshal(res.Data)
	if err != nil || string(a) != string(b) {
		t.Fatalf("Data differs from Content:\n%s\n%s (%v)", b, a, err)
	}
}

// asArgError returns err as an *tools.ArgError or fails.
func asArgError(t testing.TB, err error) *tools.ArgError {
	t.Helper()
	var ae *tools.ArgError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T), want *tools.ArgError", err, err)
	}
	return ae
}

// modelMessage returns what the model would read for a Run error.
func modelMessage(t testing.TB, err error) string {
	t.Helper()
	var me *tools.ModelError
	if !errors.As(err, &me) {
		t.Fatalf("error %v (%T), want a *tools.ModelError", err, err)
	}
	return me.Message
}
