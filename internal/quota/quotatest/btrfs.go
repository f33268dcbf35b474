// Package quotatest makes the btrfs filesystems the quota tests need.
package quotatest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// EnvBtrfs, set to 1, makes a missing prerequisite of Btrfs (root, loop
// devices, btrfs-progs) fail the test instead of skipping it: CI sets it,
// so that the btrfs tests cannot silently stop running.
const EnvBtrfs = "TOOLGATE_TEST_BTRFS"

// Btrfs makes a fresh btrfs filesystem in a loop-mounted file under
// t.TempDir(), with quotas enabled when quotas is true, and returns its
// mount point (traversable by every user, so that a jail's user or a
// non-root helper reaches it). It is unmounted when the test ends, after
// the cleanups registered later (a gateway using it) have run.
func Btrfs(t testing.TB, quotas bool) string {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		missing = append(missing, "loop devices (/dev/loop-control)")
	}
	for _, tool := range []string{"mkfs.btrfs", "btrfs", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool+" (btrfs-progs, util-linux)")
		}
	}
	if len(missing) > 0 {
		msg := "the btrfs tests need " + strings.Join(missing, ", ")
		if os.Getenv(EnvBtrfs) == "1" {
			t.Fatal(msg + " (" + EnvBtrfs + "=1)")
		}
		t.Skip(msg + "; set " + EnvBtrfs + "=1 to make this a failure")
	}
	dir := t.TempDir()
	// t.TempDir's folders are private to root; the mount point must be
	// reachable by other users.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	img, mnt := filepath.Join(dir, "btrfs.img"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Truncate(256 << 20) // sparse
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	run(t, "mkfs.btrfs", "-q", "-f", img)
	run(t, "mount", "-o", "loop", img, mnt)
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
			_ = exec.Command("umount", "-l", mnt).Run() // never leave it mounted
		}
	})
	if err := os.Chmod(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if quotas {
		run(t, "btrfs", "quota", "enable", mnt)
	}
	return mnt
}

// Run runs a command the test needs to succeed (btrfs-progs, as root).
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	return run(t, name, args...)
}

func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
