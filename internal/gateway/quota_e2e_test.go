package gateway

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/pgtest"
	"github.com/toolgate/toolgate/internal/quota"
	"github.com/toolgate/toolgate/internal/quota/quotatest"
	"github.com/toolgate/toolgate/internal/sandbox"
)

// One tenant filling its workspace, through the real HTTP server: its own
// writes are refused with a note (never a gateway failure), while the
// other tenant's commands and file writes go on and both audit logs keep
// working. Once with the gateway's accounting (a plain folder), once with
// a btrfs qgroup the kernel enforces.

const fullNote = "[workspace full (limits.workspace_bytes): writes refused]"

// withDD lets both tenants' developers run dd (a plain command that
// writes where of= says), which the shipped pack forbids.
func withDD(t testing.TB) func(*setup) {
	return func(s *setup) {
		s.policy = func(dir string) {
			editData(t, dir, func(tenants map[string]any) {
				for _, name := range []string{"acme", "globex"} {
					cmds := path(tenants, name, "roles", "developer", "commands")
					cmds["allow"] = append(cmds["allow"].([]any), []any{"dd"})
					if f, ok := cmds["forbidden"].([]any); ok {
						cmds["forbidden"] = slices.DeleteFunc(f, func(p any) bool {
							return fmt.Sprint(p) == "[dd]"
						})
					}
				}
			})
		}
	}
}

// dd writes n KiB of zeros to file in 64 KiB blocks, read from
// notes/zeros (see sparseZeros: a command may only name workspace files).
func dd(file string, kib int) string {
	return fmt.Sprintf("dd if=notes/zeros of=%s bs=64k count=%d", file, kib/64)
}

// sparseZeros puts notes/zeros, 4 MiB of zeros that take no disk space, in
// the workspace at dir.
func sparseZeros(t testing.TB, dir string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Join(dir, "notes"), 0o755))
	f, err := os.Create(filepath.Join(dir, "notes", "zeros"))
	must(t, err)
	must(t, f.Truncate(4<<20))
	must(t, f.Close())
}

func (h *harness) readyWorkspaces() map[string]any {
	h.t.Helper()
	r := h.do("GET", "/readyz", "", nil)
	if r.status != 200 || r.str("status") != "ready" {
		h.t.Fatalf("readyz: %d %s", r.status, r.raw)
	}
	ws, _ := r.body["workspaces"].(map[string]any)
	if ws == nil {
		h.t.Fatalf("readyz has no workspaces report: %s", r.raw)
	}
	for _, secret := range []string{"acme", "globex", h.dir} {
		if strings.Contains(string(r.raw), secret) {
			h.t.Fatalf("readyz names %q: %s", secret, r.raw)
		}
	}
	return ws
}

func dataFull(r response) bool {
	d, _ := r.body["data"].(map[string]any)
	full, _ := d["workspace_full"].(bool)
	return full
}

// otherTenantWorks checks that globex can still write, by command and by
// file tool, and that both audit logs verify.
func otherTenantWorks(t *testing.T, h *harness) {
	t.Helper()
	globex := h.token("globex", "gina", "developer")
	r := h.bashCall(globex, dd("notes/out.bin", 256), "")
	if r.str("outcome") != "ok" || !strings.Contains(r.str("content"), "[exit code: 0]") || strings.Contains(r.str("content"), fullNote) || dataFull(r) {
		t.Fatalf("globex's write by command: %s", r.raw)
	}
	if fi, err := os.Stat(filepath.Join(h.dir, "ws/globex/notes/out.bin")); err != nil || fi.Size() != 256<<10 {
		t.Fatalf("globex's file: %v %v", fi, err)
	}
	if r := h.call(globex, "write-file", `{"arguments":{"path":"notes/new.txt","content":"still fine"}}`); r.str("outcome") != "ok" {
		t.Fatalf("globex's write-file: %s", r.raw)
	}
	for _, tenant := range []string{"acme", "globex"} {
		if n := h.verify(tenant); n < 4 {
			t.Fatalf("%s's audit log verifies only %d events", tenant, n)
		}
	}
}

func TestWorkspaceQuotaAccountingKeepsOtherTenantsWorking(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	h := start(t, withAllTools, withDD(t), func(s *setup) {
		s.acmeYAML = "    limits:\n      workspace_bytes: 1048576\n"
		s.logTo = &logs
	})
	sparseZeros(t, filepath.Join(h.dir, "ws/acme"))
	sparseZeros(t, filepath.Join(h.dir, "ws/globex"))
	ws := h.readyWorkspaces()
	if ws["quota"] != "accounting" || ws["shares_audit_filesystem"] != true {
		t.Fatalf("readyz workspaces: %v", ws)
	}
	for _, want := range []string{
		`msg="workspace quota" tenant=acme mode=accounting limit_bytes=1048576`,
		`msg="workspace quota" tenant=globex mode=accounting limit_bytes=1073741824`,
		`level=WARN msg="the audit database shares a filesystem with tenant workspaces`,
		`tenants="[acme globex]"`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the start log lacks %q:\n%s", want, logs.String())
		}
	}

	acme := h.token("acme", "alice", "developer")
	// 2 MiB into a 1 MiB workspace: no file grows past the room left.
	r := h.bashCall(acme, dd("notes/big.bin", 2048), "")
	if r.str("outcome") != "ok" || r.body["is_error"] != false {
		t.Fatalf("filling command: %s", r.raw)
	}
	out := r.str("content")
	if !strings.Contains(out, fullNote+"\n[exit code: ") || !dataFull(r) {
		t.Fatalf("the command that filled the workspace does not say so:\n%s", out)
	}
	if !strings.Contains(out, "File too large") && !strings.Contains(out, "file size limit") {
		t.Errorf("dd was not stopped by the file-size limit:\n%s", out)
	}
	big, err := os.Stat(filepath.Join(h.dir, "ws/acme/notes/big.bin"))
	if err != nil || big.Size() >= 1<<20 {
		t.Fatalf("the file grew to %v (%v); the room was under 1 MiB", big, err)
	}
	if used, err := quota.Usage(filepath.Join(h.dir, "ws/acme")); err != nil || used > 1<<20+64<<10 {
		t.Fatalf("acme's workspace takes %d bytes (%v)", used, err)
	}

	// Full: the file tools refuse to grow it, with a note for the model.
	r = h.call(acme, "write-file", `{"arguments":{"path":"notes/x.txt","content":"hello"}}`)
	if r.status != 200 || r.str("outcome") != "tool_error" || r.str("content") != "workspace is full (limits.workspace_bytes)" {
		t.Fatalf("write-file into a full workspace: %d %s", r.status, r.raw)
	}
	r = h.call(acme, "edit-file", `{"arguments":{"path":"notes/todo.txt","old_string":"todo","new_string":"todo, and much more"}}`)
	if r.status != 200 || r.str("outcome") != "tool_error" || r.str("content") != "workspace is full (limits.workspace_bytes)" {
		t.Fatalf("edit-file growing a full workspace: %d %s", r.status, r.raw)
	}
	// A command runs read-only, and says so.
	r = h.bashCall(acme, dd("notes/more.bin", 64), "")
	if r.str("outcome") != "ok" || !strings.Contains(r.str("content"), fullNote) || !dataFull(r) {
		t.Fatalf("a command in a full workspace: %s", r.raw)
	}
	if !strings.Contains(r.str("content"), "Read-only file system") {
		t.Errorf("the command could write:\n%s", r.str("content"))
	}
	if h.exists("acme/notes/more.bin") {
		t.Fatal("a command wrote into a full workspace")
	}
	// Reading still works.
	if r := h.call(acme, "read-file", `{"arguments":{"path":"docs/guide.md"}}`); r.str("outcome") != "ok" {
		t.Fatalf("read-file in a full workspace: %s", r.raw)
	}

	otherTenantWorks(t, h)

	// Shrinking a file makes room again (the next measurement sees it).
	if r := h.call(acme, "write-file", `{"arguments":{"path":"notes/big.bin","content":""}}`); r.str("outcome") != "ok" {
		t.Fatalf("emptying the big file: %s", r.raw)
	}
	r = h.bashCall(acme, dd("notes/small.bin", 64), "")
	if r.str("outcome") != "ok" || !strings.Contains(r.str("content"), "[exit code: 0]") || strings.Contains(r.str("content"), fullNote) {
		t.Fatalf("a command once room was made: %s", r.raw)
	}
}

func TestWorkspaceQuotaBtrfsQgroupKeepsOtherTenantsWorking(t *testing.T) {
	t.Parallel()
	mnt := quotatest.Btrfs(t, true) // unmounted after the gateway closes
	acmeWS := filepath.Join(mnt, "acme")
	var logs syncBuffer
	h := start(t, withAllTools, withDD(t), func(s *setup) {
		s.acmeYAML = "    limits:\n      workspace_bytes: 1048576\n"
		s.logTo = &logs
		s.beforeNew = func(t testing.TB, cfg *config.Config) {
			// A missing workspace on btrfs: the gateway makes it a
			// subvolume and sets its qgroup limit.
			a := cfg.Tenants["acme"]
			a.Workspace = acmeWS
			cfg.Tenants["acme"] = a
		}
	})
	if out := quotatest.Run(t, "btrfs", "subvolume", "show", acmeWS); !strings.Contains(out, "acme") {
		t.Fatalf("acme's workspace is no subvolume: %s", out)
	}
	if out := quotatest.Run(t, "btrfs", "qgroup", "show", "-re", "--raw", acmeWS); !strings.Contains(out, " 1048576 ") {
		t.Fatalf("the qgroup limit is not 1 MiB:\n%s", out)
	}
	sparseZeros(t, acmeWS)
	must(t, sandbox.ChownTree(acmeWS, 65534, 65534)) // as the start did with the rest
	sparseZeros(t, filepath.Join(h.dir, "ws/globex"))
	ws := h.readyWorkspaces()
	if ws["quota"] != "mixed" || ws["shares_audit_filesystem"] != true {
		t.Fatalf("readyz workspaces: %v", ws)
	}
	for _, want := range []string{
		`msg="created the workspace as a btrfs subvolume" tenant=acme`,
		`msg="workspace quota" tenant=acme mode=btrfs-qgroup limit_bytes=1048576`,
		`msg="workspace quota" tenant=globex mode=accounting`,
		`tenants=[globex]`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the start log lacks %q:\n%s", want, logs.String())
		}
	}

	acme := h.token("acme", "alice", "developer")
	// The jail's user owns the new subvolume: a command can write in it.
	if r := h.call(acme, "write-file", `{"arguments":{"path":"notes/hello.txt","content":"hello"}}`); r.str("outcome") != "ok" {
		t.Fatalf("write-file into the new subvolume: %s", r.raw)
	}
	// 2 MiB into a 1 MiB qgroup: the kernel refuses.
	r := h.bashCall(acme, dd("notes/big.bin", 2048), "")
	out := r.str("content")
	if r.str("outcome") != "ok" || !strings.Contains(out, "Disk quota exceeded") {
		t.Fatalf("filling command: %s", r.raw)
	}
	if !strings.Contains(out, fullNote+"\n[exit code: ") || !dataFull(r) {
		t.Fatalf("the command that filled the workspace does not say so:\n%s", out)
	}
	r = h.call(acme, "write-file", `{"arguments":{"path":"notes/x.txt","content":"`+strings.Repeat("x", 32<<10)+`"}}`)
	if r.status != 200 || r.str("outcome") != "tool_error" || r.str("content") != "workspace is full (limits.workspace_bytes)" {
		t.Fatalf("write-file into a full workspace: %d %.300s", r.status, r.raw)
	}
	// Not read-only here (the kernel holds the limit, and deleting makes
	// room), but a write is still refused, and the result says so.
	r = h.bashCall(acme, dd("notes/more.bin", 256), "")
	if r.str("outcome") != "ok" || !strings.Contains(r.str("content"), "Disk quota exceeded") || !strings.Contains(r.str("content"), fullNote) {
		t.Fatalf("a command in a full workspace: %s", r.raw)
	}

	otherTenantWorks(t, h)
}

// With PostgreSQL the gateway cannot tell where the audit data lives:
// /readyz says nothing about sharing.
func TestReadyzSaysNothingAboutSharingWithPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	h := start(t, func(s *setup) { s.auditYAML = fmt.Sprintf("  driver: postgres\n  dsn: %q\n", dsn) })
	ws := h.readyWorkspaces()
	b, _ := json.Marshal(ws)
	if ws["quota"] != "accounting" || len(ws) != 1 {
		t.Fatalf("readyz workspaces with PostgreSQL: %s", b)
	}
}

// A seeded workspace created on btrfs is a subvolume holding the seed,
// made under a temporary name and renamed, so that a failure half way
// never leaves a half-seeded workspace under the real name.
func TestSeededWorkspaceOnBtrfsIsASubvolume(t *testing.T) {
	t.Parallel()
	mnt := quotatest.Btrfs(t, true)
	seed := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(seed, "docs"), 0o755))
	must(t, os.WriteFile(filepath.Join(seed, "docs/guide.md"), []byte("seeded\n"), 0o644))
	tenant := config.Tenant{Workspace: filepath.Join(mnt, "acme"), Seed: seed}
	sub, err := prepareWorkspace(tenant)
	if err != nil || !sub {
		t.Fatalf("prepareWorkspace: %v, %v", sub, err)
	}
	if b, err := os.ReadFile(filepath.Join(tenant.Workspace, "docs/guide.md")); err != nil || string(b) != "seeded\n" {
		t.Fatalf("seed not copied: %q %v", b, err)
	}
	if out := quotatest.Run(t, "btrfs", "subvolume", "list", "-o", mnt); !strings.Contains(out, "path acme") || strings.Contains(out, ".seed-") {
		t.Fatalf("subvolumes:\n%s", out)
	}
	// At the next start the workspace exists: nothing is created or copied.
	must(t, os.Remove(filepath.Join(tenant.Workspace, "docs/guide.md")))
	if sub, err := prepareWorkspace(tenant); err != nil || sub {
		t.Fatalf("second start: %v, %v", sub, err)
	}
	if _, err := os.Stat(filepath.Join(tenant.Workspace, "docs/guide.md")); !os.IsNotExist(err) {
		t.Fatal("the seed was copied again into an existing workspace")
	}
}
