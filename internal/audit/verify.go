package audit

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/tlog"
)

// Verify integrates what is committed (Sync), then checks the tenant's
// whole log against its Merkle tree and its latest signed checkpoint:
//
//   - every stored event hashes to its hash (an edited event), its indexed
//     columns agree with its raw JSON (a tampered column), it names the
//     tenant (an event moved between tenants), and its hash is the tree's
//     stored leaf at its log_index (an event rewritten with a recomputed
//     hash);
//   - the log indexes run without a gap from the retention cut to the
//     tree's size (a deleted event, a truncated end);
//   - the events, in log order, hash to the tree's stored root and to the
//     root of the latest stored checkpoint (whose signature must verify)
//     and of every checkpoint this process signed or verified: a log
//     someone shortened, rewrote or reordered in the database, stored
//     tree and all, no longer hashes to a root the key signed;
//   - events of the hash-chain era (seq >= 1) still link to their
//     predecessor in their chain (seq+1, prev_hash), from seq 1 or their
//     retention checkpoint of that era.
//
// Verify stops at the first problem: Problem says what it is,
// FirstBadEvent names the event to blame (an id, or "(log_index N)" for a
// missing one) when there is one, and EventsChecked counts the events read
// up to it. Verify cannot tell a log that was replaced as a whole, latest
// checkpoint included, by someone who kept an older genuine checkpoint:
// for that, keep a checkpoint (GET /v1/audit/checkpoint) and use
// VerifyCheckpoint.
func (l *Log) Verify(ctx context.Context, tenant string) (VerifyResult, error) {
	return l.verifyAgainst(ctx, tenant, nil)
}

// VerifyCheckpoint is Verify against a checkpoint an auditor saved: the
// note must be signed by this gateway's key (current or previous) for the
// tenant's origin, else ErrBadCheckpoint (wrapping the tlog error). The
// log must be that checkpoint's log or an append-only extension of it:
// the first checkpoint-size events must hash to its root, and every
// stored event must hash into the current tree. It reports OK false,
// with the first problem, when events it covers were deleted (anywhere,
// the end included, or the tenant's whole log), changed (even with
// recomputed hashes and a recomputed tree), inserted or reordered.
func (l *Log) VerifyCheckpoint(ctx context.Context, tenant string, note []byte) (VerifyResult, error) {
	cp, err := l.tree.signer.Verifier().Open(note, tlog.Origin(tenant))
	if err != nil {
		return VerifyResult{}, fmt.Errorf("%w: %w", ErrBadCheckpoint, err)
	}
	return l.verifyAgainst(ctx, tenant, &anchor{label: "the checkpoint given", cp: cp})
}

// anchor is a signed checkpoint the log is checked against.
type anchor struct {
	label string
	cp    tlog.Checkpoint
}

func (l *Log) verifyAgainst(ctx context.Context, tenant string, saved *anchor) (VerifyResult, error) {
	if err := l.Sync(ctx, tenant); err != nil {
		return VerifyResult{}, err
	}
	var res VerifyResult
	for attempt := 1; ; attempt++ {
		head, err := l.store.Tree(ctx, tenant)
		if err != nil {
			return VerifyResult{}, storeErr(err)
		}
		legacy, err := l.store.LegacyCheckpoints(ctx, tenant)
		if err != nil {
			return VerifyResult{}, storeErr(err)
		}
		res, err = l.verifyOnce(ctx, tenant, head, legacy, saved)
		if err != nil {
			return VerifyResult{}, err
		}
		if res.OK || attempt == verifyAttempts {
			break
		}
		// A prune that committed between reading the tree and the scan
		// looks like deleted events: look again if the cut moved.
		again, err := l.store.Tree(ctx, tenant)
		if err != nil {
			return VerifyResult{}, storeErr(err)
		}
		if again.Pruned == head.Pruned {
			break
		}
	}
	if !res.OK {
		l.m.verifyFailures.Inc()
		l.logger.Warn("audit log verification failed", "tenant", tenant, "problem", res.Problem, "first_bad_event", res.FirstBadEvent)
	}
	return res, nil
}

// verifyAttempts bounds how often Verify looks again when a prune moved
// the retention cut under it; prunes run minutes apart, so a second look
// normally settles it.
const verifyAttempts = 3

// verifyOnce checks one reading of the tree and the events under it.
func (l *Log) verifyOnce(ctx context.Context, tenant string, head TreeHead, legacy map[string]Checkpoint, saved *anchor) (VerifyResult, error) {
	res := VerifyResult{TreeSize: head.Size, EventsPruned: head.Pruned}
	bad := func(first, problem string, args ...any) (VerifyResult, error) {
		res.OK, res.FirstBadEvent, res.Problem = false, first, fmt.Sprintf(problem, args...)
		return res, nil
	}
	origin := tlog.Origin(tenant)
	var anchors []anchor
	if saved != nil {
		anchors = append(anchors, *saved)
		res.GivenCheckpointSize = int64(saved.cp.Size)
	}
	if head.Checkpoint != nil {
		cp, err := l.tree.signer.Verifier().Open(head.Checkpoint, origin)
		if err != nil {
			return bad("", "the stored latest checkpoint does not verify: %v", err)
		}
		anchors = append(anchors, anchor{label: "the latest checkpoint", cp: cp})
	}
	if seen, ok := l.tree.seenOf(tenant); ok {
		anchors = append(anchors, anchor{label: "the checkpoint this gateway signed or verified", cp: seen})
	}
	slices.SortStableFunc(anchors, func(a, b anchor) int { return cmpU64(a.cp.Size, b.cp.Size) })
	for _, a := range anchors {
		res.CheckpointSize = max(res.CheckpointSize, int64(a.cp.Size))
	}
	for _, chain := range slices.Sorted(maps.Keys(legacy)) {
		if c := legacy[chain]; c.Tenant != tenant || ComputeCheckpointHash(c) != c.CheckpointHash {
			return bad(checkpointLabel(chain), "the retention checkpoint of hash chain %q does not match its hash", chain)
		}
	}
	if head.Size < head.Pruned || head.Size < 0 || head.Pruned < 0 {
		return bad("", "the stored tree is inconsistent: size %d, pruned %d", head.Size, head.Pruned)
	}

	state, err := headState(head)
	if err != nil {
		return bad("", "the stored tree state is invalid: %v", err)
	}
	nodes := storeNodes{l.store, tenant}
	start := tlog.State{}
	if head.Pruned > 0 {
		if start, err = tlog.StateAt(ctx, nodes, uint64(head.Pruned)); err != nil {
			if errors.Is(err, tlog.ErrNodeNotFound) {
				return bad("", "the tree nodes of the %d pruned events are missing", head.Pruned)
			}
			return VerifyResult{}, storeErr(err)
		}
	}
	v := &treeVerifier{
		tenant: tenant, legacy: legacy, pruned: head.Pruned > 0, next: head.Pruned, limit: head.Size,
		state: start, anchors: anchors, last: map[string]link{},
	}
	err = l.store.Scan(ctx, tenant, head.Pruned, math.MaxInt64, v.row)
	if err != nil && !errors.Is(err, errBadEvent) {
		return VerifyResult{}, storeErr(err)
	}
	res.EventsChecked = v.checked
	if v.problem != "" {
		return bad(v.bad, "%s", v.problem)
	}
	if v.next < head.Size {
		return bad(indexLabel(v.next), "the events end at log_index %d but the tree holds %d: events were deleted", v.next, head.Size)
	}
	if len(v.extra) > 0 {
		// Events past the tree read before the scan: integrated since, or
		// put there by someone else.
		now, err := l.store.Tree(ctx, tenant)
		if err != nil {
			return VerifyResult{}, storeErr(err)
		}
		for _, x := range v.extra {
			if x.seq >= now.Size {
				return bad(x.id, "event %s has log_index %d, beyond the tree of %d events: it is not in the tree", x.id, x.seq, now.Size)
			}
		}
	}
	if err := v.flush(); err != nil {
		return bad("", "%v", err)
	}
	if v.problem != "" {
		return bad(v.bad, "%s", v.problem)
	}
	// Checkpoints of a larger tree than the events make: a cut end.
	for _, a := range anchors {
		if int64(a.cp.Size) > v.next {
			return bad(indexLabel(v.next), "the log holds %d events but %s commits to %d: events were deleted", v.next, a.label, a.cp.Size)
		}
	}
	root, err := v.state.Root()
	if err != nil {
		return bad("", "%v", err)
	}
	if head.Size > 0 {
		stored, _ := state.Root()
		if !bytes.Equal(root, head.Root) || !bytes.Equal(stored, root) {
			return bad("", "the stored tree (size %d) does not match its events: root %s, events hash to %s", head.Size, b64(head.Root), b64(root))
		}
	}
	// Checkpoints of a tree no larger than the retention cut: their
	// prefix is only in the stored nodes, proven consistent with the root
	// the events give.
	cur := tlog.Checkpoint{Origin: origin, Size: uint64(v.next), Root: root}
	for _, a := range anchors {
		if int64(a.cp.Size) <= head.Pruned {
			if err := tlog.VerifyExtension(ctx, nodes, a.cp, cur); err != nil {
				return bad("", "the log is not an extension of %s (size %d): %v", a.label, a.cp.Size, err)
			}
		}
	}
	res.OK = true
	for _, a := range anchors {
		l.tree.observe(tenant, a.cp)
	}
	return res, nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// indexLabel stands for a missing event in FirstBadEvent.
func indexLabel(i int64) string { return fmt.Sprintf("(log_index %d)", i) }

// checkpointLabel stands for a bad retention checkpoint of the hash-chain
// era in FirstBadEvent, where no event is to blame.
func checkpointLabel(chain string) string { return "(checkpoint of chain " + chain + ")" }

func b64(h []byte) string { return base64.StdEncoding.EncodeToString(h) }

var errBadEvent = errors.New("audit: bad event")

// verifyChunk is how many leaves the verifier hashes into its state at
// a time.
const verifyChunk = 4096

// treeVerifier walks one tenant's events in log order, rebuilding the
// tree from their hashes.
type treeVerifier struct {
	tenant  string
	legacy  map[string]Checkpoint
	pruned  bool // retention cut the front: chains may start anywhere
	checked int
	next    int64 // the log index the next event must have
	limit   int64 // the tree's size: rows from there on are extra
	extra   []link
	state   tlog.State
	buf     [][]byte // leaves not yet in state
	anchors []anchor // by size
	last    map[string]link
	bad     string
	problem string
}

// link is a position in a hash chain of the hash-chain era (or, in
// extra, an event's log index).
type link struct {
	id   string
	seq  int64
	hash string
}

// linkFields are the members Verify reads from the raw JSON.
type linkFields struct {
	ID         string `json:"id"`
	Time       string `json:"time"`
	Tenant     string `json:"tenant"`
	Principal  string `json:"principal"`
	CallID     string `json:"call_id"`
	DecisionID string `json:"decision_id"`
	SessionID  string `json:"session_id"`
	Tool       string `json:"tool"`
	Phase      string `json:"phase"`
	Outcome    string `json:"outcome"`
	Chain      string `json:"chain"`
	Seq        int64  `json:"seq"`
	PrevHash   string `json:"prev_hash"`
}

func (v *treeVerifier) fail(id, problem string, args ...any) error {
	v.bad, v.problem = id, fmt.Sprintf(problem, args...)
	return errBadEvent
}

func (v *treeVerifier) row(r Row) error {
	if r.LogIndex >= v.limit {
		v.extra = append(v.extra, link{id: r.ID, seq: r.LogIndex})
		return nil
	}
	v.checked++
	if r.LogIndex != v.next {
		return v.fail(indexLabel(v.next), "the event at log_index %d is missing (the next is at %d): events were deleted or moved", v.next, r.LogIndex)
	}
	id := r.ID
	if id == "" {
		id = fmt.Sprintf("(row %d)", v.checked) // an id column emptied
	}
	if err := v.check(r); err != nil {
		return v.fail(id, "event %s at log_index %d: %v", id, r.LogIndex, err)
	}
	leaf, _ := HashBytes(r.Hash) // check made sure it is one
	switch {
	case r.Leaf == nil:
		return v.fail(id, "the tree has no leaf at log_index %d (event %s)", r.LogIndex, id)
	case !bytes.Equal(r.Leaf, tlog.LeafHash(leaf)):
		return v.fail(id, "event %s is not the tree's leaf at log_index %d: it was changed or moved", id, r.LogIndex)
	}
	v.buf = append(v.buf, leaf)
	v.next++
	if len(v.buf) >= verifyChunk || v.atAnchor() {
		if err := v.flush(); err != nil {
			return v.fail(id, "%v", err)
		}
		if v.problem != "" {
			return errBadEvent
		}
	}
	return nil
}

// atAnchor reports whether the next anchor's size was just reached.
func (v *treeVerifier) atAnchor() bool {
	for _, a := range v.anchors {
		if int64(a.cp.Size) == v.next {
			return true
		}
	}
	return false
}

// flush hashes the buffered leaves into the state and checks the root of
// every anchor the events just reached.
func (v *treeVerifier) flush() error {
	if len(v.buf) > 0 {
		integ, err := tlog.Integrate(v.state, v.buf)
		if err != nil {
			return err
		}
		v.state, v.buf = integ.State, v.buf[:0]
	}
	for _, a := range v.anchors {
		if int64(a.cp.Size) != v.next || int64(a.cp.Size) == 0 {
			continue
		}
		root, err := v.state.Root()
		if err != nil {
			return err
		}
		if !bytes.Equal(root, a.cp.Root) {
			v.bad = ""
			v.problem = fmt.Sprintf("the first %d events hash to %s, but %s commits to %s: events it covers were changed, replaced or reordered",
				a.cp.Size, b64(root), a.label, b64(a.cp.Root))
			return nil
		}
	}
	return nil
}

func (v *treeVerifier) check(r Row) error {
	if _, err := LeafVersionOf(r.Raw); err != nil {
		return err
	}
	content, stored, hasIndex, err := splitHash(r.Raw)
	if err != nil {
		return err
	}
	hash := hashOf(content)
	if stored != hash || r.Hash != hash {
		return errors.New("its content does not match its hash")
	}
	if hasIndex {
		return errors.New("its stored JSON has a log_index")
	}
	var f linkFields
	if err := json.Unmarshal(r.Raw, &f); err != nil {
		return err
	}
	ms, err := parseTimeMS(f.Time)
	if err != nil {
		return err
	}
	if f.Tenant != v.tenant || r.Tenant != v.tenant {
		return errors.New("it belongs to another tenant")
	}
	if r.ID != f.ID || r.Chain != f.Chain || r.Seq != f.Seq || r.TimeMS != ms ||
		r.Tool != f.Tool || r.Principal != f.Principal || r.Outcome != f.Outcome ||
		r.Phase != f.Phase || r.SessionID != f.SessionID || r.CallID != f.CallID ||
		r.DecisionID != f.DecisionID {
		return errors.New("an indexed column does not match its JSON")
	}
	if f.Seq == 0 {
		if f.Chain != "" || f.PrevHash != "" {
			return errors.New("it has a chain link but no seq")
		}
		return nil
	}
	// The hash-chain era: each chain links on.
	want := link{seq: 1}
	if prev, ok := v.last[f.Chain]; ok {
		want = link{seq: prev.seq + 1, hash: prev.hash}
	} else if cp, ok := v.legacy[f.Chain]; ok {
		want = link{seq: cp.Seq + 1, hash: cp.Hash} // retention cut the chain here
	} else if v.pruned {
		want = link{seq: f.Seq, hash: f.PrevHash} // retention cut the log; the tree vouches for the rest
	}
	if f.Seq != want.seq || f.PrevHash != want.hash {
		return fmt.Errorf("its hash-chain link is broken (chain %q seq %d)", f.Chain, f.Seq)
	}
	v.last[f.Chain] = link{id: f.ID, seq: f.Seq, hash: hash}
	return nil
}
