package main

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/audit"
)

// weighted picks one of values with the given relative weights.
type weighted struct {
	values []string
	cum    []float64
}

func newWeighted(values []string, weights []float64) weighted {
	w := weighted{values: values, cum: make([]float64, len(weights))}
	sum := 0.0
	for i, x := range weights {
		sum += x
		w.cum[i] = sum
	}
	for i := range w.cum {
		w.cum[i] /= sum
	}
	return w
}

func (w weighted) pick(r *rand.Rand) string {
	x := r.Float64()
	for i, c := range w.cum {
		if x < c {
			return w.values[i]
		}
	}
	return w.values[len(w.values)-1]
}

// zipf returns n names with weights 1/(i+1)^s: a few hot, a long tail.
func zipf(prefix string, n int, s float64) weighted {
	vals, ws := make([]string, n), make([]float64, n)
	for i := range n {
		vals[i] = fmt.Sprintf("%s%d", prefix, i)
		ws[i] = 1 / math.Pow(float64(i+1), s)
	}
	return newWeighted(vals, ws)
}

// The seeded distributions. Tools and principals are skewed (Zipf-like);
// decision outcomes follow a mostly-allowed gateway; every allowed call
// that ran has a result event (ok or tool_error).
var (
	toolNames = []string{
		"read-file", "grep", "glob", "edit-file", "write-file", "bash", "git-status", "git-diff",
		"git-commit", "http-get", "list-dir", "run-tests", "search-code", "create-ticket", "send-email",
		"db-query", "deploy", "kubectl-get", "slack-post", "calendar-read",
	}
	decisionOutcomes = newWeighted(
		[]string{"allow", "denied", "invalid_arguments", "unavailable"},
		[]float64{0.80, 0.12, 0.05, 0.03})
	resultOutcomes = newWeighted([]string{"ok", "tool_error"}, []float64{0.92, 0.08})
)

// model is the distributions one tenant is seeded from; the query runner
// draws parameters from the same model and from samples of seeded ids.
type model struct {
	tools      weighted
	principals weighted
	sessions   int
	start, end time.Time
}

func newModel(end time.Time) model {
	ws := make([]float64, len(toolNames))
	for i := range ws {
		ws[i] = 1 / float64(i+1)
	}
	return model{
		tools:      newWeighted(toolNames, ws),
		principals: zipf("user-", 200, 0.8),
		sessions:   10000,
		start:      end.Add(-30 * 24 * time.Hour),
		end:        end,
	}
}

// samples are seeded values the query runner looks up.
type samples struct {
	ids, callIDs, decisionIDs, sessions []string
}

// reservoir keeps a uniform sample of at most k strings.
type reservoir struct {
	k    int
	seen int
	vals []string
}

func (r *reservoir) add(rng *rand.Rand, v string) {
	r.seen++
	if len(r.vals) < r.k {
		r.vals = append(r.vals, v)
		return
	}
	if j := rng.IntN(r.seen); j < r.k {
		r.vals[j] = v
	}
}

// batch is events ready for Store.Insert.
type batch struct {
	events []*audit.Event
	raws   [][]byte
}

// entries pairs the events with their raw JSON, as Store.Insert takes them.
func (b batch) entries() []audit.Entry {
	out := make([]audit.Entry, len(b.events))
	for i, ev := range b.events {
		out[i] = audit.Entry{Event: ev, Raw: b.raws[i]}
	}
	return out
}

// uuidV7 makes a UUID v7 string from a time in ms, as the gateway's ids
// are: they sort with time.
func uuidV7(r *rand.Rand, ms int64) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[8:], r.Uint64())
	binary.BigEndian.PutUint64(b[0:], uint64(ms)<<16|uint64(r.Uint32()&0x0fff))
	b[6] = (b[6] & 0x0f) | 0x70
	b[8] = (b[8] & 0x3f) | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

// chainGen produces one generator's share (two run in parallel) of a
// tenant's events, oldest first, as valid events: hash computed with
// audit.ComputeHash over the canonical JSON, raw the canonical JSON with
// the hash, exactly as audit.Log appends them (the integrator then puts
// them into the tenant's tree).
type chainGen struct {
	tenant, chain string
	n             int
	m             *model
	rng           *rand.Rand
	samples       *sampleSet
}

// sampleSet are the reservoirs of one chain.
type sampleSet struct {
	ids, calls, decisions, sessions reservoir
}

func newSampleSet(k int) *sampleSet {
	return &sampleSet{ids: reservoir{k: k}, calls: reservoir{k: k}, decisions: reservoir{k: k}, sessions: reservoir{k: k}}
}

func (g *chainGen) run(ctx context.Context, size int, out chan<- batch) error {
	// Calls spread evenly over the window; about 1.8 events per call.
	calls := int(float64(g.n)/1.78) + 1
	step := g.m.end.Sub(g.m.start).Milliseconds() / int64(calls)
	if step < 1 {
		step = 1
	}
	t := g.m.start.UnixMilli()
	var seq int64
	b := batch{}
	emit := func(ev *audit.Event) error {
		seq++
		ev.Chain, ev.Seq, ev.PrevHash, ev.Hash = "", 0, "", "" // as audit.Log writes events now
		raw, err := canonical(ev)
		if err != nil {
			return err
		}
		h, err := audit.ComputeHash(raw)
		if err != nil {
			return err
		}
		ev.Hash = h
		if raw, err = canonical(ev); err != nil {
			return err
		}
		b.events = append(b.events, ev)
		b.raws = append(b.raws, raw)
		if len(b.events) == size {
			select {
			case out <- b:
			case <-ctx.Done():
				return ctx.Err()
			}
			b = batch{}
		}
		return nil
	}
	for k := 0; seq < int64(g.n); k++ {
		t += step/2 + g.rng.Int64N(step)
		principal := g.m.principals.pick(g.rng)
		// A session belongs to one principal: derive it from the principal
		// so that session filters return one principal's calls.
		session := fmt.Sprintf("sess-%05d", (int(hashString(principal))*7919+g.rng.IntN(50))%g.m.sessions)
		tool := g.m.tools.pick(g.rng)
		callID := uuidV7(g.rng, t)
		decisionID := uuidV7(g.rng, t)
		outcome := decisionOutcomes.pick(g.rng)
		dec := g.event(t, principal, session, tool, callID, decisionID, audit.PhaseDecision, outcome)
		if err := emit(dec); err != nil {
			return err
		}
		g.samples.calls.add(g.rng, callID)
		g.samples.decisions.add(g.rng, decisionID)
		g.samples.ids.add(g.rng, dec.ID)
		g.samples.sessions.add(g.rng, session)
		if outcome == "allow" && seq < int64(g.n) {
			rt := t + 5 + g.rng.Int64N(800)
			res := g.event(rt, principal, session, tool, callID, decisionID, audit.PhaseResult, resultOutcomes.pick(g.rng))
			res.Result = &audit.ResultInfo{IsError: res.Outcome == "tool_error", Bytes: 200 + g.rng.IntN(8000)}
			if err := emit(res); err != nil {
				return err
			}
			g.samples.ids.add(g.rng, res.ID)
		}
	}
	if len(b.events) > 0 {
		select {
		case out <- b:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func hashString(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h >> 1
}

// event is a realistic event of about 800 bytes of JSON, shaped like the
// gateway's (masked input document, reasons, durations).
func (g *chainGen) event(ms int64, principal, session, tool, callID, decisionID, phase, outcome string) *audit.Event {
	reasons := []string{}
	if phase == audit.PhaseDecision {
		switch outcome {
		case "allow":
			reasons = []string{"role developer may use " + tool}
		case "denied":
			reasons = []string{"path outside the workspace", "role developer may not use " + tool}
		case "invalid_arguments":
			reasons = []string{"/path: missing property"}
		case "unavailable":
			reasons = []string{tool + " is disabled for this tenant"}
		}
	}
	path := fmt.Sprintf("src/pkg%d/file%d.go", g.rng.IntN(40), g.rng.IntN(200))
	return &audit.Event{
		ID:             uuidV7(g.rng, ms),
		Time:           audit.FormatTime(time.UnixMilli(ms)),
		Tenant:         g.tenant,
		Principal:      principal,
		Client:         "platform-a",
		CallID:         callID,
		DecisionID:     decisionID,
		SessionID:      session,
		Tool:           tool,
		Action:         "tool." + tool,
		Phase:          phase,
		Outcome:        outcome,
		Reasons:        reasons,
		PolicyRevision: "rev-42",
		RequestDigest:  "sha256:3f1c8e8a0c6f4b1d9e2a7c5b8d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a",
		Input: map[string]any{
			"version":   1,
			"tenant":    g.tenant,
			"principal": map[string]any{"id": principal, "roles": []any{"developer"}, "groups": []any{}},
			"tool":      map[string]any{"name": tool, "kind": "builtin", "effects": []any{"fs.read"}},
			"action":    "tool." + tool,
			"resources": []any{map[string]any{"type": "file", "path": path, "access": "read"}},
			"args":      map[string]any{"path": path, "offset": 1, "limit": 200},
		},
		DurationsUS: map[string]int64{"prepare": int64(20 + g.rng.IntN(200)), "decide": int64(20 + g.rng.IntN(200))},
	}
}

// canonical is the RFC 8785 JSON of ev, as audit.Log stores it.
func canonical(ev *audit.Event) ([]byte, error) {
	b, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	v := jsontext.Value(b)
	if err := v.Canonicalize(); err != nil {
		return nil, err
	}
	return v, nil
}

// seedTenant appends n events for tenant, from two generators running in
// parallel, in batches of size rows per Store.Insert (one transaction
// each). It returns samples of the seeded ids.
func seedTenant(ctx context.Context, store audit.Store, m *model, tenant string, n, size int, seed uint64, progress func(done int)) (samples, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	chains := []string{"replica-a", "replica-b"}
	out := make(chan batch, 4)
	errc := make(chan error, len(chains))
	sets := make([]*sampleSet, len(chains))
	for i, c := range chains {
		sets[i] = newSampleSet(5000)
		per := n / len(chains)
		if i == 0 {
			per += n % len(chains)
		}
		g := &chainGen{tenant: tenant, chain: c, n: per, m: m, rng: rand.New(rand.NewPCG(seed, uint64(i)+1)), samples: sets[i]}
		go func() { errc <- g.run(ctx, size, out) }()
	}
	done, running := 0, len(chains)
	for running > 0 {
		select {
		case err := <-errc:
			if err != nil {
				return samples{}, err
			}
			running--
		case b := <-out:
			if err := store.Insert(ctx, b.entries()); err != nil {
				return samples{}, fmt.Errorf("insert: %w", err)
			}
			done += len(b.events)
			progress(done)
		}
	}
	for {
		select {
		case b := <-out: // batches sent before their generator returned
			if err := store.Insert(ctx, b.entries()); err != nil {
				return samples{}, fmt.Errorf("insert: %w", err)
			}
			done += len(b.events)
			progress(done)
			continue
		default:
		}
		break
	}
	var s samples
	for _, set := range sets {
		s.ids = append(s.ids, set.ids.vals...)
		s.callIDs = append(s.callIDs, set.calls.vals...)
		s.decisionIDs = append(s.decisionIDs, set.decisions.vals...)
		s.sessions = append(s.sessions, set.sessions.vals...)
	}
	return s, nil
}
