package audit

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// Query limits.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Normalize validates f and applies defaults: Limit 0 becomes DefaultLimit;
// a Limit outside 0..MaxLimit, or From after To, is an ErrBadFilter (the
// API answers 400; limits are rejected, not clamped, so a client never
// silently gets fewer events than it asked for). Every Store calls it.
func (f Filter) Normalize() (Filter, error) {
	switch {
	case f.Limit == 0:
		f.Limit = DefaultLimit
	case f.Limit < 0 || f.Limit > MaxLimit:
		return f, fmt.Errorf("%w: limit must be from 1 to %d", ErrBadFilter, MaxLimit)
	}
	if !f.From.IsZero() && !f.To.IsZero() && f.From.After(f.To) {
		return f, fmt.Errorf("%w: from is after to", ErrBadFilter)
	}
	return f, nil
}

// FromMS and ToMS are the inclusive time bounds in Unix milliseconds, or
// ok=false when unbounded. Event times have millisecond precision, so From
// rounds up and To rounds down.
func (f Filter) FromMS() (ms int64, ok bool) {
	if f.From.IsZero() {
		return 0, false
	}
	ms = f.From.UnixMilli()
	if f.From.Sub(time.UnixMilli(ms)) > 0 {
		ms++
	}
	return ms, true
}

// ToMS: see FromMS.
func (f Filter) ToMS() (ms int64, ok bool) {
	if f.To.IsZero() {
		return 0, false
	}
	return f.To.UnixMilli(), true // UnixMilli rounds down
}

// Position is a place in the newest-first order (time_ms DESC, id DESC): a
// page continues with the events strictly after it.
type Position struct {
	TimeMS int64
	ID     string
}

const (
	cursorVersion = 1
	cursorTag     = 8 // bytes of the tag
	maxCursorID   = 256
)

// EncodeCursor returns the opaque cursor for continuing after p. Its tag
// covers the tenant, the filter (everything except Limit and Cursor) and
// the position, so an edited cursor, or one replayed with another tenant or
// other filters, is refused. It is a checksum, not a secret: a forged
// cursor could only move within the caller's own tenant anyway.
func EncodeCursor(tenant string, f Filter, p Position) string {
	b := make([]byte, 0, 1+cursorTag+8+len(p.ID))
	b = append(b, cursorVersion)
	b = append(b, cursorTagOf(tenant, f, p)...)
	b = binary.BigEndian.AppendUint64(b, uint64(p.TimeMS))
	b = append(b, p.ID...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeCursor parses f.Cursor; ok=false when f has no cursor. A malformed
// or edited cursor, or one issued for another tenant or other filters, is
// an ErrBadCursor.
func DecodeCursor(tenant string, f Filter) (p Position, ok bool, err error) {
	if f.Cursor == "" {
		return Position{}, false, nil
	}
	if len(f.Cursor) > 2*maxCursorID {
		return Position{}, false, ErrBadCursor
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(f.Cursor)
	if err != nil || len(b) < 1+cursorTag+8+1 || b[0] != cursorVersion {
		return Position{}, false, ErrBadCursor
	}
	p.TimeMS = int64(binary.BigEndian.Uint64(b[1+cursorTag:]))
	p.ID = string(b[1+cursorTag+8:])
	if !utf8.ValidString(p.ID) || len(p.ID) > maxCursorID ||
		subtle.ConstantTimeCompare(b[1:1+cursorTag], cursorTagOf(tenant, f, p)) != 1 {
		return Position{}, false, ErrBadCursor
	}
	return p, true, nil
}

func cursorTagOf(tenant string, f Filter, p Position) []byte {
	h := sha256.New()
	for _, s := range []string{
		"toolgate-audit-cursor", tenant, f.Tool, f.Principal, f.Outcome, f.Phase,
		f.SessionID, f.CallID, f.DecisionID, boundString(f.FromMS()), boundString(f.ToMS()),
		strconv.FormatInt(p.TimeMS, 10), p.ID,
	} {
		// Length-prefixed, so that field boundaries cannot be shifted.
		var n [binary.MaxVarintLen64]byte
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	return h.Sum(nil)[:cursorTag]
}

func boundString(ms int64, ok bool) string {
	if !ok {
		return "-"
	}
	return strconv.FormatInt(ms, 10)
}

// TimeMS is the event time in Unix milliseconds, the time_ms column of
// the stores; an unparsable time is an ErrInvalidEvent.
func TimeMS(e *Event) (int64, error) {
	return parseTimeMS(e.Time)
}

func parseTimeMS(s string) (int64, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("%w: time is not RFC 3339", ErrInvalidEvent)
	}
	return t.UnixMilli(), nil
}

// Matches reports whether ev passes f's equality filters and time bounds
// (not its cursor). Stores use it for events still in their append
// table, which has no columns to filter on.
func (f Filter) Matches(ev *Event) bool {
	for _, c := range [][2]string{
		{f.Tool, ev.Tool}, {f.Principal, ev.Principal}, {f.Outcome, ev.Outcome}, {f.Phase, ev.Phase},
		{f.SessionID, ev.SessionID}, {f.CallID, ev.CallID}, {f.DecisionID, ev.DecisionID},
	} {
		if c[0] != "" && c[0] != c[1] {
			return false
		}
	}
	ms, err := TimeMS(ev)
	if err != nil {
		return false
	}
	if lo, ok := f.FromMS(); ok && ms < lo {
		return false
	}
	if hi, ok := f.ToMS(); ok && ms > hi {
		return false
	}
	return true
}

// NeedsPending reports whether a query with f must also read events not
// yet integrated: lookups by call_id or decision_id see an event from its
// commit on, other queries once it is integrated.
func (f Filter) NeedsPending() bool { return f.CallID != "" || f.DecisionID != "" }

// Positioned is an event with its place in the newest-first order.
type Positioned struct {
	Pos Position
	Ev  *Event
}

// PageOf builds the page of f (normalized) from rows, the events table's
// matches after the cursor newest first (at most f.Limit+1 of them), and
// pending, events of the append table in any order that Matches selects.
// Pending events at or before the cursor position are skipped; the rest
// are merged in. NextCursor is set when more than f.Limit events remain.
func PageOf(tenant string, f Filter, rows, pending []Positioned) (Page, error) {
	pos, hasPos, err := DecodeCursor(tenant, f)
	if err != nil {
		return Page{}, err
	}
	all := rows
	if len(pending) > 0 {
		all = slices.Clone(rows)
		for _, p := range pending {
			if !hasPos || p.Pos.before(pos) {
				all = append(all, p)
			}
		}
		slices.SortFunc(all, func(a, b Positioned) int {
			if c := cmp.Compare(b.Pos.TimeMS, a.Pos.TimeMS); c != 0 {
				return c
			}
			return cmp.Compare(b.Pos.ID, a.Pos.ID)
		})
	}
	var page Page
	for i, p := range all {
		if i == f.Limit {
			page.NextCursor = EncodeCursor(tenant, f, all[i-1].Pos)
			break
		}
		page.Events = append(page.Events, p.Ev)
	}
	return page, nil
}

// before reports whether p comes after q in the newest-first order, i.e.
// (p.TimeMS, p.ID) < (q.TimeMS, q.ID).
func (p Position) before(q Position) bool {
	return p.TimeMS < q.TimeMS || p.TimeMS == q.TimeMS && p.ID < q.ID
}
