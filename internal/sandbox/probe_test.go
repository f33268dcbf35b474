package sandbox

import (
	"os/exec"
	"strings"
	"testing"
)

// Probe is consistent with itself: it never claims a mechanism without an
// ABI, nor network confinement below ABI 4, and "none" always says why.
func TestProbeNeverClaimsInactiveConfinement(t *testing.T) {
	st := Probe()
	kernel, _ := exec.Command("uname", "-r").Output()
	t.Logf("kernel %s, sandbox status %+v", strings.TrimSpace(string(kernel)), st)
	switch st.Mechanism {
	case MechanismLandlock:
		if st.ABI < 1 || !st.Filesystem {
			t.Fatalf("landlock without ABI or filesystem: %+v", st)
		}
		if st.Network != (seccompAvailable() == nil) {
			t.Fatalf("network confinement %v, but seccomp filter availability says %v", st.Network, seccompAvailable())
		}
	case MechanismNone:
		if st.Filesystem || st.Network || st.Reason == "" {
			t.Fatalf("none must claim nothing and give a reason: %+v", st)
		}
	default:
		t.Fatalf("unknown mechanism %q", st.Mechanism)
	}
	if again := Probe(); again != st {
		t.Fatalf("second probe %+v differs from first %+v", again, st)
	}
}

// requireLandlock skips a test that needs the kernel to confine, saying why.
func requireLandlock(t testing.TB, minABI int) Status {
	t.Helper()
	st := Probe()
	if st.Mechanism != MechanismLandlock {
		t.Skipf("confinement test skipped: Landlock unavailable (%s)", st.Reason)
	}
	if st.ABI < minABI {
		t.Skipf("confinement test skipped: needs Landlock ABI %d, kernel has %d", minABI, st.ABI)
	}
	return st
}
