//go:build !linux

package sandbox

import "errors"

func probeKernel() Status {
	return Status{Mechanism: MechanismNone, Reason: "Landlock is Linux-only"}
}

func confineAndExec(helperConfig, string, []string, []string) (int, error) {
	return ExitConfineFailed, errors.New("cannot confine command: no confinement mechanism on this OS")
}

func seccompAvailable() error {
	return errors.New("seccomp is Linux-only")
}
