//go:build linux && !amd64 && !arm64

package sandbox

// Other architectures get no seccomp filter (socketcall on 32-bit ABIs and
// big-endian argument layouts would need their own programs), so Probe
// reports the network as not confined there.
const (
	seccompArchSupported = false
	auditArch            = 0
	hasX32               = false
)

var modeSyscalls []struct {
	nr  uint32
	arg uint32
}
