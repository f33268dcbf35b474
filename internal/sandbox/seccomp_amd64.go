//go:build linux && amd64

package sandbox

import "golang.org/x/sys/unix"

const (
	seccompArchSupported = true
	auditArch            = unix.AUDIT_ARCH_X86_64
	hasX32               = true
)
