package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeGateway is this test binary acting as a gateway: it starts one jail
// whose program runs until killed (a background job), prints its stage 1's
// pid, and waits to be killed.
func fakeGateway(ws string) int {
	j, _, err := NewJailer(JailerOptions{})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	out, err := os.Create(ws + "/../out")
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	if err := j.OwnWorkspace(ws); err != nil {
		fmt.Println("error", err)
		return 1
	}
	run, err := j.Start(Job{
		Jail:   Jail{Workspace: ws, MountAt: DefaultMountAt, Programs: []string{sleep}},
		Run:    Run{Program: sleep, Args: []string{"sleep", "300"}},
		Stdout: out,
	})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("started", run.cmd.Process.Pid)
	select {}
}

// descendants returns pid and every process below it.
func descendants(t *testing.T, pid int) []int {
	t.Helper()
	children := map[int][]int{}
	ents, err := os.ReadDir("/proc")
	must(t, err)
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		children[pp] = append(children[pp], p)
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// awaitExit waits until every process of pids (open as pidfds) has exited,
// at most d; it returns the ones still running.
func awaitExit(fds map[int]int, d time.Duration) []int {
	deadline := time.Now().Add(d)
	for len(fds) > 0 {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		var polls []unix.PollFd
		var pids []int
		for pid, fd := range fds {
			polls = append(polls, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
			pids = append(pids, pid)
		}
		if _, err := unix.Poll(polls, int(left.Milliseconds())+1); err != nil && !errors.Is(err, unix.EINTR) {
			break
		}
		for i, p := range polls {
			if p.Revents != 0 {
				unix.Close(fds[pids[i]])
				delete(fds, pids[i])
			}
		}
	}
	var alive []int
	for pid, fd := range fds {
		alive = append(alive, pid)
		unix.Close(fd)
	}
	return alive
}

// Nothing survives the gateway: killed with SIGKILL while a jail's program
// runs, its jail ends with it — stage 1, the init and the program — because
// every jail watches the gateway's lifeline.
func TestJailsDieWithTheGateway(t *testing.T) {
	dir := t.TempDir()
	ws := dir + "/ws"
	must(t, os.Mkdir(ws, 0o755))
	self, err := os.Executable()
	must(t, err)
	gw := exec.Command(self)
	gw.Env = append(os.Environ(), envFakeGateway+"="+ws)
	stdout, err := gw.StdoutPipe()
	must(t, err)
	must(t, gw.Start())
	t.Cleanup(func() { gw.Process.Kill(); gw.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "started ") {
		t.Fatalf("the gateway stand-in: %q %v", line, err)
	}
	stage1, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "started ")))
	// The whole jail: stage 1, the init, the program (sleep 300).
	var pids []int
	deadline := time.Now().Add(20 * time.Second)
	for {
		pids = descendants(t, stage1)
		if len(pids) >= 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(pids) < 3 {
		t.Fatalf("the jail has processes %v, want stage 1, the init and the program", pids)
	}
	fds := map[int]int{}
	for _, p := range pids {
		fd, err := unix.PidfdOpen(p, 0)
		must(t, err)
		fds[p] = fd
	}
	must(t, gw.Process.Signal(syscall.SIGKILL))
	if alive := awaitExit(fds, 20*time.Second); len(alive) > 0 {
		t.Fatalf("processes of the jail outlived the gateway: %v", alive)
	}
}

// The start-up sweep kills the jails of a gateway process that is gone,
// and never those of a live one.
func TestSweepKillsOnlyJailsOfGatewaysThatAreGone(t *testing.T) {
	self, err := os.Executable()
	must(t, err)
	live, err := processID(os.Getppid()) // go test: alive for the whole test
	must(t, err)
	fake := func(owner string) *exec.Cmd {
		cmd := &exec.Cmd{Path: self, Args: []string{"toolgate-jail", SubCommand, "--stage1", "--owner=" + owner}}
		cmd.Env = append(os.Environ(), envFakeStage1+"=1")
		stdin, err := cmd.StdinPipe()
		must(t, err)
		must(t, cmd.Start())
		t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	// A gone gateway: a pid that is not running at that start time.
	gone := fake("999999999.1")
	alive := fake(live)
	goneFD, err := unix.PidfdOpen(gone.Process.Pid, 0)
	must(t, err)
	// Wait until both show their command line (exec done).
	deadline := time.Now().Add(10 * time.Second)
	for {
		b1, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", gone.Process.Pid))
		b2, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", alive.Process.Pid))
		if strings.HasPrefix(string(b1), "toolgate-jail\x00") && strings.HasPrefix(string(b2), "toolgate-jail\x00") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stand-ins did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	self2, err := processID(os.Getpid())
	must(t, err)
	if n := sweep(self2); n < 1 {
		t.Errorf("sweep killed %d jails, want the gone gateway's", n)
	}
	if left := awaitExit(map[int]int{gone.Process.Pid: goneFD}, 10*time.Second); len(left) > 0 {
		t.Fatal("the jail of a gateway that is gone survived the sweep")
	}
	if err := alive.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the jail of a live gateway was killed: %v", err)
	}
}
