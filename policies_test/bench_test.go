package policies_test

import (
	"context"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/toolgate/toolgate/internal/decision"
)

// issue3Calls are decisions of the shipped pack for the command, network,
// process and task tools, as the gateway's engine makes them (strict
// built-in errors on).
var issue3Calls = []struct {
	name, tool, resources, args string
	allow, approval             bool
}{
	{"bash/allow", "bash",
		`[{"type":"command","command":"git log -1 | wc -l","segments":[["git","log","-1"],["wc","-l"]],"plain":true,"constructs":[],"cwd":".","background":false}]`,
		`{"command":"git log -1 | wc -l","timeout_ms":30000,"background":false}`, true, false},
	{"bash/arguments", "bash",
		`[{"type":"command","command":"cat src/a.go notes/b.md","segments":[["cat","src/a.go","notes/b.md"]],"plain":true,"constructs":[],"cwd":".","background":false},` +
			`{"type":"file","path":"notes/b.md","access":"command"},{"type":"file","path":"src/a.go","access":"command"}]`,
		`{"command":"cat src/a.go notes/b.md","timeout_ms":30000,"background":false}`, true, false},
	{"bash/protected-argument", "bash",
		`[{"type":"command","command":"cat secrets/db.env","segments":[["cat","secrets/db.env"]],"plain":true,"constructs":[],"cwd":".","background":false},` +
			`{"type":"file","path":"secrets/db.env","access":"command"}]`,
		`{"command":"cat secrets/db.env","timeout_ms":30000,"background":false}`, false, false},
	{"bash/approval", "bash",
		`[{"type":"command","command":"git push origin","segments":[["git","push","origin"]],"plain":true,"constructs":[],"cwd":".","background":false}]`,
		`{"command":"git push origin","timeout_ms":30000,"background":false}`, true, true},
	{"bash/forbidden", "bash",
		`[{"type":"command","command":"git log; rm -rf x","segments":[["git","log"],["rm","-rf","x"]],"plain":true,"constructs":[],"cwd":".","background":false}]`,
		`{"command":"git log; rm -rf x","timeout_ms":30000,"background":false}`, false, false},
	{"fetch/get", "fetch",
		`[{"type":"url","url":"https://api.github.com/repos","scheme":"https","host":"api.github.com","port":443,"path":"/repos","method":"GET","addresses":[{"ip":"140.82.112.6","class":"public"}],"address_class":"public"}]`,
		`{"url":"https://api.github.com/repos","method":"GET","headers":{}}`, true, false},
	{"process-output", "process-output",
		`[{"type":"process","id":"proc_ABCDEFGHIJKLMNOP","owner":"alice","command":"sleep 30","segments":[["sleep","30"]]}]`,
		`{"process_id":"proc_ABCDEFGHIJKLMNOP"}`, true, false},
	{"process-output/another-owner", "process-output",
		`[{"type":"process","id":"proc_ABCDEFGHIJKLMNOP","owner":"bob","command":"sleep 30","segments":[["sleep","30"]]}]`,
		`{"process_id":"proc_ABCDEFGHIJKLMNOP"}`, false, false},
	{"task-get", "task-get",
		`[{"type":"task","id":"task_abcdefghijkl","session":"s-1","owner":"alice"}]`,
		`{"task_id":"task_abcdefghijkl"}`, true, false},
	{"task-list/another-owner", "task-list",
		`[{"type":"task_list","session":"s-1","owner":"bob"}]`,
		`{"owner":"bob"}`, false, false},
}

// concealed names the issue3Calls the pack denies as if the target did
// not exist.
var concealed = map[string]bool{"process-output/another-owner": true}

func issue3Request(tb testing.TB, tool, resources, args string) ast.Value {
	tb.Helper()
	doc := `{"version":1,"tenant":"acme","principal":{"id":"alice","roles":["developer"],"groups":[],"claims":{}},` +
		`"client":{"id":"platform-a"},"session_id":"s-1","call_id":"c-1",` +
		`"tool":{"name":"` + tool + `","kind":"builtin","effects":[],"annotations":{"read_only":false,"destructive":false,"idempotent":false,"open_world":false}},` +
		`"action":"x","resources":` + resources + `,"args":` + args + `,"digest":"sha256:0000"}`
	v, err := ast.ParseTerm(doc)
	if err != nil {
		tb.Fatalf("parse %s: %v", doc, err)
	}
	return v.Value
}

func shippedRevision(tb testing.TB) *decision.Revision {
	tb.Helper()
	e := decision.NewEngine(decision.Options{Dir: "../policies"})
	if err := e.Load(context.Background()); err != nil {
		tb.Fatalf("Load: %v", err)
	}
	rev, err := e.Current()
	if err != nil {
		tb.Fatal(err)
	}
	return rev
}

func TestEngineDecidesIssue3Tools(t *testing.T) {
	rev := shippedRevision(t)
	for _, c := range issue3Calls {
		t.Run(c.name, func(t *testing.T) {
			d, err := rev.Decide(context.Background(), issue3Request(t, c.tool, c.resources, c.args))
			if err != nil {
				t.Fatal(err)
			}
			if d.Allow != c.allow || d.ApprovalRequired != c.approval {
				t.Errorf("Decide = %+v; want allow %v, approval %v", d, c.allow, c.approval)
			}
			if d.Conceal != concealed[c.name] {
				t.Errorf("Decide = %+v; want conceal %v", d, concealed[c.name])
			}
		})
	}
}

func BenchmarkDecideIssue3(b *testing.B) {
	rev := shippedRevision(b)
	ctx := context.Background()
	for _, c := range issue3Calls {
		input := issue3Request(b, c.tool, c.resources, c.args)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rev.Decide(ctx, input); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
