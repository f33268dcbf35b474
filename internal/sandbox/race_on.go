//go:build race

package sandbox

// raceEnabled: this helper is instrumented by the race detector (tests
// only), whose runtime maps more address space than RLIMIT_DATA allows a
// jail; see setLimits.
const raceEnabled = true
