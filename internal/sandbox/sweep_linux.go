package sandbox

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// processID names a process across pid reuse: "pid.start", start being its
// start time in clock ticks since boot (/proc/PID/stat, field 22).
func processID(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", errors.New("unexpected /proc/PID/stat")
	}
	fields := strings.Fields(string(b[i+1:]))
	// fields[0] is field 3 (state); field 22 is fields[19].
	if len(fields) < 20 {
		return "", errors.New("unexpected /proc/PID/stat")
	}
	return strconv.Itoa(pid) + "." + fields[19], nil
}

// processAlive reports whether the process named by id ("pid.start") is
// still running.
func processAlive(id string) bool {
	pidText, _, ok := strings.Cut(id, ".")
	pid, err := strconv.Atoi(pidText)
	if !ok || err != nil || pid <= 0 {
		return false
	}
	cur, err := processID(pid)
	return err == nil && cur == id
}

// sweep kills the jails a gateway process that no longer runs left behind
// (a gateway killed with SIGKILL whose jails somehow missed the end of
// its lifeline): every stage 1 whose --owner is not a live process, and
// with it its stage 2 and the whole jail. Jails of live gateways (another
// replica, a parallel test) are never touched. It returns how many it
// killed.
func sweep(self string) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if len(args) < 4 || args[0] != "toolgate-jail" || args[1] != SubCommand || args[2] != "--stage1" {
			continue
		}
		owner, ok := strings.CutPrefix(args[3], "--owner=")
		if !ok || owner == self || processAlive(owner) {
			continue
		}
		if unix.Kill(pid, unix.SIGKILL) == nil {
			n++
		}
	}
	return n
}
