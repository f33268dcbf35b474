// Package sandbox confines the commands the gateway executes with the
// operating system's own mechanism, so that a command policy allowed can
// still write only inside the directories it was given and, when policy says
// so, cannot reach the network.
//
// On Linux the mechanism is Landlock. A process can only restrict itself, so
// confinement goes through a re-exec helper: [Wrap] rewrites an *exec.Cmd to
// run the gateway binary's hidden sub-command
//
//	gateway sandbox-exec --write=DIR... [--read=DIR...] [--net] [--argv0=NAME] -- PROGRAM ARGS...
//
// whose entry point is [Main]. Main builds a Landlock ruleset, sets
// no_new_privs, restricts itself, adds a seccomp filter that refuses
// non-unix sockets when the policy denies the network (Landlock alone covers
// only plain TCP: MPTCP, UDP and raw sockets pass it), and then execve's
// PROGRAM in place, so the pid, process group, working directory,
// environment and inherited file descriptors of the command are the ones
// the caller set up. Signals from the command to processes outside its own
// tree are refused (Landlock ABI >= 6). If any step of
// the confinement fails, Main exits with status 126 without running PROGRAM
// (fail closed).
//
// [Probe] tells what the running kernel supports; it never reports a
// confinement that is not active. Where Landlock is missing, Wrap leaves the
// command unchanged and returns [ErrUnavailable]: the caller then decides
// whether to run unconfined, and reports Probe's "none" in /readyz and
// /v1/policy.
package sandbox
