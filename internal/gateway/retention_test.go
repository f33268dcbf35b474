package gateway

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/tlog"
)

func TestRetentionPrunesTheAuditLogAndWhatRemainsVerifies(t *testing.T) {
	t.Parallel()
	h := start(t)
	dev := h.token("acme", "alice", "developer")
	for range 3 {
		if r := h.call(dev, "read-file", `{"arguments":{"path":"docs/guide.md"}}`); r.status != 200 {
			t.Fatalf("read-file: %d %s", r.status, r.raw)
		}
	}
	before := h.verify("acme")
	if before < 6 {
		t.Fatalf("acme has %d events before the prune, want at least 6", before)
	}

	// A cutoff in the future: everything goes; the tree keeps its shape.
	h.g.audit.PruneOlderThan(t.Context(), -time.Hour) // the cutoff an hour ahead
	if n := h.verify("acme"); n != 0 {
		t.Fatalf("after the prune %d events verify, want 0", n)
	}
	m := string(h.do("GET", "/metrics", "", nil).raw)
	want := "toolgate_audit_pruned_events_total " + strconv.Itoa(before)
	if !strings.Contains(m, want) {
		t.Fatalf("metrics lack %q", want)
	}

	// The log goes on after the cut.
	if r := h.call(dev, "read-file", `{"arguments":{"path":"docs/guide.md"}}`); r.status != 200 {
		t.Fatalf("read-file after prune: %d %s", r.status, r.raw)
	}
	if n := h.verify("acme"); n != 2 {
		t.Fatalf("after one more call %d events verify, want 2", n)
	}
}

func TestServePrunesAtStartWhenRetentionIsSet(t *testing.T) {
	t.Parallel()
	h := start(t)
	ctx := t.Context()

	// Events two hours old, as an earlier gateway would have left them
	// (with the same checkpoint key).
	dsn := filepath.Join(h.dir, "audit.db")
	db, err := store.Open(ctx, store.SQLite, dsn)
	must(t, err)
	defer db.Close()
	key, err := tlog.LoadOrCreateSigner(filepath.Join(h.dir, "audit-signing.key"), tlog.KeyName)
	must(t, err)
	old := time.Now().Add(-2 * time.Hour)
	seed, err := audit.NewLog(db.Audit(), audit.LogOptions{Signer: key, Now: func() time.Time { return old }})
	must(t, err)
	for range 4 {
		must(t, seed.Append(ctx, &audit.Event{Tenant: "acme", Tool: "read-file", Phase: audit.PhaseDecision, Outcome: "allow"}))
	}
	must(t, seed.Sync(ctx, "acme"))
	must(t, seed.Close())

	cfg, err := config.Load(filepath.Join(h.dir, "gateway.yaml"))
	must(t, err)
	cfg.Audit.Retention = time.Hour
	g, err := New(ctx, cfg, slog.New(slog.DiscardHandler))
	must(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- g.Serve(sctx, ln) }()
	defer func() {
		cancel()
		<-done
		g.Close()
	}()

	// Waits for a state, asserts nothing about time.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		tree, err := db.Audit().Tree(ctx, "acme")
		must(t, err)
		if tree.Pruned > 0 {
			if tree.Pruned != 4 {
				t.Fatalf("%d events pruned, want the 4 old ones", tree.Pruned)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the gateway did not prune at start")
		}
	}
	if n := h.verify("acme"); n != 0 {
		t.Fatalf("%d events verify after the prune, want none", n)
	}
}
