package shell

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/command"
	"github.com/toolgate/toolgate/internal/sandbox"
)

// TestMain lets the test binary act as the jail helper, as the gateway
// binary does: every stage of a jail is this binary with the sandbox-exec
// sub-command first.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.SubCommand {
		os.Exit(sandbox.Main(os.Args[2:], sandbox.Payloads{command.PayloadName: command.RunInJail}))
	}
	os.Exit(m.Run())
}

var (
	jailerOnce sync.Once
	jailer     *sandbox.Jailer
	jailerErr  error
)

// testJailer is the one jailer of the test binary, whose jails the
// dedicated helper (cmd/toolgate-sandbox, built once) builds: the test
// binary would do too, but it is larger and, under the race detector,
// instrumented, which makes every jail slow to start. The project's
// machines build the jail; a kernel that cannot is a failure here, not a
// skip.
func testJailer(t testing.TB) *sandbox.Jailer {
	t.Helper()
	jailerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "toolgate-shell-test-helper-")
		if err != nil {
			jailerErr = err
			return
		}
		helper := filepath.Join(dir, "toolgate-sandbox")
		if out, err := exec.Command("go", "build", "-o", helper, "../../../cmd/toolgate-sandbox").CombinedOutput(); err != nil {
			jailerErr = fmt.Errorf("building the helper: %v\n%s", err, out)
			return
		}
		jailer, _, jailerErr = sandbox.NewJailer(sandbox.JailerOptions{Self: helper})
	})
	if jailerErr != nil {
		t.Fatalf("NewJailer: %v", jailerErr)
	}
	return jailer
}
