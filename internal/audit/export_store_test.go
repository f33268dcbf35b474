package audit_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/store"
)

func TestExportOnSQLiteMatchesQueryReversed(t *testing.T) {
	ctx := t.Context()
	db, err := store.Open(ctx, store.SQLite, filepath.Join(t.TempDir(), "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	l, err := audit.NewLog(db.Audit(), audit.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for _, ev := range audit.ExportFixture() {
		ev.ID = "" // the Log assigns real ids
		if err := l.Append(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(ctx, "acme"); err != nil { // export reads what is integrated
		t.Fatal(err)
	}
	epoch := audit.ExportEpoch
	for _, f := range []audit.Filter{{}, {Phase: audit.PhaseDecision}, {From: epoch.Add(time.Minute), To: epoch.Add(100 * time.Hour)}} {
		// The reference: every page of Query, reversed.
		var want []string
		pf := f
		pf.Limit = audit.MaxLimit
		for {
			page, err := l.Query(ctx, "acme", pf)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range page.Events {
				want = append(want, ev.ID)
			}
			if pf.Cursor = page.NextCursor; pf.Cursor == "" {
				break
			}
		}
		slices.Reverse(want)
		if len(want) == 0 {
			t.Fatalf("filter %+v matches nothing; the fixture is wrong", f)
		}
		for _, pageSize := range []int{4, audit.MaxLimit} {
			var got []string
			if err := audit.ExportPaged(ctx, l, "acme", f, pageSize, func(batch []*audit.Event) error {
				for _, ev := range batch {
					got = append(got, ev.ID)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("filter %+v, page %d: exported %d events, Query has %d", f, pageSize, len(got), len(want))
			}
		}
	}
}
