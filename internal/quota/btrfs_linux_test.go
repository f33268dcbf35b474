package quota

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/toolgate/toolgate/internal/quota/quotatest"
)

func qgroupFile(t *testing.T, dir, name string) int64 {
	t.Helper()
	sv, ok, err := readSubvolume(dir)
	if err != nil || !ok {
		t.Fatalf("%s is no subvolume: %v", dir, err)
	}
	n, err := sv.qgroupValue(name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A missing workspace whose parent is on btrfs becomes a subvolume; the
// gateway (root) sets its qgroup limit, and the kernel then refuses root
// itself a write past it, which the meter sees.
func TestBtrfsQgroupIsSetAndEnforced(t *testing.T) {
	mnt := quotatest.Btrfs(t, true)
	ws := filepath.Join(mnt, "acme")
	if !CanCreateSubvolume(ws) {
		t.Fatal("a missing folder on btrfs cannot be created as a subvolume")
	}
	created, err := CreateWorkspace(ws)
	if err != nil || !created {
		t.Fatalf("CreateWorkspace: %v, %v", created, err)
	}
	if CanCreateSubvolume(ws) {
		t.Error("an existing workspace would be created again")
	}
	if again, err := CreateWorkspace(ws); again || err != nil {
		t.Errorf("an existing workspace was created again: %v %v", again, err)
	}
	if out := quotatest.Run(t, "btrfs", "subvolume", "show", ws); !strings.Contains(out, "acme") {
		t.Fatalf("btrfs does not know the subvolume: %s", out)
	}

	m, err := Open(ws, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Mode() != BtrfsQgroup || !m.Hard() || m.Limit() != 1<<20 || m.Reason() != "" {
		t.Fatalf("mode %s hard %v limit %d reason %q", m.Mode(), m.Hard(), m.Limit(), m.Reason())
	}
	if got := qgroupFile(t, ws, "max_referenced"); got != 1<<20 {
		t.Fatalf("the kernel's limit is %d, want %d", got, 1<<20)
	}
	if m.Full() {
		t.Fatalf("an empty subvolume is full: used %d", m.Used())
	}

	// Root, writing 2 MiB, is stopped by the kernel.
	f, err := os.Create(filepath.Join(ws, "big"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	var werr error
	for range 32 {
		if _, werr = f.Write(chunk); werr != nil {
			break
		}
	}
	if werr == nil {
		werr = f.Sync()
	}
	f.Close()
	if !errors.Is(werr, syscall.EDQUOT) {
		t.Fatalf("writing 2 MiB into a 1 MiB qgroup as root: %v, want EDQUOT", werr)
	}
	if err := m.Measured(t.Context(), m.Changed()); err != nil {
		t.Fatal(err)
	}
	if !m.Full() {
		t.Fatalf("after EDQUOT the meter says used %d, room %d: not full", m.Used(), m.Room())
	}
	// Deleting makes room, which the next measurement (it syncs) sees.
	if err := os.Remove(filepath.Join(ws, "big")); err != nil {
		t.Fatal(err)
	}
	if err := m.Measured(t.Context(), m.Changed()); err != nil {
		t.Fatal(err)
	}
	if m.Full() || m.Used() > 256<<10 {
		t.Fatalf("after the delete: used %d full %v", m.Used(), m.Full())
	}

	// A new limit at the next start replaces the old one.
	m2, err := Open(ws, 3<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	m2.Close()
	if got := qgroupFile(t, ws, "max_referenced"); got != 3<<20 {
		t.Fatalf("the limit after a restart is %d, want %d", got, 3<<20)
	}
}

func TestBtrfsFallsBackToAccounting(t *testing.T) {
	withQuotas := quotatest.Btrfs(t, true)
	plain := filepath.Join(withQuotas, "plain")
	if err := os.Mkdir(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := Open(plain, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if m.Mode() != Accounting || !strings.Contains(m.Reason(), "plain folder on btrfs") {
		t.Errorf("a plain folder on btrfs: %s, %q", m.Mode(), m.Reason())
	}
	if CanCreateSubvolume(filepath.Join(t.TempDir(), "x")) {
		t.Error("a folder on a filesystem that is not btrfs would be a subvolume")
	}

	noQuotas := quotatest.Btrfs(t, false)
	ws := filepath.Join(noQuotas, "acme")
	if created, err := CreateWorkspace(ws); err != nil || !created {
		t.Fatalf("CreateWorkspace: %v %v", created, err)
	}
	m, err = Open(ws, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if m.Mode() != Accounting || !strings.Contains(m.Reason(), "quotas are not enabled") {
		t.Errorf("a subvolume without quotas: %s, %q", m.Mode(), m.Reason())
	}
}

// Subvolumes of one btrfs filesystem have device numbers of their own
// but share its free space: FilesystemID names them alike.
func TestFilesystemIDSeesThroughSubvolumes(t *testing.T) {
	mnt := quotatest.Btrfs(t, false)
	a, b := filepath.Join(mnt, "a"), filepath.Join(mnt, "b")
	for _, d := range []string{a, b} {
		if _, err := CreateWorkspace(d); err != nil {
			t.Fatal(err)
		}
	}
	var sa, sb syscall.Stat_t
	syscall.Stat(a, &sa)
	syscall.Stat(b, &sb)
	if sa.Dev == sb.Dev {
		t.Log("note: the subvolumes share a device number here")
	}
	id := func(p string) string {
		t.Helper()
		s, err := FilesystemID(p)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if id(a) != id(b) || id(a) != id(mnt) {
		t.Errorf("one btrfs filesystem, three names: %s %s %s", id(a), id(b), id(mnt))
	}
	tmp1, tmp2 := t.TempDir(), t.TempDir()
	if id(tmp1) != id(tmp2) {
		t.Errorf("two folders of one filesystem: %s %s", id(tmp1), id(tmp2))
	}
	if id(tmp1) == id(a) {
		t.Errorf("the btrfs filesystem and the temp folder's are both %s", id(a))
	}
}

// helperEnv names the workspace the non-root helper opens.
const helperEnv = "TOOLGATE_QUOTA_HELPER"

// A gateway that is not root may create a subvolume but not set its
// qgroup limit: it uses the limit root prepared when there is one no
// larger than its own, else it falls back to accounting and says why.
func TestBtrfsAsNonRoot(t *testing.T) {
	mnt := quotatest.Btrfs(t, true)
	bin := helperBinary(t)
	cases := []struct {
		name     string
		rootSets string // btrfs qgroup limit set by root, "" for none
		limit    int64
		mode     Mode
		want     int64
		reason   string
	}{
		{"root prepared a smaller limit", "1M", 2 << 20, BtrfsQgroup, 1 << 20, "root's limit of 1048576 bytes is enforced"},
		{"root prepared a larger limit", "8M", 2 << 20, Accounting, 2 << 20, "root's limit of 8388608 bytes is larger"},
		{"root prepared none", "", 2 << 20, Accounting, 2 << 20, "root set none"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ws := filepath.Join(mnt, "t"+strconv.Itoa(i))
			if _, err := CreateWorkspace(ws); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(ws, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			if c.rootSets != "" {
				quotatest.Run(t, "btrfs", "qgroup", "limit", c.rootSets, ws)
			}
			got := runHelper(t, bin, ws, c.limit, false)
			if got.SetErr != "operation not permitted" {
				t.Errorf("setting a qgroup limit as uid 65534: %q, want EPERM", got.SetErr)
			}
			if got.Mode != c.mode || got.Limit != c.want || !strings.Contains(got.Reason, c.reason) {
				t.Errorf("got %+v, want mode %s limit %d reason containing %q", got, c.mode, c.want, c.reason)
			}
		})
	}
}

// The kernel lets any user create a subvolume where it may write: a
// gateway that is not root creates its missing workspace as one, and
// keeps it to the limit by accounting.
func TestBtrfsSubvolumeCreatedByNonRoot(t *testing.T) {
	mnt := quotatest.Btrfs(t, true)
	parent := filepath.Join(mnt, "workspaces")
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(parent, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(parent, "acme")
	got := runHelper(t, helperBinary(t), ws, 1<<20, true)
	if !got.Created || got.Mode != Accounting || !strings.Contains(got.Reason, "root set none") {
		t.Fatalf("got %+v", got)
	}
	if _, ok, err := readSubvolume(ws); !ok || err != nil {
		t.Fatalf("%s is not a subvolume: %v", ws, err)
	}
}

type helperResult struct {
	Created bool
	Mode    Mode
	Limit   int64
	Reason  string
	SetErr  string
	Err     string
}

// TestNonRootHelper is the non-root side of TestBtrfsAsNonRoot, run by
// it in a copy of this test binary as uid 65534.
func TestNonRootHelper(t *testing.T) {
	ws := os.Getenv(helperEnv)
	if ws == "" {
		t.Skip("run by TestBtrfsAsNonRoot")
	}
	limit, _ := strconv.ParseInt(os.Getenv(helperEnv+"_LIMIT"), 10, 64)
	var r helperResult
	if os.Getenv(helperEnv+"_CREATE") == "1" {
		created, err := CreateWorkspace(ws)
		if err != nil {
			r.Err = err.Error()
		}
		r.Created = created
	}
	if err := setQgroupLimit(ws, limit); err != nil {
		r.SetErr = err.Error()
	}
	m, err := Open(ws, limit, nil)
	if err != nil && r.Err == "" {
		r.Err = err.Error()
	}
	if m != nil {
		r.Mode, r.Limit, r.Reason = m.Mode(), m.Limit(), m.Reason()
		m.Close()
	}
	b, _ := json.Marshal(r)
	fmt.Printf("RESULT %s\n", b)
}

// helperBinary copies this test binary where uid 65534 may run it.
func helperBinary(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "quota-helper-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	bin := filepath.Join(dir, "quota.test")
	dst, err := os.OpenFile(bin, os.O_WRONLY|os.O_CREATE, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return bin
}

func runHelper(t *testing.T, bin, ws string, limit int64, create bool) helperResult {
	t.Helper()
	cmd := exec.Command(bin, "-test.run=^TestNonRootHelper$", "-test.count=1")
	cmd.Env = []string{helperEnv + "=" + ws, helperEnv + "_LIMIT=" + strconv.FormatInt(limit, 10), "PATH=/usr/bin:/bin"}
	if create {
		cmd.Env = append(cmd.Env, helperEnv+"_CREATE=1")
	}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper as uid 65534: %v: %s", err, out)
	}
	for line := range strings.Lines(string(out)) {
		if rest, ok := strings.CutPrefix(line, "RESULT "); ok {
			var r helperResult
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				t.Fatal(err)
			}
			if r.Err != "" {
				t.Fatalf("helper: %s", r.Err)
			}
			return r
		}
	}
	t.Fatalf("helper printed no result: %s", out)
	return helperResult{}
}
