package sandbox

import "sync"

// cachedProbe holds the one probe of the process: what the kernel supports
// cannot change while the process runs, and asking costs a few syscalls.
// It is the package's only state, and it is a fact about the host, not
// configuration.
var cachedProbe = sync.OnceValue(probeKernel)

// Probe reports what confinement the running kernel supports. The result is
// computed once per process and then cached. It never claims a mechanism
// whose syscalls did not answer: on any error it reports MechanismNone with
// a Reason.
func Probe() Status {
	return cachedProbe()
}
