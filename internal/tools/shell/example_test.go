package shell_test

import (
	"context"
	"fmt"
	"os"

	"github.com/toolgate/toolgate/internal/tools"
	"github.com/toolgate/toolgate/internal/tools/shell"
)

// The command resource shows policy every simple command; quoted operators
// stay inside their word.
func Example() {
	sh, err := shell.New(shell.Options{})
	if err != nil {
		panic(err)
	}
	defer sh.Close() // at gateway shutdown: ends every process tree

	dir, _ := os.MkdirTemp("", "ws")
	defer os.RemoveAll(dir)
	ws, _ := tools.OpenWorkspace(dir)
	defer ws.Close()
	env := &tools.Env{Tenant: "acme", SessionID: "s-1", Workspace: ws}

	bash := sh.Tools()[0]
	plan, err := bash.Prepare(context.Background(), env, map[string]any{"command": `git log -1; echo "a;b" | wc -c`})
	if err != nil {
		panic(err)
	}
	r := plan.Resources[0]
	fmt.Println(r["segments"], r["plain"], r["constructs"])

	plan, _ = bash.Prepare(context.Background(), env, map[string]any{"command": "echo $(whoami) > out"})
	r = plan.Resources[0]
	fmt.Println(r["segments"], r["plain"], r["constructs"])
	// Output:
	// [[git log -1] [echo a;b] [wc -c]] true []
	// [[echo $(whoami)] [whoami]] false [command_substitution redirect]
}
