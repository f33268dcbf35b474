package decision_test

import (
	"context"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/toolgate/toolgate/internal/decision"
)

func Example() {
	ctx := context.Background()
	engine := decision.NewEngine(decision.Options{Dir: "../../policies"})
	if err := engine.Load(ctx); err != nil {
		fmt.Println(err)
		return
	}
	// go engine.Watch(ctx) // hot reload

	// One revision per request: it stays valid even if a reload swaps in a
	// newer one meanwhile.
	rev, err := engine.Current()
	if err != nil {
		fmt.Println(err)
		return
	}
	input := ast.MustParseTerm(`{
		"tenant": "acme",
		"principal": {"id": "alice", "roles": ["viewer"], "groups": [], "claims": {}},
		"client": {"id": "platform-a"},
		"session_id": "s-1",
		"tool": {"name": "read-file", "kind": "builtin", "effects": ["fs.read"], "annotations": {}},
		"action": "fs.read",
		"resources": [{"type": "file", "path": "secrets/db.env", "access": "read"}],
		"args": {"path": "secrets/db.env"}
	}`).Value

	offered, err := rev.Available(ctx, input)
	fmt.Println("offered:", offered, err)

	d, err := rev.Decide(ctx, input)
	fmt.Println("allow:", d.Allow, err)
	fmt.Println("message:", d.Message)
	fmt.Println("max output:", d.Obligations.MaxOutputBytes)
	// Output:
	// offered: true <nil>
	// allow: false <nil>
	// message: access to secrets/db.env is not allowed: the path is protected
	// max output: 32768
}
