package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// StartLandlock runs job's payload in the Landlock-only mode (development
// only): no jail, only the confinement of p, applied by the helper self to
// itself before it becomes the payload, in a process group of its own.
// The payload still runs outside the gateway; the host stays readable and
// nothing keeps a detached process from outliving the run.
func StartLandlock(job Job, p Policy, self string) (*Running, error) {
	if job.Run.Payload == "" {
		return nil, errors.New("sandbox: the Landlock-only mode runs payloads only")
	}
	if self == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		self = exe
	}
	data, err := json.Marshal(jobSpec{Payload: job.Run.Payload, Data: job.Run.Data, Dir: job.Run.Dir})
	if err != nil {
		return nil, err
	}
	specFile, err := sealedFile("toolgate-job", data)
	if err != nil {
		return nil, fmt.Errorf("sandbox: job spec: %v", err)
	}
	defer specFile.Close()
	diagR, diagW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer diagW.Close()
	cmd := exec.Command(self, SubCommand, "--payload="+job.Run.Payload)
	cmd.Dir = job.Run.Dir
	cmd.Env = []string{"GOTRACEBACK=none", "GOMAXPROCS=2"}
	cmd.Stdin = job.Stdin
	cmd.Stdout = job.Stdout
	cmd.Stderr = job.Stderr
	if cmd.Stderr == nil {
		cmd.Stderr = job.Stdout
	}
	cmd.ExtraFiles = []*os.File{specFile, diagW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := Wrap(cmd, p, self); err != nil {
		diagR.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		diagR.Close()
		return nil, fmt.Errorf("sandbox: starting the helper: %v", errnoText(err))
	}
	r := &Running{cmd: cmd, group: true, done: make(chan struct{})}
	go r.collect(diagR, nil, nil)
	return r, nil
}
