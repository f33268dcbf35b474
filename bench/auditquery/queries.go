package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
)

// shape is one query shape the API offers. filter draws its parameters
// at random from the seeded distributions; get, when set, measures Get
// instead of Query.
type shape struct {
	name   string
	filter func(r *rand.Rand) audit.Filter
	get    func(r *rand.Rand) string
}

// result is the latencies of one shape.
type result struct {
	name     string
	lat      []time.Duration
	rows     int          // events returned, summed
	slowest  audit.Filter // the filter of the slowest measured run
	maxLat   time.Duration
	isGet    bool
	failures int
}

func (r *result) pct(p float64) time.Duration {
	s := slices.Clone(r.lat)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	i = max(0, min(i, len(s)-1))
	return s[i]
}

func pick(r *rand.Rand, vals []string) string { return vals[r.IntN(len(vals))] }

// shapes lists the query shapes: every filter of GET /v1/audit/events
// alone, the common combinations, paging and Get by id.
func shapes(tenant string, m *model, s samples, store audit.Store) []shape {
	span := m.end.Sub(m.start)
	window := func(r *rand.Rand, d time.Duration) (time.Time, time.Time) {
		from := m.start.Add(time.Duration(r.Int64N(int64(span - d))))
		return from, from.Add(d)
	}
	decOutcomes := append(slices.Clone(decisionOutcomes.values), resultOutcomes.values...)
	return []shape{
		{name: "newest page (limit 100)", filter: func(*rand.Rand) audit.Filter { return audit.Filter{Limit: 100} }},
		{name: "next page via cursor (page 2)", filter: func(r *rand.Rand) audit.Filter {
			// The cursor of page 1 of a random principal's events, as a
			// client paging through them would send it.
			f := audit.Filter{Principal: m.principals.pick(r), Limit: 100}
			p, err := store.Query(context.Background(), tenant, f)
			if err == nil {
				f.Cursor = p.NextCursor
			}
			return f
		}},
		{name: "deep cursor (random position)", filter: func(r *rand.Rand) audit.Filter {
			// A cursor far down the unfiltered list: a client that paged
			// back days.
			f := audit.Filter{Limit: 100}
			ms := m.start.UnixMilli() + r.Int64N(span.Milliseconds())
			f.Cursor = audit.EncodeCursor(tenant, f, audit.Position{TimeMS: ms, ID: "ffffffff-ffff-7fff-bfff-ffffffffffff"})
			return f
		}},
		{name: "by tool", filter: func(r *rand.Rand) audit.Filter {
			return audit.Filter{Tool: pick(r, toolNames), Limit: 100}
		}},
		{name: "by principal", filter: func(r *rand.Rand) audit.Filter {
			return audit.Filter{Principal: fmt.Sprintf("user-%d", r.IntN(200)), Limit: 100}
		}},
		{name: "by outcome", filter: func(r *rand.Rand) audit.Filter {
			return audit.Filter{Outcome: pick(r, decOutcomes), Limit: 100}
		}},
		{name: "by phase", filter: func(r *rand.Rand) audit.Filter {
			return audit.Filter{Phase: pick(r, []string{audit.PhaseDecision, audit.PhaseResult}), Limit: 100}
		}},
		{name: "by session_id", filter: func(r *rand.Rand) audit.Filter {
			return audit.Filter{SessionID: pick(r, s.sessions), Limit: 100}
		}},
		{name: "by call_id", filter: func(r *rand.Rand) audit.Filter {
			return audit.Filter{CallID: pick(r, s.callIDs), Limit: 100}
		}},
		{name: "by decision_id", filter: func(r *rand.Rand) audit.Filter {
			return audit.Filter{DecisionID: pick(r, s.decisionIDs), Limit: 100}
		}},
		{name: "time window 1h", filter: func(r *rand.Rand) audit.Filter {
			from, to := window(r, time.Hour)
			return audit.Filter{From: from, To: to, Limit: 100}
		}},
		{name: "time window 1d", filter: func(r *rand.Rand) audit.Filter {
			from, to := window(r, 24*time.Hour)
			return audit.Filter{From: from, To: to, Limit: 100}
		}},
		{name: "principal+outcome", filter: func(r *rand.Rand) audit.Filter {
			return audit.Filter{Principal: fmt.Sprintf("user-%d", r.IntN(200)), Outcome: pick(r, decOutcomes), Limit: 100}
		}},
		{name: "tool+time window 1d", filter: func(r *rand.Rand) audit.Filter {
			from, to := window(r, 24*time.Hour)
			return audit.Filter{Tool: pick(r, toolNames), From: from, To: to, Limit: 100}
		}},
		{name: "tool+time window 7d", filter: func(r *rand.Rand) audit.Filter {
			from, to := window(r, 7*24*time.Hour)
			return audit.Filter{Tool: pick(r, toolNames), From: from, To: to, Limit: 100}
		}},
		{name: "tool+outcome", filter: func(r *rand.Rand) audit.Filter {
			return audit.Filter{Tool: pick(r, toolNames), Outcome: pick(r, decOutcomes), Limit: 100}
		}},
		{name: "limit 1000", filter: func(r *rand.Rand) audit.Filter { return audit.Filter{Limit: 1000} }},
		{name: "Get by id", get: func(r *rand.Rand) string { return pick(r, s.ids) }},
	}
}

// measure runs every shape iters times (after warm rounds) and returns
// the latencies of Store.Query / Store.Get, the calls the API makes.
func measure(ctx context.Context, store audit.Store, tenant string, shs []shape, iters, warm int, seed uint64) []*result {
	var out []*result
	for i, sh := range shs {
		r := rand.New(rand.NewPCG(seed, uint64(i)+100))
		res := &result{name: sh.name, isGet: sh.get != nil}
		for k := range warm + iters {
			var d time.Duration
			var n int
			var err error
			if sh.get != nil {
				id := sh.get(r)
				start := time.Now()
				_, err = store.Get(ctx, tenant, id)
				d = time.Since(start)
				n = 1
			} else {
				f := sh.filter(r)
				start := time.Now()
				var p audit.Page
				p, err = store.Query(ctx, tenant, f)
				d = time.Since(start)
				n = len(p.Events)
				if k >= warm && d > res.maxLat {
					res.maxLat, res.slowest = d, f
				}
			}
			if err != nil {
				res.failures++
				continue
			}
			if k >= warm {
				res.lat = append(res.lat, d)
				res.rows += n
			}
		}
		out = append(out, res)
	}
	return out
}
