package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/tlog"
)

// maxExportLine bounds one event line of an export.
const maxExportLine = 16 << 20

// auditVerify is `gateway audit verify --checkpoint FILE --key FILE
// EXPORT.ndjson`: offline, with nothing but the files, it checks that the
// export is exactly the log the signed checkpoint commits to — every event
// hashes to its own `hash`, the `log_index` values run 0..size-1 without a
// gap, and the Merkle root of those hashes is the checkpoint's. Exit 0 when
// it is, 1 with the first problem otherwise, 2 on usage errors.
func auditVerify(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("audit verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cpFile := fs.String("checkpoint", "", "the signed checkpoint note (GET /v1/audit/checkpoint)")
	keyFile := fs.String("key", "", "the note verifier key(s), one per line (GET /v1/audit/checkpoint/verifier)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *cpFile == "" || *keyFile == "" || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: gateway audit verify --checkpoint FILE --key FILE EXPORT.ndjson")
		return exitUsage
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "audit verify: "+format+"\n", a...)
		return exitRuntime
	}
	note, err := os.ReadFile(*cpFile)
	if err != nil {
		return fail("checkpoint: %v", err)
	}
	keyText, err := os.ReadFile(*keyFile)
	if err != nil {
		return fail("key: %v", err)
	}
	var keys []string
	for _, l := range strings.Split(string(keyText), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			keys = append(keys, l)
		}
	}
	v, err := tlog.NewVerifier(keys...)
	if err != nil {
		return fail("key: %v", err)
	}
	origin, _, _ := strings.Cut(string(note), "\n")
	tenant, ok := strings.CutPrefix(origin, tlog.Origin(""))
	if !ok || tenant == "" {
		return fail("checkpoint: origin %q is not a Toolgate tenant log", origin)
	}
	cp, err := v.Open(note, origin)
	if err != nil {
		return fail("checkpoint: %v", err)
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return fail("export: %v", err)
	}
	defer f.Close()
	leaves, err := exportLeaves(f, tenant)
	if err != nil {
		return fail("export: %v", err)
	}
	if err := tlog.VerifyLog(cp, leaves); err != nil {
		return fail("%v", err)
	}
	fmt.Fprintf(stdout, "ok: %d events of %s are exactly the log of checkpoint size %d, root %x\n", len(leaves), origin, cp.Size, cp.Root)
	return exitOK
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
		got, err := audit.LeafHash(raw)
		if err != nil {
			return nil, fmt.Errorf("line %d: event %s: %v", line, ev.ID, err)
		}
		if got != ev.Hash {
			return nil, fmt.Errorf("line %d: event %s was changed: its content hashes to %s, not %s", line, ev.ID, got, ev.Hash)
		}
		h, err := hex.DecodeString(strings.TrimPrefix(ev.Hash, audit.HashPrefix))
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
