//go:build linux && arm64

package sandbox

import "golang.org/x/sys/unix"

const (
	seccompArchSupported = true
	auditArch            = unix.AUDIT_ARCH_AARCH64
	hasX32               = false
)
