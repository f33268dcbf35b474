package mcptool

import (
	"fmt"
	"io"
	"os/exec"
	"sync"
	"time"
)

// process is a stdio MCP server started in the command jail.
type process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	once   sync.Once
}

// startProcess starts o.Command through o.Confine with a minimal
// environment in o.Dir. Its stderr is discarded.
func startProcess(o Options) (*process, error) {
	cmd := exec.Command(o.Command[0], o.Command[1:]...)
	cmd.Dir = o.Dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + o.Dir, "LANG=C.UTF-8"}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	release, err := o.Confine(cmd)
	if err != nil {
		return nil, fmt.Errorf("mcp upstream %s: cannot confine the server: %w", o.Namespace, err)
	}
	err = cmd.Start()
	if release != nil {
		release()
	}
	if err != nil {
		return nil, fmt.Errorf("mcp upstream %s: starting the server: %w", o.Namespace, err)
	}
	return &process{cmd: cmd, stdin: stdin, stdout: stdout}, nil
}

// stop closes stdin, gives the server a moment to exit, then kills it
// (the jail's PID namespace takes its children with it).
func (p *process) stop() {
	p.once.Do(func() {
		p.stdin.Close()
		done := make(chan struct{})
		go func() { p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			p.cmd.Process.Kill()
			<-done
		}
	})
}
