package audit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/go-json-experiment/json"
)

// Verify recomputes the tenant's hash chains from the stored events. An
// event is bad when
//   - its hash is not the hash of its raw JSON (an edited event),
//   - its seq does not follow its predecessor's in the chain, starting at 1
//     (or after the chain's retention checkpoint), or its prev_hash is not
//     its predecessor's hash (a deleted, inserted or reordered event),
//   - it names another tenant (an event moved between tenants), or
//   - an indexed column disagrees with the raw JSON (a tampered column).
//
// A retention checkpoint (see Prune) is bad when it does not match its
// checkpoint_hash or no event follows it; FirstBadEvent is then
// "(checkpoint of chain C)".
//
// Verify stops at the first bad event: FirstBadEvent is its id (as stored in
// the id column) and EventsChecked counts the events read up to and
// including it. It also catches a truncated tail of this Log's own chain:
// when the store ends before the last event this Log committed,
// FirstBadEvent names the last event that is left (empty when none is). A
// tail cut while the gateway was down is not detectable from the chain
// alone; keep the latest head elsewhere (an export, a notary) for that.
//
// Note the chain is unkeyed: someone with write access who rewrites an event
// and every hash after it produces a chain that verifies. It proves that
// nothing changed since an externally kept head, not who wrote it.
func (l *Log) Verify(ctx context.Context, tenant string) (VerifyResult, error) {
	// Heads first: everything they cover is committed, so the scan sees it.
	l.headsMu.Lock()
	want, wantOK := l.heads[tenant]
	l.headsMu.Unlock()

	var res VerifyResult
	for attempt := 1; ; attempt++ {
		cps, err := l.store.Checkpoints(ctx, tenant)
		if err != nil {
			return VerifyResult{}, storeErr(err)
		}
		res, err = l.verifyOnce(ctx, tenant, cps, want, wantOK)
		if err != nil {
			return VerifyResult{}, err
		}
		if res.OK || attempt == verifyAttempts {
			break
		}
		// A prune that committed between reading the checkpoints and the
		// scan looks like a broken chain: look again if they moved.
		again, err := l.store.Checkpoints(ctx, tenant)
		if err != nil {
			return VerifyResult{}, storeErr(err)
		}
		if maps.Equal(cps, again) {
			break
		}
	}
	if !res.OK {
		l.m.verifyFailures.Inc()
		l.logger.Warn("audit chain verification failed", "tenant", tenant, "first_bad_event", res.FirstBadEvent)
	}
	return res, nil
}

// verifyOnce checks the checkpoints, then the chains they start.
func (l *Log) verifyOnce(ctx context.Context, tenant string, cps map[string]Checkpoint, want Head, wantOK bool) (VerifyResult, error) {
	for _, chain := range slices.Sorted(maps.Keys(cps)) {
		if c := cps[chain]; c.Tenant != tenant || ComputeCheckpointHash(c) != c.CheckpointHash {
			return VerifyResult{FirstBadEvent: checkpointLabel(chain)}, nil
		}
	}
	v := &verifier{tenant: tenant, cps: cps}
	err := l.store.Scan(ctx, tenant, v.row)
	if err != nil && !errors.Is(err, errBadEvent) {
		return VerifyResult{}, storeErr(err)
	}
	res := VerifyResult{OK: v.bad == "" && err == nil, EventsChecked: v.checked, FirstBadEvent: v.bad}
	if res.OK {
		// Pruning keeps every chain's last event: a checkpoint with nothing
		// after it means the rest of the chain was deleted.
		for _, chain := range slices.Sorted(maps.Keys(cps)) {
			if _, ok := v.last[chain]; !ok {
				res.OK, res.FirstBadEvent = false, checkpointLabel(chain)
				break
			}
		}
	}
	if res.OK && wantOK {
		last := v.last[l.chain]
		if last.seq < want.Seq {
			res.OK, res.FirstBadEvent = false, last.id
		}
	}
	return res, nil
}

// checkpointLabel stands for a bad checkpoint in FirstBadEvent, where no
// event is to blame.
func checkpointLabel(chain string) string { return "(checkpoint of chain " + chain + ")" }

// verifyAttempts bounds how often Verify looks again when a prune moved
// the checkpoints under it; prunes run minutes apart, so a second look
// normally settles it.
const verifyAttempts = 3

var errBadEvent = errors.New("audit: bad event")

// verifier walks one tenant's rows in (chain, seq) order.
type verifier struct {
	tenant  string
	checked int
	bad     string
	chain   string // chain of the previous row
	cps     map[string]Checkpoint
	prev    link
	last    map[string]link
}

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

func (v *verifier) row(r Row) error {
	v.checked++
	if err := v.check(r); err != nil {
		v.bad = r.ID
		if v.bad == "" {
			v.bad = fmt.Sprintf("(row %d)", v.checked) // an id column emptied
		}
		return errBadEvent
	}
	return nil
}

func (v *verifier) check(r Row) error {
	content, stored, err := splitHash(r.Raw)
	if err != nil {
		return err
	}
	hash := hashOf(content)
	if stored != hash || r.Hash != hash {
		return errors.New("hash mismatch")
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
		return errors.New("foreign tenant")
	}
	if r.ID != f.ID || r.Chain != f.Chain || r.Seq != f.Seq || r.TimeMS != ms ||
		r.Tool != f.Tool || r.Principal != f.Principal || r.Outcome != f.Outcome ||
		r.Phase != f.Phase || r.SessionID != f.SessionID || r.CallID != f.CallID ||
		r.DecisionID != f.DecisionID {
		return errors.New("column mismatch")
	}
	want := link{seq: 1}
	if v.checked > 1 && f.Chain == v.chain {
		want = link{seq: v.prev.seq + 1, hash: v.prev.hash}
	} else if cp, ok := v.cps[f.Chain]; ok {
		want = link{seq: cp.Seq + 1, hash: cp.Hash} // retention cut the chain here
	}
	if f.Seq != want.seq || f.PrevHash != want.hash {
		return errors.New("broken link")
	}
	v.chain, v.prev = f.Chain, link{id: f.ID, seq: f.Seq, hash: hash}
	if v.last == nil {
		v.last = map[string]link{}
	}
	v.last[f.Chain] = v.prev
	return nil
}
