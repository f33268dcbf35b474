package shell

import (
	"context"
	"os/exec"
	"testing"
)

func benchBash(b *testing.B, command string) {
	sh := newTestShell(b, Options{})
	env, _ := testEnv(b, "acme", "s-1")
	tool := bashTool(sh)
	args := map[string]any{"command": command}
	lim := tool.Spec().Limits
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		plan, err := tool.Prepare(ctx, env, args)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tool.Run(ctx, env, plan.Artifact, lim); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBashEcho measures Prepare+Run of a builtin: parsing, analysis
// and the interpreter, no process.
func BenchmarkBashEcho(b *testing.B) { benchBash(b, "echo hi") }

// BenchmarkBashTrue measures Prepare+Run of one executed program (true is
// an interpreter builtin, so the path forces an exec).
func BenchmarkBashTrue(b *testing.B) { benchBash(b, "/bin/true") }

// BenchmarkExecTrue is the same program run directly, for comparison.
func BenchmarkExecTrue(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}
