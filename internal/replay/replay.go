// Package replay re-evaluates audited decisions against a candidate policy
// revision (impact analysis): how many decisions would change, by tool and
// by direction, with sample event ids. An event whose masked values could
// change the candidate's decision is reported as not replayable rather
// than guessed.
package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/decision"
)

// Querier reads audit events of one tenant (audit.Log and audit.Store
// both do).
type Querier interface {
	Query(ctx context.Context, tenant string, f audit.Filter) (audit.Page, error)
}

// Options bound a replay.
type Options struct {
	Tenants  []string  // tenants to replay; each is queried on its own
	From, To time.Time // inclusive bounds on event time; zero: unbounded
	Samples  int       // sample event ids kept per group; default 5
	// Changes is how many changed decisions the report lists one by one
	// in Changes (newest first); 0 lists none.
	Changes int
}

// Report is what a replay found. Directions are "<old>_to_<new>" with
// outcomes allow, deny and approval (e.g. allow_to_deny).
type Report struct {
	Candidate     string                `json:"candidate"` // the candidate revision id
	Events        int                   `json:"events"`    // decision events read
	Replayed      int                   `json:"replayed"`  // evaluated against the candidate
	Unchanged     int                   `json:"unchanged"`
	Changed       int                   `json:"changed"`
	NotReplayable Group                 `json:"not_replayable"` // masked values matter, or the candidate failed
	Skipped       int                   `json:"skipped"`        // unavailable, invalid arguments, approvals' second decisions
	ByDirection   map[string]*Group     `json:"by_direction"`
	ByTool        map[string]*ToolGroup `json:"by_tool"`
	// Changes lists up to Options.Changes changed decisions, newest
	// first. It is for in-process callers (the console); the JSON report
	// of POST /v1/policy/replay does not carry it.
	Changes []Change `json:"-"`
}

// Change is one audited decision the candidate decides otherwise. From and
// To are the short outcomes of directions (allow, deny, approval).
type Change struct {
	EventID   string
	Time      string
	Tool      string
	Principal string
	From, To  string
}

// Group counts events and keeps a few of their ids.
type Group struct {
	Count   int      `json:"count"`
	Samples []string `json:"samples"`
}

// ToolGroup is one tool's changes by direction.
type ToolGroup struct {
	Changed     int            `json:"changed"`
	ByDirection map[string]int `json:"by_direction"`
}

func (g *Group) add(id string, max int) {
	g.Count++
	if len(g.Samples) < max {
		g.Samples = append(g.Samples, id)
	}
}

// Run replays the decision events of opts.Tenants against candidate.
func Run(ctx context.Context, q Querier, candidate *decision.Revision, opts Options) (*Report, error) {
	if opts.Samples <= 0 {
		opts.Samples = 5
	}
	rep := &Report{
		Candidate: candidate.ID(), NotReplayable: Group{Samples: []string{}},
		ByDirection: map[string]*Group{}, ByTool: map[string]*ToolGroup{},
	}
	for _, tenant := range opts.Tenants {
		f := audit.Filter{Phase: audit.PhaseDecision, From: opts.From, To: opts.To, Limit: 1000}
		for {
			page, err := q.Query(ctx, tenant, f)
			if err != nil {
				return nil, fmt.Errorf("replay: reading the audit log of %s: %w", tenant, err)
			}
			for _, ev := range page.Events {
				if err := rep.replay(ctx, candidate, ev, opts); err != nil {
					return nil, err
				}
			}
			if page.NextCursor == "" {
				break
			}
			f.Cursor = page.NextCursor
		}
	}
	return rep, nil
}

// short names outcomes in directions.
var short = map[apiv1.Outcome]string{apiv1.OutcomeAllow: "allow", apiv1.OutcomeDenied: "deny", apiv1.OutcomeApprovalRequired: "approval"}

func (rep *Report) replay(ctx context.Context, candidate *decision.Revision, ev *audit.Event, opts Options) error {
	samples := opts.Samples
	rep.Events++
	old, ok := short[apiv1.Outcome(ev.Outcome)]
	if _, second := ev.Input["approval"]; !ok || second || ev.Input == nil {
		rep.Skipped++
		return nil
	}
	input, err := ast.InterfaceToValue(ev.Input)
	if err != nil {
		rep.NotReplayable.add(ev.ID, samples)
		return nil
	}
	if masked := maskedRefs(ev.Input); len(masked) > 0 {
		depends, err := candidate.Depends(ctx, input, masked)
		if err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		if depends {
			rep.NotReplayable.add(ev.ID, samples)
			return nil
		}
	}
	d, err := candidate.Decide(ctx, input)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !errors.Is(err, decision.ErrEvaluation) && !errors.Is(err, decision.ErrMalformed) {
			return err
		}
		rep.NotReplayable.add(ev.ID, samples)
		return nil
	}
	rep.Replayed++
	now := "allow"
	switch {
	case !d.Allow:
		now = "deny"
	case d.ApprovalRequired:
		now = "approval"
	}
	if now == old {
		rep.Unchanged++
		return nil
	}
	rep.Changed++
	if len(rep.Changes) < opts.Changes {
		rep.Changes = append(rep.Changes, Change{EventID: ev.ID, Time: ev.Time, Tool: ev.Tool, Principal: ev.Principal, From: old, To: now})
	}
	dir := old + "_to_" + now
	g := rep.ByDirection[dir]
	if g == nil {
		g = &Group{}
		rep.ByDirection[dir] = g
	}
	g.add(ev.ID, samples)
	tg := rep.ByTool[ev.Tool]
	if tg == nil {
		tg = &ToolGroup{ByDirection: map[string]int{}}
		rep.ByTool[ev.Tool] = tg
	}
	tg.Changed++
	tg.ByDirection[dir]++
	return nil
}

// maskedRefs lists the input refs whose stored value is the mask marker.
func maskedRefs(doc map[string]any) []ast.Ref {
	var out []ast.Ref
	var walk func(v any, ref ast.Ref)
	walk = func(v any, ref ast.Ref) {
		switch x := v.(type) {
		case string:
			if x == audit.MaskedValue {
				out = append(out, ref.Copy())
			}
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				walk(x[k], append(ref, ast.StringTerm(k)))
			}
		case []any:
			for i, e := range x {
				walk(e, append(ref, ast.IntNumberTerm(i)))
			}
		}
	}
	walk(doc, ast.InputRootRef.Copy())
	return out
}

// Directions lists the report's directions, sorted, for printing.
func (rep *Report) Directions() []string {
	out := make([]string, 0, len(rep.ByDirection))
	for d := range rep.ByDirection {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// Text renders the report for a terminal.
func (rep *Report) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "candidate revision %s\n", rep.Candidate)
	fmt.Fprintf(&b, "decision events %d: replayed %d, unchanged %d, changed %d, not replayable %d, skipped %d\n",
		rep.Events, rep.Replayed, rep.Unchanged, rep.Changed, rep.NotReplayable.Count, rep.Skipped)
	for _, d := range rep.Directions() {
		g := rep.ByDirection[d]
		fmt.Fprintf(&b, "  %-20s %6d  e.g. %s\n", d, g.Count, strings.Join(g.Samples, ", "))
	}
	tools := make([]string, 0, len(rep.ByTool))
	for t := range rep.ByTool {
		tools = append(tools, t)
	}
	slices.Sort(tools)
	for _, t := range tools {
		tg := rep.ByTool[t]
		var parts []string
		for d, n := range tg.ByDirection {
			parts = append(parts, fmt.Sprintf("%s %d", d, n))
		}
		slices.Sort(parts)
		fmt.Fprintf(&b, "  tool %-15s changed %d (%s)\n", t, tg.Changed, strings.Join(parts, ", "))
	}
	if rep.NotReplayable.Count > 0 {
		fmt.Fprintf(&b, "  not replayable: %d, e.g. %s\n", rep.NotReplayable.Count, strings.Join(rep.NotReplayable.Samples, ", "))
	}
	return b.String()
}
