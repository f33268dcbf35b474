package audit

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/tlog"
)

// maxExportLine bounds one event line of an export.
const maxExportLine = 16 << 20

// VerifyExport checks offline, with nothing but its inputs, that export (an
// ndjson export of one tenant's log, GET /v1/audit/export) is exactly the
// log that the signed checkpoint note commits to: the note opens with one
// of keys (note verifier keys) and names a Toolgate tenant log, every
// event is of that tenant and hashes to its own hash, their log_index
// values run 0..size-1 without gap or repeat, and the RFC 6962 root of
// their hashes is the checkpoint's. It returns the checkpoint and the
// number of events, or the first problem.
func VerifyExport(export io.Reader, note []byte, keys []string) (tlog.Checkpoint, int, error) {
	v, err := tlog.NewVerifier(keys...)
	if err != nil {
		return tlog.Checkpoint{}, 0, fmt.Errorf("key: %w", err)
	}
	origin, _, _ := strings.Cut(string(note), "\n")
	tenant, ok := strings.CutPrefix(origin, tlog.Origin(""))
	if !ok || tenant == "" {
		return tlog.Checkpoint{}, 0, fmt.Errorf("checkpoint: origin %q is not a Toolgate tenant log", origin)
	}
	cp, err := v.Open(note, origin)
	if err != nil {
		return tlog.Checkpoint{}, 0, fmt.Errorf("checkpoint: %w", err)
	}
	leaves, err := exportLeaves(export, tenant)
	if err != nil {
		return cp, 0, fmt.Errorf("export: %w", err)
	}
	if err := tlog.VerifyLog(cp, leaves); err != nil {
		return cp, len(leaves), err
	}
	return cp, len(leaves), nil
}

// exportLeaves reads an ndjson export of tenant's log and returns its
// leaves (each event's 32-byte hash) in log_index order. It fails on the
// first event whose content does not hash to its hash, of another tenant,
// without a log_index, or when the indexes are not exactly 0..n-1.
func exportLeaves(r io.Reader, tenant string) ([][]byte, error) {
	type leaf struct {
		index uint64
		id    string
		hash  []byte
	}
	var all []leaf
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxExportLine)
	line := 0
	for sc.Scan() {
		line++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		var ev struct {
			ID       string  `json:"id"`
			Tenant   string  `json:"tenant"`
			Hash     string  `json:"hash"`
			LogIndex *uint64 `json:"log_index"`
		}
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("line %d: not an event: %v", line, err)
		}
		if ev.Tenant != tenant {
			return nil, fmt.Errorf("line %d: event %s is of tenant %q, the checkpoint of %q", line, ev.ID, ev.Tenant, tenant)
		}
		if ev.LogIndex == nil {
			return nil, fmt.Errorf("line %d: event %s has no log_index (not yet in the tree; export up to the checkpoint)", line, ev.ID)
		}
		got, err := LeafHash(raw)
		if err != nil {
			return nil, fmt.Errorf("line %d: event %s: %w", line, ev.ID, err)
		}
		if got != ev.Hash {
			return nil, fmt.Errorf("line %d: event %s was changed: its content hashes to %s, not %s", line, ev.ID, got, ev.Hash)
		}
		h, err := hex.DecodeString(strings.TrimPrefix(ev.Hash, HashPrefix))
		if err != nil || len(h) != 32 {
			return nil, fmt.Errorf("line %d: event %s: malformed hash", line, ev.ID)
		}
		all = append(all, leaf{*ev.LogIndex, ev.ID, h})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %v", line+1, err)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].index < all[j].index })
	out := make([][]byte, len(all))
	for i, l := range all {
		switch {
		case l.index < uint64(i):
			return nil, fmt.Errorf("log_index %d appears twice (event %s)", l.index, l.id)
		case l.index > uint64(i):
			return nil, fmt.Errorf("log_index %d is missing: the export lacks an event (deleted?) before event %s", i, l.id)
		}
		out[i] = l.hash
	}
	return out, nil
}
