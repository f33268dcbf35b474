// Command cgroupv2 shows that tenants share the CPU by weight on a cgroup
// v2 host: run as root inside a VM whose kernel mounts only the unified
// hierarchy (bench/cgroupv2.sh boots one with qemu), it builds real jails
// for two tenants of weight 1000 and 100, two busy jails each, all pinned
// to one CPU, and prints how many iterations each tenant's jails made in
// the same window. The development machine is cgroup v1, where
// internal/sandbox's TestJailCPUIsSharedByWeight shows the same.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolgate/toolgate/internal/command"
	"github.com/toolgate/toolgate/internal/sandbox"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == sandbox.SubCommand {
		os.Exit(sandbox.Main(os.Args[2:], sandbox.Payloads{command.PayloadName: command.RunInJail}))
	}
	if len(os.Args) > 2 && os.Args[1] == "hog" {
		hog(os.Args[2])
	}
	if err := run(); err != nil {
		fmt.Println("cgroupv2: FAIL:", err)
		os.Exit(1)
	}
}

// hog counts as fast as it can on CPU 0, writing the count to file.
func hog(file string) {
	var set unix.CPUSet
	set.Set(0)
	_ = unix.SchedSetaffinity(0, &set)
	for n := 1; ; n++ {
		if n%2000000 == 0 {
			_ = os.WriteFile(file+".tmp", []byte(strconv.Itoa(n)), 0o644)
			_ = os.Rename(file+".tmp", file)
		}
	}
}

func run() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	j, st, err := sandbox.NewJailer(sandbox.JailerOptions{Self: self})
	if err != nil {
		return fmt.Errorf("no jail: %v", err)
	}
	fmt.Printf("cgroupv2: confinement cpu=%s mechanisms=%v reason=%q\n", st.CPU, st.Mechanisms, st.CPUReason)
	if st.CPU != "weight" {
		return fmt.Errorf("the CPU is not shared by weight here")
	}
	ws, err := os.MkdirTemp("", "ws")
	if err != nil {
		return err
	}
	if err := j.OwnWorkspace(ws); err != nil {
		return err
	}
	names := []string{"heavy-1", "heavy-2", "light-1", "light-2"}
	var runs []*sandbox.Running
	for _, name := range names {
		group, weight := "heavy", 1000
		if strings.HasPrefix(name, "light") {
			group, weight = "light", 100
		}
		r, err := j.Start(sandbox.Job{
			Jail:   sandbox.Jail{Workspace: ws, MountAt: sandbox.DefaultMountAt, Programs: []string{self}, CPUGroup: group, CPUWeight: weight},
			Run:    sandbox.Run{Program: self, Args: []string{"cgroupv2", "hog", sandbox.DefaultMountAt + "/" + name}},
			Stdout: os.Stdout,
		})
		if err != nil {
			return err
		}
		runs = append(runs, r)
	}
	counts := func() map[string]int {
		out := map[string]int{}
		for _, name := range names {
			b, err := os.ReadFile(ws + "/" + name)
			if err != nil {
				return nil
			}
			out[name], _ = strconv.Atoi(string(b))
		}
		return out
	}
	var before map[string]int
	for deadline := time.Now().Add(5 * time.Minute); before == nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the jails did not all start")
		}
		before = counts()
	}
	time.Sleep(10 * time.Second)
	after := counts()
	for _, r := range runs {
		r.Kill()
		r.Wait()
	}
	heavy, light := 0, 0
	for name, n := range after {
		if strings.HasPrefix(name, "heavy") {
			heavy += n - before[name]
		} else {
			light += n - before[name]
		}
	}
	ratio := float64(heavy) / float64(max(1, light))
	fmt.Printf("cgroupv2: weight 1000: %d iterations, weight 100: %d (%.1f×)\n", heavy, light, ratio)
	b, _ := os.ReadFile("/proc/self/cgroup")
	fmt.Printf("cgroupv2: the gateway's cgroup now %s", b)
	if ratio < 3 {
		return fmt.Errorf("not shared by weight")
	}
	fmt.Println("cgroupv2: PASS")
	return nil
}
