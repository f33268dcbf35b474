package shell

import (
	"context"
	"testing"

	"github.com/toolgate/toolgate/internal/tools"
)

// fakeQuota is a workspace quota whose state the test sets; each Changed
// "measures" at once, moving to after.
type fakeQuota struct {
	room, after int64
	hard        bool
	changed     int
}

func (q *fakeQuota) Room() int64 { return q.room }
func (q *fakeQuota) Full() bool  { return q.room <= 0 }
func (q *fakeQuota) Hard() bool  { return q.hard }
func (q *fakeQuota) Changed() uint64 {
	q.changed++
	q.room = q.after
	return uint64(q.changed)
}
func (q *fakeQuota) Measured(context.Context, uint64) error { return nil }

func quotaEnv(t *testing.T, q tools.Quota) *tools.Env {
	t.Helper()
	ws, err := tools.OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	if q != nil {
		ws.SetQuota(q)
	}
	return &tools.Env{Tenant: "acme", Workspace: ws}
}

// Where the gateway keeps the quota, a full workspace is read-only for a
// command, and otherwise no file may grow past the room left; where the
// kernel keeps it (btrfs), the jail is left as policy shaped it.
func TestQuotaShapesTheJail(t *testing.T) {
	policyPaths := []string{"src/**"}
	cases := []struct {
		name      string
		q         tools.Quota
		readOnly  bool
		fileSize  int64
		writeNil  bool
		writeSame bool
	}{
		{"no quota", nil, false, 0, false, true},
		{"room left", &fakeQuota{room: 5000}, false, 5000, false, true},
		{"full", &fakeQuota{room: 0}, true, 0, false, false},
		{"over", &fakeQuota{room: -10}, true, 0, false, false},
		{"full, kernel-enforced", &fakeQuota{room: 0, hard: true}, false, 0, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := &job{conf: Confinement{Limits: tools.Limits{WritePaths: policyPaths}}}
			ro := quotaConfine(quotaEnv(t, c.q), j)
			if ro != c.readOnly || j.conf.FileSizeBytes != c.fileSize {
				t.Errorf("read-only %v, file size %d; want %v, %d", ro, j.conf.FileSizeBytes, c.readOnly, c.fileSize)
			}
			switch {
			case c.readOnly && (j.conf.Limits.WritePaths == nil || len(j.conf.Limits.WritePaths) != 0):
				t.Errorf("a full workspace's jail has write paths %v, want none (non-nil, empty)", j.conf.Limits.WritePaths)
			case !c.readOnly && len(j.conf.Limits.WritePaths) != 1:
				t.Errorf("write paths changed to %v", j.conf.Limits.WritePaths)
			}
		})
	}
}

// After a command the workspace is measured; when the command ran
// read-only or the workspace is full now, its result says so on the line
// before the exit code (and in data), and the call still succeeds.
func TestQuotaNoteAfterACommand(t *testing.T) {
	res := tools.Result{Content: "wrote\n[exit code: 1]", Data: map[string]any{"exit_code": 1.0}}
	cases := []struct {
		name     string
		q        *fakeQuota
		readOnly bool
		note     bool
	}{
		{"room before and after", &fakeQuota{room: 10, after: 5}, false, false},
		{"filled by the command", &fakeQuota{room: 10, after: 0}, false, true},
		{"ran read-only", &fakeQuota{room: 0, after: 0}, true, true},
		{"ran read-only, room made meanwhile", &fakeQuota{room: 0, after: 100}, true, true},
		{"kernel-enforced, full after", &fakeQuota{room: 10, after: -1, hard: true}, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := quotaAfter(context.Background(), quotaEnv(t, c.q), c.readOnly, res, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.q.changed != 1 {
				t.Errorf("measurements asked: %d, want 1", c.q.changed)
			}
			want := res.Content
			if c.note {
				want = "wrote\n[workspace full (limits.workspace_bytes): writes refused]\n[exit code: 1]"
			}
			if got.Content != want {
				t.Errorf("content %q, want %q", got.Content, want)
			}
			if full, _ := got.Data["workspace_full"].(bool); full != c.note || got.Data["exit_code"] != 1.0 {
				t.Errorf("data %v", got.Data)
			}
		})
	}
	if _, ok := res.Data["workspace_full"]; ok {
		t.Fatal("the note changed the caller's data map")
	}
	// Without a quota, nothing changes.
	if got, _ := quotaAfter(context.Background(), quotaEnv(t, nil), false, res, nil); got.Content != res.Content {
		t.Errorf("no quota: %q", got.Content)
	}
}

func TestQuotaNoteWhenABackgroundCommandStartsReadOnly(t *testing.T) {
	start := tools.Result{Content: "started process p1", Data: map[string]any{"process_id": "p1"}}
	got := startedNote(true, start)
	if got.Content != "started process p1\n[workspace full (limits.workspace_bytes): writes refused]" || got.Data["workspace_full"] != true || got.Data["process_id"] != "p1" {
		t.Errorf("got %+v", got)
	}
	if got := startedNote(false, start); got.Content != start.Content || got.Data["workspace_full"] != nil {
		t.Errorf("with room: %+v", got)
	}
}
