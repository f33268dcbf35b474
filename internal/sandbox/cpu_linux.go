package sandbox

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// CPU shared fairly between tenants.
//
// Every jail of a tenant joins that tenant's CPU cgroup, one per tenant
// under the gateway's own, whose weight is the tenant's CPU weight: when
// the CPU is contended, the kernel's scheduler gives each tenant's jails
// together a share proportional to its weight, however many jails and
// processes it runs (24 jails × 128 spinning tasks of one tenant get no
// more than another tenant's one busy command of the same weight). A busy
// CPU is never idle for it: weights only divide contention.
//
// cgroup v1 (the cpu controller's own hierarchy): cpu.shares, 1024 for
// the default weight 100. cgroup v2 (unified): cpu.weight, after
// delegation — the cpu controller enabled in the gateway's cgroup, which
// the gateway leaves for a leaf of its own ("toolgate-gateway") first
// because v2 allows no process in a cgroup whose children use a
// controller. Where neither can be written (a non-root gateway without a
// delegated cgroup), tenants share the CPU as processes do; the status
// says why.

// MechanismCgroupCPU names per-tenant CPU weights in JailStatus.
const MechanismCgroupCPU = "cgroup-cpu"

// cpuCgroups keeps one CPU cgroup per tenant.
type cpuCgroups struct {
	dir string // .../<own cgroup>/toolgate-jails
	v2  bool

	mu      sync.Mutex
	tenants map[string]string // tenant → cgroup folder
}

// findCPUCgroups prepares per-tenant CPU cgroups: cgroup v1's cpu
// hierarchy, else cgroup v2's. It returns nil and a reason when neither
// can be used.
func findCPUCgroups() (*cpuCgroups, string) {
	v1, why1 := findCPUCgroupsV1()
	if v1 != nil {
		return v1, ""
	}
	v2, why2 := findCPUCgroupsV2(cgroupV2Root())
	if v2 != nil {
		return v2, ""
	}
	return nil, "no writable cpu cgroup: " + why1 + "; " + why2
}

func findCPUCgroupsV1() (*cpuCgroups, string) {
	dir, why := jailsCgroupV1("cpu", "cpu.shares", 0o755)
	if dir == "" {
		return nil, why
	}
	return &cpuCgroups{dir: dir, tenants: map[string]string{}}, ""
}

// cgroupV2Root returns where the unified hierarchy is mounted ("" for
// none) as seen from /proc/self/mountinfo.
func cgroupV2Root() string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if len(fields) >= 5 && len(tail) >= 1 && tail[0] == "cgroup2" && fields[3] == "/" {
			return unescapeMount(fields[4])
		}
	}
	return ""
}

// ownCgroupV2 is this process's path in the unified hierarchy.
func ownCgroupV2() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", errors.New("no /proc/self/cgroup")
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("not in a cgroup v2 hierarchy")
}

// findCPUCgroupsV2 sets up per-tenant CPU cgroups in the unified
// hierarchy mounted at mnt: the cpu controller must be available in the
// gateway's cgroup; the gateway moves itself into a leaf of its own so
// that the controller can be enabled for its children.
func findCPUCgroupsV2(mnt string) (*cpuCgroups, string) {
	if mnt == "" {
		return nil, "no cgroup v2 hierarchy"
	}
	own, err := ownCgroupV2()
	if err != nil {
		return nil, err.Error()
	}
	base := filepath.Join(mnt, filepath.Clean("/"+own))
	if filepath.Base(base) == "toolgate-gateway" {
		base = filepath.Dir(base) // a gateway of this process moved already
	}
	ctrl, err := os.ReadFile(filepath.Join(base, "cgroup.controllers"))
	if err != nil || !hasWord(string(ctrl), "cpu") {
		return nil, "the cpu controller is not delegated to the gateway's cgroup v2"
	}
	if cur, _ := os.ReadFile(filepath.Join(base, "cgroup.subtree_control")); !hasWord(string(cur), "cpu") {
		// No process may stay in a cgroup whose children use a domain
		// controller: the gateway moves itself to a leaf first, and
		// nothing else may be left there (the kernel would make the
		// subtree threaded, where the jails' cgroups could not be
		// domains).
		leaf := filepath.Join(base, "toolgate-gateway")
		if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, "cannot create the gateway's own cgroup v2 leaf: " + errnoText(err)
		}
		if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			return nil, "cannot move the gateway into its cgroup v2 leaf: " + errnoText(err)
		}
		if procs, _ := os.ReadFile(filepath.Join(base, "cgroup.procs")); strings.TrimSpace(string(procs)) != "" {
			return nil, "processes other than the gateway are in the gateway's cgroup v2"
		}
		if err := enableController(base, "cpu"); err != nil {
			return nil, "cannot enable the cpu controller for the jails: " + errnoText(err)
		}
	}
	dir := filepath.Join(base, cgroupParent)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, "cannot create the jails' cgroup v2: " + errnoText(err)
	}
	if t, _ := os.ReadFile(filepath.Join(dir, "cgroup.type")); strings.TrimSpace(string(t)) != "domain" {
		return nil, "the jails' cgroup v2 is not a domain (" + strings.TrimSpace(string(t)) + "): a threaded subtree"
	}
	if err := enableController(dir, "cpu"); err != nil {
		return nil, "cannot enable the cpu controller for the tenants: " + errnoText(err)
	}
	return &cpuCgroups{dir: dir, v2: true, tenants: map[string]string{}}, ""
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// enableController enables controller for the children of the cgroup at
// dir (cgroup v2), unless it is already.
func enableController(dir, controller string) error {
	cur, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err == nil && hasWord(string(cur), controller) {
		return nil
	}
	return os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+controller), 0)
}

// tenantDir names a tenant's cgroup: a hash, so that no tenant name is a
// path and none appears in /proc/PID/cgroup inside a jail.
func tenantDir(tenant string) string {
	sum := sha256.Sum256([]byte(tenant))
	return "t-" + hex.EncodeToString(sum[:8])
}

// procs opens the cgroup.procs of tenant's CPU cgroup for writing,
// creating the cgroup with weight (1-10000) on first use and setting the
// weight again when it changed.
func (c *cpuCgroups) procs(tenant string, weight int) (*os.File, error) {
	if weight < 1 || weight > 10000 {
		return nil, fmt.Errorf("sandbox: cpu weight %d is not between 1 and 10000", weight)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	dir := filepath.Join(c.dir, tenantDir(tenant))
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("sandbox: the tenant's cpu cgroup: %v", errnoText(err))
	}
	file, value := "cpu.shares", strconv.Itoa(weight*1024/100)
	if c.v2 {
		file, value = "cpu.weight", strconv.Itoa(weight)
	}
	if cur, err := os.ReadFile(filepath.Join(dir, file)); err != nil || strings.TrimSpace(string(cur)) != value {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
			return nil, fmt.Errorf("sandbox: the tenant's cpu weight: %v", errnoText(err))
		}
	}
	c.tenants[tenant] = dir
	f, err := os.OpenFile(filepath.Join(dir, "cgroup.procs"), os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: the tenant's cpu cgroup: %v", errnoText(err))
	}
	return f, nil
}

// dir returns the cgroup folder of tenant, "" before its first jail.
func (c *cpuCgroups) dirOf(tenant string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tenants[tenant]
}
