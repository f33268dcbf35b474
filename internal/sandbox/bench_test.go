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
