package shell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/internal/command"
	"github.com/toolgate/toolgate/internal/sandbox"
	"github.com/toolgate/toolgate/internal/tools"
	"github.com/toolgate/toolgate/internal/wspath"
)

// Notices the gateway adds to a command's output.
const (
	memoryNotice = "[killed: memory limit]\n"
	// copyDrainTimeout bounds how long output is read after the jail
	// ended: nothing of the jail is left to write, but the kernel may not
	// have reaped everything yet.
	copyDrainTimeout = 2 * time.Second
	// maxReportBytes bounds the interpreter's report line.
	maxReportBytes = 64 << 10
)

// job is one decided command on its way into a jail: the spec its
// interpreter runs and the confinement its jail is built from.
type job struct {
	runner Runner
	conf   Confinement
	spec   []byte
	log    func(msg string, args ...any)

	run    *sandbox.Running
	copied chan struct{} // closed when the output is all read
	outR   *os.File
}

// newJob builds the spec of the command a decided, for tenant's workspace
// at the host folder wsDir.
func (s *Shell) newJob(a *bashArtifact, tenant, wsDir string, lim tools.Limits) (*job, error) {
	mountAt := s.mountAt(wsDir)
	st, ok := a.cwdInfo.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, errors.New("shell: working folder has no identity")
	}
	pins := command.Pins{}
	for name, p := range a.pins {
		if rel, ok := wspath.HostRel(wsDir, p.Path); ok {
			p.Path = path.Join(mountAt, filepath.ToSlash(rel))
		}
		pins[name] = p
	}
	spec := command.Spec{
		Source: a.command, Digest: a.digest, Segments: a.segments,
		Workspace: mountAt, Dir: path.Join(mountAt, a.cwd), Home: mountAt,
		DirDev: uint64(st.Dev), DirIno: st.Ino,
		Env: s.env.build(mountAt), Path: s.env.path,
		Pins: pins, Redirects: a.redirects,
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	return &job{
		runner: s.opts.Runner,
		conf:   Confinement{Tenant: tenant, Workspace: wsDir, Programs: a.pins.Paths(), Limits: lim},
		spec:   data,
		log:    s.log.Error,
	}, nil
}

// start starts the jail; its output goes to out. stdin nil means
// /dev/null.
func (j *job) start(stdin *os.File, out io.Writer) error {
	outR, outW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("shell: pipe: %w", err)
	}
	run, err := j.runner.Start(j.conf, j.spec, stdin, outW)
	outW.Close()
	if err != nil {
		outR.Close()
		// Fail closed: nothing of the command runs.
		return fmt.Errorf("%w: %v", errConfine, err)
	}
	j.run, j.outR, j.copied = run, outR, make(chan struct{})
	go func() {
		defer close(j.copied)
		_, _ = io.Copy(out, outR)
	}()
	return nil
}

// wait returns when the jail ended (nil) or ctx did (its error, after the
// jail was killed and has ended): whatever the command is blocked on, it
// ends at ctx's end.
func (j *job) wait(ctx context.Context) error {
	select {
	case <-j.run.Done():
		return nil
	case <-ctx.Done():
		j.run.Kill()
		<-j.run.Done()
		return ctx.Err()
	}
}

// result returns how the jail ended and the interpreter's report, once
// the output is read (or the drain bound passed). A jail that could not be
// built or started is an error: the call fails closed.
func (j *job) result() (sandbox.Exit, command.Report, error) {
	ex := j.run.Wait()
	t := time.NewTimer(copyDrainTimeout)
	select {
	case <-j.copied:
	case <-t.C:
		j.outR.Close() // unblocks the copy
		<-j.copied
	}
	t.Stop()
	j.outR.Close()
	var rep command.Report
	if len(ex.Report) > 0 && len(ex.Report) <= maxReportBytes {
		if err := json.Unmarshal(ex.Report, &rep); err != nil {
			rep = command.Report{}
		}
	}
	if len(rep.Refused) > 64 {
		rep.Refused = rep.Refused[:64]
	}
	if ex.Failed || rep.Error != "" {
		why := ex.Diagnostics
		if rep.Error != "" {
			why += " " + rep.Error
		}
		return ex, rep, fmt.Errorf("%w: %s", errConfine, why)
	}
	if ex.Diagnostics != "" {
		j.log("command jail said something unexpected", "diagnostics", ex.Diagnostics)
	}
	return ex, rep, nil
}

// mountAt is where the workspace at host appears to commands.
func (s *Shell) mountAt(host string) string {
	if s.opts.Runner != nil {
		return s.opts.Runner.Path(host)
	}
	return sandbox.DefaultMountAt
}
