//go:build linux && arm64

package sandbox

import "golang.org/x/sys/unix"

const (
	seccompArchSupported = true
	auditArch            = unix.AUDIT_ARCH_AARCH64
	hasX32               = false
)

// modeSyscalls are the calls that set a file's mode, with the index of
// their mode argument.
var modeSyscalls = []struct {
	nr  uint32
	arg uint32
}{
	{unix.SYS_FCHMOD, 1}, {unix.SYS_FCHMODAT, 2}, {unix.SYS_FCHMODAT2, 2},
	{unix.SYS_OPENAT, 3}, {unix.SYS_MKNODAT, 2},
}
