package audit

import (
	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/canonical"
)

// canonicalEvent writes ev as RFC 8785 canonical JSON in one pass: its
// members in sorted order, with the same omissions as json.Marshal of the
// struct (client, concealed, obligations, decision, result, approval,
// question, shadow, error, trace_id and leaf_version when empty; nil slices and maps as [] and
// {}). chain_test.go checks it against marshal + Canonicalize.
func canonicalEvent(ev *Event) ([]byte, error) {
	b, _, err := canonicalEventAt(ev)
	return b, err
}

// approvalValue is an ApprovalInfo as json.Marshal shows it (empty
// optional members left out).
func approvalValue(a *ApprovalInfo) map[string]any {
	m := map[string]any{"id": a.ID}
	for k, v := range map[string]string{"expires_at": a.ExpiresAt, "by": a.By, "comment": a.Comment} {
		if v != "" {
			m[k] = v
		}
	}
	return m
}

// errorValue is an AuditError as json.Marshal shows it.
func errorValue(e *apiv1.AuditError) map[string]any {
	m := map[string]any{"code": e.Code, "message": e.Message}
	if e.Location != "" {
		m["location"] = e.Location
	}
	return m
}

// questionValue is a QuestionInfo as json.Marshal shows it.
func questionValue(q *QuestionInfo) map[string]any {
	m := map[string]any{"id": q.ID}
	if q.ExpiresAt != "" {
		m["expires_at"] = q.ExpiresAt
	}
	if q.By != "" {
		m["by"] = q.By
	}
	return m
}

// eventOffsets locate the chain-link members in canonical event bytes, as
// template needs them.
type eventOffsets struct{ hashName, hashVal, prevVal, seqVal int }

// canonicalEventAt is canonicalEvent that also reports where it wrote the
// hash, prev_hash and seq members.
func canonicalEventAt(ev *Event) ([]byte, eventOffsets, error) {
	return canonicalEventInto(make([]byte, 0, 2048), ev)
}

// canonicalEventInto is canonicalEventAt writing into buf (from its
// start), so that the hot path can reuse buffers.
func canonicalEventInto(buf []byte, ev *Event) ([]byte, eventOffsets, error) {
	b := buf[:0]
	var at eventOffsets
	var err error
	str := func(name, v string) {
		if err != nil {
			return
		}
		b = append(b, ',')
		b = append(b, name...)
		b, err = canonical.AppendString(b, v)
	}
	val := func(name string, v any) {
		if err != nil {
			return
		}
		b = append(b, ',')
		b = append(b, name...)
		b, err = canonical.Append(b, v)
	}
	// Names are written pre-quoted, with their colon, in RFC 8785 order.
	b = append(b, '{')
	b = append(b, `"action":`...)
	if b, err = canonical.AppendString(b, ev.Action); err != nil {
		return nil, at, err
	}
	if a := ev.Approval; a != nil {
		val(`"approval":`, approvalValue(a))
	}
	str(`"call_id":`, ev.CallID)
	str(`"chain":`, ev.Chain)
	if ev.Client != "" {
		str(`"client":`, ev.Client)
	}
	if ev.Concealed {
		b = append(b, `,"concealed":true`...)
	}
	if ev.Decision != nil {
		val(`"decision":`, ev.Decision)
	}
	str(`"decision_id":`, ev.DecisionID)
	if ev.DurationsUS == nil {
		val(`"durations_us":`, map[string]any{})
	} else {
		val(`"durations_us":`, ev.DurationsUS)
	}
	if e := ev.Error; e != nil {
		val(`"error":`, errorValue(e))
	}
	at.hashName = len(b) + 1 // after the comma
	at.hashVal = at.hashName + len(`"hash":`)
	str(`"hash":`, ev.Hash)
	str(`"id":`, ev.ID)
	if ev.Input == nil {
		val(`"input":`, map[string]any{})
	} else {
		val(`"input":`, ev.Input)
	}
	if ev.LeafVersion != 0 && err == nil {
		b = append(b, `,"leaf_version":`...)
		b, err = canonical.Append(b, ev.LeafVersion)
	}
	if ev.MCPRequestID != "" {
		str(`"mcp_request_id":`, ev.MCPRequestID)
	}
	if len(ev.Obligations) > 0 {
		val(`"obligations":`, ev.Obligations)
	}
	str(`"outcome":`, ev.Outcome)
	str(`"phase":`, ev.Phase)
	str(`"policy_revision":`, ev.PolicyRevision)
	at.prevVal = len(b) + 1 + len(`"prev_hash":`)
	str(`"prev_hash":`, ev.PrevHash)
	str(`"principal":`, ev.Principal)
	if q := ev.Question; q != nil {
		val(`"question":`, questionValue(q))
	}
	if ev.Reasons == nil {
		val(`"reasons":`, []string{})
	} else {
		val(`"reasons":`, ev.Reasons)
	}
	str(`"request_digest":`, ev.RequestDigest)
	if r := ev.Result; r != nil && err == nil {
		b = append(b, `,"result":{"bytes":`...)
		b, err = canonical.Append(b, int64(r.Bytes))
		if r.Error != "" {
			str(`"error":`, r.Error)
		}
		if err == nil {
			b = append(b, `,"is_error":`...)
			b, err = canonical.Append(b, r.IsError)
			b = append(b, `,"truncated":`...)
			b, err = canonical.Append(b, r.Truncated)
			b = append(b, '}')
		}
	}
	at.seqVal = len(b) + 1 + len(`"seq":`)
	val(`"seq":`, ev.Seq)
	str(`"session_id":`, ev.SessionID)
	if sh := ev.Shadow; sh != nil {
		val(`"shadow":`, map[string]any{"diverged": sh.Diverged, "outcome": sh.Outcome, "revision": sh.Revision})
	}
	str(`"tenant":`, ev.Tenant)
	str(`"time":`, ev.Time)
	str(`"tool":`, ev.Tool)
	if ev.TraceID != "" {
		str(`"trace_id":`, ev.TraceID)
	}
	if ev.Via != "" {
		str(`"via":`, ev.Via)
	}
	if err != nil {
		return nil, at, err
	}
	return append(b, '}'), at, nil
}
