package console

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/service"
)

// The overview is the landing page. Everyone signed in gets a welcome
// with the pages their roles allow; auditors also get the last 24 hours
// of their tenant's decisions, read from the audit log (never from the
// process metrics, which mix tenants), and approvers the number of held
// calls waiting.
const (
	overviewHours = 24
	// overviewMaxEvents bounds the decision events the overview reads.
	overviewMaxEvents = 5000
	overviewPage      = 1000
)

// decisionOutcomes are the outcomes of decision events, in the chart's
// stacking order (bottom first), with their colours.
var decisionOutcomes = []struct {
	Outcome apiv1.Outcome
	Color   string
}{
	{apiv1.OutcomeAllow, "#1a7f37"},
	{apiv1.OutcomeApprovalRequired, "#9a6700"},
	{apiv1.OutcomeDenied, "#b42318"},
	{apiv1.OutcomeRateLimited, "#bc4c00"},
	{apiv1.OutcomeUnavailable, "#6e7781"},
	{apiv1.OutcomeInvalidArguments, "#8250df"},
	{apiv1.OutcomeError, "#000000"},
}

type overviewData struct {
	Pages       []navItem // the pages the roles allow besides this one
	Auditor     bool
	Approver    bool
	PolicyAdmin bool

	Pending        int
	PendingMore    bool // at least Pending; the list was cut
	PendingProblem string

	Stats        *overviewStats
	StatsProblem string
	// FailClosed is the process's toolgate_fail_closed_total by cause
	// (all tenants); nil when not wired.
	FailClosed      []causeCount
	FailClosedTotal float64
	FailClosedOn    bool
}

type causeCount struct {
	Cause string
	Count float64
}

type overviewStats struct {
	From, To  time.Time
	Events    int
	Max       int
	Truncated bool // more decisions in the window than were read
	Outcomes  []outcomeCount
	// RateLimited is the rate_limited count (also in Outcomes).
	RateLimited int
	Other       int // events of an outcome not in decisionOutcomes
	Tools       []toolRow
	Chart       chart
	Latency     latency
}

type outcomeCount struct {
	Outcome apiv1.Outcome
	Color   string
	Count   int
}

type toolRow struct {
	Tool   string
	Counts []int // per decisionOutcomes
	Total  int
}

type latency struct {
	N             int
	P50, P90, P99 string
}

// chart is a stacked bar chart drawn as inline SVG (presentation
// attributes only: the CSP forbids style attributes).
type chart struct {
	Width, Height int
	Label         string
	Bars          []bar
	Ticks         []tick // y axis
	Hours         []hourLabel
	Base          string // the y of the x axis
	Left, Right   int
	TickX         int // where the y axis labels end
	MidX, MidY    int
	Empty         bool
}

type bar struct {
	Title    string // the hour and its total
	Segments []segment
}

type segment struct {
	X, Y, W, H string
	Color      string
	Title      string
}

type tick struct {
	Y, LabelY string
	Label     string
}

type hourLabel struct {
	X, Y  string
	Label string
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == Prefix {
		// Mounted at Prefix, the console's "/" also answers Prefix itself.
		http.Redirect(w, r, Prefix+"/", http.StatusMovedPermanently)
		return
	}
	ctx, id := r.Context(), caller(r)
	d := &overviewData{Auditor: id.HasRole(identity.RoleAuditor), Approver: id.HasRole(identity.RoleApprover), PolicyAdmin: id.HasRole(identity.RolePolicyAdmin)}
	for _, item := range nav(r) {
		if item.Key != "overview" {
			d.Pages = append(d.Pages, item)
		}
	}
	status := http.StatusOK
	if d.Approver {
		list, err := s.o.Services.Approvals.Approvals(ctx, id, service.ApprovalFilter{Status: apiv1.ApprovalPending, Limit: service.ApprovalsMaxLimit})
		if err != nil {
			e := service.As(err)
			d.PendingProblem, status = e.Message, e.Kind.HTTPStatus()
		} else {
			d.Pending, d.PendingMore = len(list), len(list) >= service.ApprovalsMaxLimit
		}
	}
	if d.Auditor {
		st, err := s.overviewStats(r)
		if err != nil {
			e := service.As(err)
			d.StatsProblem, status = e.Message, e.Kind.HTTPStatus()
		} else {
			d.Stats = st
		}
		if s.o.FailClosed != nil {
			d.FailClosedOn = true
			for cause, n := range s.o.FailClosed() {
				d.FailClosed = append(d.FailClosed, causeCount{cause, n})
				d.FailClosedTotal += n
			}
			slices.SortFunc(d.FailClosed, func(a, b causeCount) int { return strings.Compare(a.Cause, b.Cause) })
		}
	}
	s.render(w, r, status, "overview", view{Title: "Overview", Active: "overview", Data: d})
}

// overviewStats reads the decision events of the last overviewHours
// hours (whole hours: from the start of the hour overviewHours-1 hours
// ago), newest first, in one pass of at most overviewMaxEvents events.
func (s *Server) overviewStats(r *http.Request) (*overviewStats, error) {
	now := s.o.Now().UTC()
	from := now.Truncate(time.Hour).Add(-(overviewHours - 1) * time.Hour)
	st := &overviewStats{From: from, To: now, Max: overviewMaxEvents}
	index := map[apiv1.Outcome]int{}
	for i, o := range decisionOutcomes {
		index[o.Outcome] = i
		st.Outcomes = append(st.Outcomes, outcomeCount{Outcome: o.Outcome, Color: o.Color})
	}
	var buckets [overviewHours][]int
	for i := range buckets {
		buckets[i] = make([]int, len(decisionOutcomes))
	}
	tools := map[string]*toolRow{}
	var totals []int64

	f := service.AuditFilter{Phase: apiv1.PhaseDecision, From: from, Limit: overviewPage}
read:
	for {
		page, err := s.o.Services.Audit.Events(r.Context(), caller(r), f)
		if err != nil {
			return nil, err
		}
		for _, ev := range page.Events {
			if st.Events == overviewMaxEvents {
				st.Truncated = true
				break read
			}
			st.Events++
			k, known := index[apiv1.Outcome(ev.Outcome)]
			if !known {
				st.Other++
			} else {
				st.Outcomes[k].Count++
				t, err := time.Parse(time.RFC3339Nano, ev.Time)
				if b := int(t.Sub(from) / time.Hour); err == nil && b >= 0 && b < overviewHours {
					buckets[b][k]++
				}
			}
			row := tools[ev.Tool]
			if row == nil {
				row = &toolRow{Tool: ev.Tool, Counts: make([]int, len(decisionOutcomes)+1)}
				tools[ev.Tool] = row
			}
			row.Total++
			if known {
				row.Counts[k]++
			} else {
				row.Counts[len(decisionOutcomes)]++
			}
			if len(ev.DurationsUS) > 0 {
				var sum int64
				for _, us := range ev.DurationsUS {
					sum += us
				}
				totals = append(totals, sum)
			}
		}
		if page.NextCursor == "" {
			break
		}
		f.Cursor = page.NextCursor
	}
	for _, row := range tools {
		if st.Other == 0 {
			row.Counts = row.Counts[:len(decisionOutcomes)]
		}
		st.Tools = append(st.Tools, *row)
	}
	slices.SortFunc(st.Tools, func(a, b toolRow) int {
		if a.Total != b.Total {
			return b.Total - a.Total
		}
		if a.Tool < b.Tool {
			return -1
		}
		if a.Tool > b.Tool {
			return 1
		}
		return 0
	})
	st.RateLimited = st.Outcomes[index[apiv1.OutcomeRateLimited]].Count
	st.Latency = percentiles(totals)
	st.Chart = drawChart(from, buckets[:])
	return st, nil
}

// percentiles are the nearest-rank p50, p90 and p99 of durations (µs).
func percentiles(us []int64) latency {
	l := latency{N: len(us)}
	if len(us) == 0 {
		return l
	}
	slices.Sort(us)
	at := func(p float64) string {
		i := int(math.Ceil(p/100*float64(len(us)))) - 1
		return formatMicros(us[max(i, 0)])
	}
	l.P50, l.P90, l.P99 = at(50), at(90), at(99)
	return l
}

func formatMicros(us int64) string {
	switch {
	case us < 1000:
		return strconv.FormatInt(us, 10) + " µs"
	case us < 1_000_000:
		return strconv.FormatFloat(float64(us)/1000, 'f', 1, 64) + " ms"
	}
	return strconv.FormatFloat(float64(us)/1e6, 'f', 2, 64) + " s"
}

// The chart's geometry, in SVG user units.
const (
	chartW, chartH                      = 720, 260
	padLeft, padRight, padTop, padBelow = 52, 8, 10, 30
)

// drawChart lays out one stacked bar per hour from from.
func drawChart(from time.Time, buckets [][]int) chart {
	c := chart{Width: chartW, Height: chartH, Left: padLeft, Right: chartW - padRight, TickX: padLeft - 6, MidX: chartW / 2, MidY: chartH / 2,
		Label: fmt.Sprintf("Decisions per hour by outcome, %d hours from %s UTC", len(buckets), from.Format("2006-01-02 15:04"))}
	plotW, plotH := float64(chartW-padLeft-padRight), float64(chartH-padTop-padBelow)
	base := float64(chartH - padBelow)
	c.Base = num(base)
	peak := 0
	for _, b := range buckets {
		sum := 0
		for _, n := range b {
			sum += n
		}
		peak = max(peak, sum)
	}
	c.Empty = peak == 0
	top := niceCeil(peak)
	for _, v := range slices.Compact([]int{0, top / 2, top}) {
		y := base - float64(v)/float64(top)*plotH
		c.Ticks = append(c.Ticks, tick{Y: num(y), LabelY: num(y + 4), Label: strconv.Itoa(v)})
	}
	slot := plotW / float64(len(buckets))
	width := slot * 0.72
	for i, b := range buckets {
		start := from.Add(time.Duration(i) * time.Hour)
		hour := start.Format("15:04") + "–" + start.Add(time.Hour).Format("15:04") + " UTC"
		x := float64(padLeft) + float64(i)*slot + (slot-width)/2
		y := base
		sum := 0
		var segs []segment
		for k, n := range b {
			if n == 0 {
				continue
			}
			sum += n
			h := float64(n) / float64(top) * plotH
			y -= h
			o := decisionOutcomes[k]
			segs = append(segs, segment{X: num(x), Y: num(y), W: num(width), H: num(h), Color: o.Color,
				Title: fmt.Sprintf("%s: %d %s", hour, n, o.Outcome)})
		}
		c.Bars = append(c.Bars, bar{Title: fmt.Sprintf("%s: %d decisions", hour, sum), Segments: segs})
		if i%3 == 0 {
			c.Hours = append(c.Hours, hourLabel{X: num(x + width/2), Y: num(base + 18), Label: start.Format("15:04")})
		}
	}
	return c
}

// niceCeil is the smallest 1, 2 or 5 times a power of ten at or above n
// (at least 1), so the axis has round labels.
func niceCeil(n int) int {
	if n <= 1 {
		return 1
	}
	for p := 1; ; p *= 10 {
		for _, m := range []int{1, 2, 5} {
			if m*p >= n {
				return m * p
			}
		}
	}
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }
