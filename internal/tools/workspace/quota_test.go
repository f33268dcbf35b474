package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/quota"
	"github.com/toolgate/toolgate/internal/tools"
)

// meteredEnv is testEnv with an accounting quota of room bytes beyond
// what the workspace takes now, measured by the real walk.
func meteredEnv(t *testing.T, room int64) (*tools.Env, string, *quota.Meter) {
	t.Helper()
	env, dir := testEnv(t)
	used, err := quota.Usage(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := quota.NewMeter(quota.Accounting, used+room, func() (int64, error) { return quota.Usage(dir) }, nil)
	t.Cleanup(func() { m.Close() })
	if err := m.Measure(); err != nil {
		t.Fatal(err)
	}
	env.Workspace.SetQuota(m)
	return env, dir, m
}

// settle waits for the measurement every write asks for.
func settle(t *testing.T, m *quota.Meter) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Measured(ctx, m.Changed()); err != nil {
		t.Fatal(err)
	}
}

func wantFull(t *testing.T, err error) {
	t.Helper()
	var me *tools.ModelError
	if !errors.As(err, &me) || me.Message != "workspace is full (limits.workspace_bytes)" {
		t.Fatalf("got %v, want the model-facing note workspace is full (limits.workspace_bytes)", err)
	}
}

// Past the limit, write-file and edit-file refuse to grow the workspace
// with a note the model can act on; they still let it shrink a file, the
// way room is made.
func TestFileToolsRefuseToGrowAFullWorkspace(t *testing.T) {
	env, dir, m := meteredEnv(t, 64<<10)
	mustCall(t, NewWriteFile(), env, map[string]any{"path": "notes/a.txt", "content": strings.Repeat("a", 30<<10) + "END"})
	settle(t, m)
	room := m.Room()
	if room <= 0 || room > 34<<10 {
		t.Fatalf("room %d after 30 KiB of 64", room)
	}

	// More than the room left: refused, nothing written.
	_, err := call(t, NewWriteFile(), env, map[string]any{"path": "notes/b.txt", "content": strings.Repeat("b", int(room)+1)})
	wantFull(t, err)
	if _, err := os.Stat(filepath.Join(dir, "notes/b.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused file exists: %v", err)
	}

	// Fill it to the brim: an overwrite that grows the file by the room.
	mustCall(t, NewWriteFile(), env, map[string]any{"path": "notes/a.txt", "content": strings.Repeat("a", 30<<10+int(room)) + "END"})
	settle(t, m)
	if !m.Full() {
		t.Fatalf("not full: used %d room %d", m.Used(), m.Room())
	}
	_, err = call(t, NewWriteFile(), env, map[string]any{"path": "notes/c.txt", "content": "x"})
	wantFull(t, err)
	_, err = call(t, NewEditFile(), env, map[string]any{"path": "notes/a.txt", "old_string": "END", "new_string": "ENDMORE"})
	wantFull(t, err)
	if got := readHost(t, filepath.Join(dir, "notes/a.txt")); !strings.HasSuffix(got, "aEND") {
		t.Fatal("a refused edit changed the file")
	}

	// Shrinking is allowed, and the next measurement sees the room.
	mustCall(t, NewEditFile(), env, map[string]any{"path": "notes/a.txt", "old_string": "END", "new_string": ""})
	mustCall(t, NewWriteFile(), env, map[string]any{"path": "notes/a.txt", "content": "short"})
	settle(t, m)
	if m.Full() {
		t.Fatalf("still full after shrinking: used %d", m.Used())
	}
	mustCall(t, NewWriteFile(), env, map[string]any{"path": "notes/c.txt", "content": "x"})
}

// Every write asks for a measurement, off the caller's path: the call
// returns before it finishes.
func TestFileWritesAskForAMeasurement(t *testing.T) {
	env, dir := testEnv(t)
	measured := make(chan struct{}, 10)
	release := make(chan struct{})
	m := quota.NewMeter(quota.Accounting, 1<<30, func() (int64, error) {
		measured <- struct{}{}
		<-release
		return quota.Usage(dir)
	}, nil)
	t.Cleanup(func() { close(release); m.Close() })
	env.Workspace.SetQuota(m)
	writeFiles(t, dir, map[string]string{"e.txt": "one two"})

	for _, run := range []func(){
		func() { mustCall(t, NewWriteFile(), env, map[string]any{"path": "w.txt", "content": "hello"}) },
		func() {
			mustCall(t, NewEditFile(), env, map[string]any{"path": "e.txt", "old_string": "two", "new_string": "three"})
		},
	} {
		run() // returns although the measurement it asked for is blocked
		select {
		case <-measured:
			release <- struct{}{}
		case <-time.After(30 * time.Second):
			t.Fatal("a write asked for no measurement")
		}
	}
}

// A workspace without a quota is written as before.
func TestWriteFileWithoutQuota(t *testing.T) {
	env, dir := testEnv(t)
	mustCall(t, NewWriteFile(), env, map[string]any{"path": "a", "content": strings.Repeat("x", 1<<20)})
	if fi, err := os.Stat(filepath.Join(dir, "a")); err != nil || fi.Size() != 1<<20 {
		t.Fatal(fi, err)
	}
}

// The kernel's own refusal (a btrfs qgroup's EDQUOT) reads the same to
// the model; any other failure stays "the tool failed".
func TestQuotaErrTranslatesOnlyEDQUOT(t *testing.T) {
	wantFull(t, quotaErr(fmt.Errorf("workspace: write: %w", &os.PathError{Op: "write", Path: "/x", Err: syscall.EDQUOT})))
	other := fmt.Errorf("workspace: write: %w", syscall.ENOSPC)
	if got := quotaErr(other); got != other {
		t.Fatalf("ENOSPC became %v", got)
	}
}
