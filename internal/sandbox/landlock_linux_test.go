package sandbox

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestRightsForMasksToABI(t *testing.T) {
	for abi := 0; abi <= 8; abi++ {
		r := rightsFor(abi)
		if abi == 0 {
			if r != (abiRights{}) {
				t.Fatalf("ABI 0 has rights %+v", r)
			}
			continue
		}
		if r.fs&fsRightsV1 != fsRightsV1 {
			t.Errorf("ABI %d lacks ABI 1 rights", abi)
		}
		checks := []struct {
			name  string
			since int
			has   bool
		}{
			{"refer", 2, r.fs&unix.LANDLOCK_ACCESS_FS_REFER != 0},
			{"truncate", 3, r.fs&unix.LANDLOCK_ACCESS_FS_TRUNCATE != 0},
			{"tcp", 4, r.net == netTCPRights},
			{"ioctl_dev", 5, r.fs&unix.LANDLOCK_ACCESS_FS_IOCTL_DEV != 0},
			{"scoping", 6, r.scoped != 0},
		}
		for _, c := range checks {
			if c.has != (abi >= c.since) {
				t.Errorf("ABI %d: %s present = %v", abi, c.name, c.has)
			}
		}
	}
}
