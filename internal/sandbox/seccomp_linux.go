package sandbox

import (
	"errors"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock's network rights cover TCP only, and on Linux 6.18 (erratum 1
// applied) not even IPPROTO_MPTCP sockets, which fall back to plain TCP with
// any peer: "curl --mptcp" would walk past a Landlock-only "no network".
// So a command without network also gets a seccomp filter that refuses to
// create any socket but AF_UNIX (no IP, raw, packet, vsock or netlink
// socket) and refuses io_uring, whose IORING_OP_SOCKET creates sockets
// without the socket syscall.

// seccomp_data offsets (struct seccomp_data in linux/seccomp.h).
const (
	seccompDataNr   = 0
	seccompDataArch = 4
	seccompDataArg0 = 16 // low 32 bits on little-endian, the only kind supported
)

// x32SyscallBit marks x32 syscalls, which share AUDIT_ARCH_X86_64 and so
// must be refused separately.
const x32SyscallBit = 0x40000000

func bpfStmt(code uint16, k uint32) unix.SockFilter {
	return unix.SockFilter{Code: code, K: k}
}

func bpfJump(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
}

// A jail adds, whatever its network: no executable memory file, no
// set-user-ID or set-group-ID mode, no openat2, no new user namespace (unshare or
// clone with CLONE_NEWUSER fail with EPERM; clone3, whose flags a filter
// cannot read, fails with ENOSYS so libc falls back to clone), and no
// kernel keyring calls (keyrings are not namespaced). A user namespace
// would give a jailed program capabilities over new namespaces of its own
// and with them much more of the kernel to attack.

// noNetworkFilter builds the filter of the Landlock-only mode.
func noNetworkFilter() []unix.SockFilter { return seccompFilter(false, false) }

// seccompFilter builds the BPF program for this arch: the socket rules
// unless network, and the jail rules when jail.
func seccompFilter(network, jail bool) []unix.SockFilter {
	const (
		ld   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
	)
	allow := bpfStmt(ret, unix.SECCOMP_RET_ALLOW)
	errno := func(e unix.Errno) unix.SockFilter { return bpfStmt(ret, unix.SECCOMP_RET_ERRNO|uint32(e)) }
	prog := []unix.SockFilter{
		// A syscall of a foreign ABI (e.g. i386 on amd64) would dodge the
		// syscall numbers below: kill instead.
		bpfStmt(ld, seccompDataArch),
		bpfJump(jeq, auditArch, 1, 0),
		bpfStmt(ret, unix.SECCOMP_RET_KILL_PROCESS),
		bpfStmt(ld, seccompDataNr),
	}
	if hasX32 {
		prog = append(prog,
			bpfJump(jge, x32SyscallBit, 0, 1),
			errno(unix.ENOSYS),
		)
	}
	// Each refused call: "if nr == n return errno", two instructions.
	refuse := func(nr uint32, e unix.Errno) {
		prog = append(prog, bpfJump(jeq, nr, 0, 1), errno(e))
	}
	refuse(unix.SYS_IO_URING_SETUP, unix.ENOSYS)
	if jail {
		refuse(unix.SYS_CLONE3, unix.ENOSYS)
		// openat2 takes its mode in a structure a filter cannot read:
		// callers fall back to openat, whose mode it can.
		refuse(unix.SYS_OPENAT2, unix.ENOSYS)
		// memfd_create: an executable memory file is a program nothing
		// approved (Landlock does not check files of internal mounts). Only
		// MFD_NOEXEC_SEAL memory files are created; MFD_EXEC is refused.
		prog = append(prog,
			bpfJump(jeq, unix.SYS_MEMFD_CREATE, 0, 6),
			bpfStmt(ld, seccompDataArg0+8),
			bpfJump(jset, unix.MFD_EXEC, 2, 0),
			bpfJump(jset, unix.MFD_NOEXEC_SEAL, 2, 0),
			errno(unix.ENOSYS),
			errno(unix.EPERM),
			allow,
		)
		// No set-user-ID or set-group-ID bit, by any call that sets a mode:
		// such a file would be a privileged program on the host.
		for _, m := range modeSyscalls {
			prog = append(prog,
				bpfJump(jeq, m.nr, 0, 4),
				bpfStmt(ld, seccompDataArg0+8*m.arg),
				bpfJump(jset, unix.S_ISUID|unix.S_ISGID, 0, 1),
				errno(unix.EPERM),
				allow,
			)
		}
		refuse(unix.SYS_KEYCTL, unix.EPERM)
		refuse(unix.SYS_ADD_KEY, unix.EPERM)
		refuse(unix.SYS_REQUEST_KEY, unix.EPERM)
		for _, nr := range []uint32{unix.SYS_UNSHARE, unix.SYS_CLONE} {
			// if nr == n { if arg0 & CLONE_NEWUSER return EPERM; allow }
			prog = append(prog,
				bpfJump(jeq, nr, 0, 4),
				bpfStmt(ld, seccompDataArg0),
				bpfJump(jset, unix.CLONE_NEWUSER, 0, 1),
				errno(unix.EPERM),
				allow,
			)
		}
	}
	if network {
		return append(prog, allow)
	}
	return append(prog,
		bpfJump(jeq, unix.SYS_SOCKET, 1, 0),
		allow,
		bpfStmt(ld, seccompDataArg0),
		bpfJump(jeq, unix.AF_UNIX, 0, 1),
		allow,
		errno(unix.EACCES),
	)
}

// seccompAvailable reports whether this kernel and arch can take the
// filter. PR_GET_SECCOMP fails with EINVAL when seccomp is not built in.
func seccompAvailable() error {
	if !seccompArchSupported {
		return errors.New("no seccomp filter for this CPU architecture")
	}
	if _, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err != nil {
		return errors.New("seccomp unavailable: " + err.Error())
	}
	return nil
}

// installNoNetworkFilter applies the Landlock-only mode's filter to the
// calling thread, which must already have no_new_privs set.
func installNoNetworkFilter() error { return installFilter(noNetworkFilter()) }

// installJailFilter applies a jail's filter to the calling thread, which
// must already have no_new_privs set.
func installJailFilter(network bool) error { return installFilter(seccompFilter(network, true)) }

func installFilter(filter []unix.SockFilter) error {
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	return unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0)
}
