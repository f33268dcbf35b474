package sandbox

import (
	"os"
	"os/exec"
	"testing"
)

// BenchmarkRunTrue measures the cost of confinement per executed command:
// /bin/true run directly versus through the re-exec helper. The helper here
// is the test binary; the gateway binary has more package init work, so
// measure it there too.
func BenchmarkRunTrue(b *testing.B) {
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, bc := range []struct {
		name string
		p    Policy
	}{
		{"confined-no-network", Policy{WritableDirs: []string{b.TempDir()}}},
		{"confined-network", Policy{WritableDirs: []string{b.TempDir()}, Network: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			requireLandlock(b, 1)
			env := append(os.Environ(), envHelper+"=1")
			for b.Loop() {
				cmd := exec.Command("/bin/true")
				cmd.Env = env
				if err := Wrap(cmd, bc.p, ""); err != nil {
					b.Fatal(err)
				}
				if err := cmd.Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkJailRunTrue is the per-program cost of the jail: /bin/true
// started in a fresh jail (namespaces, the filesystem view of a small
// workspace with hidden and write paths, Landlock, seccomp, limits) and
// waited for. The helper here is the test binary; BENCHMARKS.md also
// measures the gateway binary, whose package initialisation adds to it.
func BenchmarkJailRunTrue(b *testing.B) {
	j := testJailer(b)
	ws := b.TempDir()
	for _, d := range []string{"src", "secrets", "notes"} {
		if err := os.MkdirAll(ws+"/"+d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	env := append(os.Environ(), envHelper+"=1")
	jl := Jail{Workspace: ws, Programs: []string{"/bin/true"}, Hide: []string{"secrets", "secrets/**"}, WritePaths: []string{"notes/**"}}
	for b.Loop() {
		cmd := exec.Command("/bin/true")
		cmd.Env = env
		cmd.Dir = ws
		release, err := j.Wrap(cmd, jl)
		if err != nil {
			b.Fatal(err)
		}
		err = cmd.Start()
		release()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
	}
}
