package audit

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Querier pages through a tenant's events, newest first, as Log.Query does.
// *Log satisfies it.
type Querier interface {
	Query(ctx context.Context, tenant string, f Filter) (Page, error)
}

// Export walk bounds. minExportMS is one millisecond after the zero
// time.Time, which a Filter reads as "unbounded".
const (
	minExportMS        = -62135596800000 + 1
	initialExportWidth = int64(time.Second / time.Millisecond)
	maxExportWidth     = int64(1) << 50 // ~35,000 years: growth never overflows
)

// Export calls fn with all of the tenant's events that match f, oldest
// first: ordered by time, then id, ascending, the exact reverse of Query's
// order. fn receives one batch at a time (at most MaxLimit events, except
// when more than MaxLimit events share one millisecond: that millisecond is
// one batch); a caller that streams can flush after each batch. Export stops
// and returns fn's error when fn fails.
//
// f selects as in Query (equality filters, inclusive From/To); f.Limit and
// f.Cursor must be zero. Errors: ErrBadFilter (From after To, a cursor or a
// limit given) and whatever q.Query returns.
//
// Export never holds more than one batch in memory and needs nothing from a
// Store beyond its newest-first Query, so every Store supports it. It walks
// the time range forwards in windows small enough that each window fits one
// Query page: each window is read newest first and reversed. The walk ends
// at the newest matching event when Export starts, so it terminates while
// events keep arriving; an event committed during the export with a time in
// a window already walked (a slow concurrent append) is not included — pass
// a To in the past for a range that is settled.
func Export(ctx context.Context, q Querier, tenant string, f Filter, fn func([]*Event) error) error {
	return export(ctx, q, tenant, f, MaxLimit, fn)
}

// export is Export with the page size as a parameter, so tests can walk
// windows, overflows and crowded milliseconds with a handful of events.
func export(ctx context.Context, q Querier, tenant string, f Filter, pageSize int, fn func([]*Event) error) error {
	if f.Cursor != "" || f.Limit != 0 {
		return fmt.Errorf("%w: export takes no cursor or limit", ErrBadFilter)
	}
	if _, err := f.Normalize(); err != nil {
		return err
	}
	w := walk{ctx: ctx, q: q, tenant: tenant, f: f, pageSize: pageSize}

	// The newest matching event ends the walk.
	newest, ok, err := w.newestUpTo(0, false)
	if err != nil || !ok {
		return err
	}
	hi := newest
	lo, err := w.oldest(hi)
	if err != nil {
		return err
	}

	width := initialExportWidth
	for lo <= hi {
		end := hi
		if width <= hi-lo {
			end = lo + width - 1
		}
		page, err := w.window(lo, end, "")
		if err != nil {
			return err
		}
		events := page.Events
		if page.NextCursor != "" {
			if end > lo {
				// More than a page: retry with a window sized by the
				// density of the newest page-full, at most half as wide.
				width = narrower(lo, end, page.Events[len(page.Events)-1])
				continue
			}
			// One millisecond holds more than a page: it is one batch.
			if events, err = w.rest(lo, page); err != nil {
				return err
			}
		}
		if len(events) > 0 {
			slices.Reverse(events)
			if err := fn(events); err != nil {
				return err
			}
		}
		if end == hi {
			return nil
		}
		lo = end + 1
		if 4*len(events) <= pageSize && width < maxExportWidth {
			width *= 2
		}
	}
	return nil
}

// walk holds what every query of one export shares.
type walk struct {
	ctx      context.Context
	q        Querier
	tenant   string
	f        Filter
	pageSize int
}

// window reads the newest page of [from, to] (milliseconds, inclusive).
func (w *walk) window(from, to int64, cursor string) (Page, error) {
	f := w.f
	f.From, f.To = time.UnixMilli(from), time.UnixMilli(to)
	f.Limit, f.Cursor = w.pageSize, cursor
	return w.q.Query(w.ctx, w.tenant, f)
}

// newestUpTo returns the time of the newest matching event at or before
// to (or of all, when bounded is false), within the filter's own bounds.
func (w *walk) newestUpTo(to int64, bounded bool) (ms int64, ok bool, err error) {
	f := w.f
	if bounded {
		f.To = time.UnixMilli(to)
	}
	f.Limit = 1
	page, err := w.q.Query(w.ctx, w.tenant, f)
	if err != nil || len(page.Events) == 0 {
		return 0, false, err
	}
	ms, err = TimeMS(page.Events[0])
	return ms, err == nil, err
}

// oldest finds the time of the oldest matching event by bisection, knowing
// one exists at hi: about 45 one-event queries for an unbounded range, each
// an index seek.
func (w *walk) oldest(hi int64) (int64, error) {
	lo := int64(minExportMS)
	if ms, ok := w.f.FromMS(); ok {
		lo = ms
	}
	// Invariant: no event in [lo, a], one at b.
	a, b := lo-1, hi
	for b-a > 1 {
		m := a + (b-a)/2
		t, ok, err := w.newestUpTo(m, true)
		if err != nil {
			return 0, err
		}
		if ok {
			b = t // the newest event at or before m: nothing between t and m
		} else {
			a = m
		}
	}
	return b, nil
}

// rest reads the remaining pages of a single crowded millisecond.
func (w *walk) rest(ms int64, page Page) ([]*Event, error) {
	events := page.Events
	for page.NextCursor != "" {
		var err error
		if page, err = w.window(ms, ms, page.NextCursor); err != nil {
			return nil, err
		}
		events = append(events, page.Events...)
	}
	return events, nil
}

// narrower is the next width after [lo, end] overflowed a page whose oldest
// event is last: the page-full spans [last, end], so about half a page fits
// in half that span. It is at most half the old width and at least 1.
func narrower(lo, end int64, last *Event) int64 {
	width := (end - lo + 1) / 2
	if t, err := TimeMS(last); err == nil && t >= lo && t <= end {
		width = min(width, (end-t+1)/2)
	}
	return max(width, 1)
}
