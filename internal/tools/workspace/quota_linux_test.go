package workspace

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/quota"
	"github.com/toolgate/toolgate/internal/quota/quotatest"
	"github.com/toolgate/toolgate/internal/tools"
)

// staleQuota is a quota whose measurement has not caught up: it sees room
// the kernel no longer has.
type staleQuota struct{ *quota.Meter }

func (staleQuota) Room() int64 { return 1 << 40 }
func (staleQuota) Full() bool  { return false }

// On a btrfs workspace the kernel stops the gateway's own write past the
// qgroup limit, whatever the last measurement said: the model reads the
// same note as for a refusal by the gateway.
func TestWriteFilePastAQgroupLimitGetsTheNote(t *testing.T) {
	mnt := quotatest.Btrfs(t, true)
	dir := filepath.Join(mnt, "acme")
	if _, err := quota.CreateWorkspace(dir); err != nil {
		t.Fatal(err)
	}
	m, err := quota.Open(dir, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Mode() != quota.BtrfsQgroup {
		t.Fatalf("mode %s: %s", m.Mode(), m.Reason())
	}
	ws, err := tools.OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ws.SetQuota(staleQuota{m})
	env := &tools.Env{Tenant: "acme", Workspace: ws}
	content := strings.Repeat("x", 700<<10)
	mustCall(t, NewWriteFile(), env, map[string]any{"path": "one", "content": content})
	_, err = call(t, NewWriteFile(), env, map[string]any{"path": "two", "content": content})
	wantFull(t, err)
}
