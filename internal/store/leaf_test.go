package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/audit"
)

// storedAs returns ev's raw JSON as a log of its leaf version stores it,
// with its hash computed by the one rule of versions 1 and 2 (also for a
// version this code does not know, as a newer gateway would have).
func storedAs(t *testing.T, ev *audit.Event) []byte {
	t.Helper()
	canon := func(v any) jsontext.Value {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		c := jsontext.Value(b)
		if err := c.Canonicalize(); err != nil {
			t.Fatal(err)
		}
		return c
	}
	var m map[string]jsontext.Value
	if err := json.Unmarshal(canon(ev), &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "hash")
	sum := sha256.Sum256(canon(m))
	ev.Hash = audit.HashPrefix + hex.EncodeToString(sum[:])
	return canon(ev)
}

// exportOf is the tenant's ndjson export, as GET /v1/audit/export writes it.
func exportOf(t *testing.T, l *audit.Log, tenant string) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := audit.Export(t.Context(), l, tenant, audit.Filter{}, func(evs []*audit.Event) error {
		for _, ev := range evs {
			line, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			b.Write(append(line, '\n'))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Events of leaf version 1 (as the log wrote them before leaf versions)
// and 2 (as it writes them now) verify side by side, online and offline;
// an event of a version this code does not know is integrated (a newer
// replica's, in a rolling upgrade) but every verifier refuses it, naming
// it, rather than hash it by a rule that may not be its own.
func TestLeafVersions(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := t.Context()
		db := openFor(t, b, b.dsn(t))
		l := newLog(t, db.Audit(), nil)
		insert := func(ev *audit.Event) {
			t.Helper()
			raw := storedAs(t, ev)
			if err := db.Audit().Insert(ctx, []audit.Entry{{Event: ev, Raw: raw}}); err != nil {
				t.Fatal(err)
			}
		}

		v1 := testEvent("acme", "read-file")
		v1.ID, v1.Time = "ev-v1", "2026-01-01T00:00:00.000Z"
		insert(v1)
		var v2 []*audit.Event
		for range 2 {
			ev := testEvent("acme", "grep")
			if err := l.Append(ctx, ev); err != nil {
				t.Fatal(err)
			}
			v2 = append(v2, ev)
		}
		if err := l.Sync(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
		if got, err := l.Get(ctx, "acme", v1.ID); err != nil || got.LeafVersion != 0 || got.LogIndex == nil {
			t.Fatalf("the version 1 event: %+v, %v", got, err)
		}
		for _, ev := range v2 {
			got, err := l.Get(ctx, "acme", ev.ID)
			if err != nil || got.LeafVersion != audit.LeafVersion2 || ev.LeafVersion != audit.LeafVersion2 {
				t.Fatalf("a new event carries leaf_version %v, %v; want %d", got, err, audit.LeafVersion2)
			}
		}
		if res, err := l.Verify(ctx, "acme"); err != nil || !res.OK || res.EventsChecked != 3 {
			t.Fatalf("Verify of versions 1 and 2 = %+v, %v", res, err)
		}
		note, err := l.Checkpoint(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		if _, n, err := audit.VerifyExport(bytes.NewReader(exportOf(t, l, "acme")), note, []string{l.VerifierKey()}); err != nil || n != 3 {
			t.Fatalf("VerifyExport of versions 1 and 2 = %d events, %v", n, err)
		}

		// A version 3 event, its hash computed right by the rule of
		// versions 1 and 2: integrated, but refused by every verifier.
		v3 := testEvent("acme", "write-file")
		v3.ID, v3.Time, v3.LeafVersion = "ev-v3", audit.FormatTime(time.Now().Add(time.Hour)), 3
		insert(v3)
		if err := l.Sync(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
		if got, err := l.Get(ctx, "acme", v3.ID); err != nil || got.LogIndex == nil || got.LeafVersion != 3 {
			t.Fatalf("the version 3 event is not integrated: %+v, %v", got, err)
		}
		res, err := l.Verify(ctx, "acme")
		if err != nil || res.OK || res.FirstBadEvent != v3.ID || !strings.Contains(res.Problem, "unknown audit leaf version 3") {
			t.Fatalf("Verify with a version 3 event = %+v, %v; want it refused, naming %s", res, err, v3.ID)
		}
		if note, err = l.Checkpoint(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
		_, _, err = audit.VerifyExport(bytes.NewReader(exportOf(t, l, "acme")), note, []string{l.VerifierKey()})
		if !errors.Is(err, audit.ErrUnknownLeafVersion) || !strings.HasPrefix(err.Error(), "export: line 4: event ev-v3:") {
			t.Fatalf("VerifyExport with a version 3 event: %v; want ErrUnknownLeafVersion at line 4", err)
		}
	})
}
