package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-json-experiment/json"

	apiv1 "github.com/toolgate/toolgate/api/v1"
)

// The audit log's wire types (role auditor).
type (
	// AuditEvent is one audit record, with every member the gateway
	// hashed: AuditEvent.ComputeHash reproduces its Hash.
	AuditEvent = apiv1.AuditEvent
	// AuditResult summarizes what a tool returned.
	AuditResult = apiv1.AuditResult
	// Verification is the result of checking the tenant's log against
	// its Merkle tree and signed checkpoints.
	Verification = apiv1.VerifyResult
	// OPAEvent is a line of the opa export: what OPA's decision log has
	// for the same decision.
	OPAEvent = apiv1.OPAEvent
	// InclusionProof proves an event's leaf in a tree of a given size.
	InclusionProof = apiv1.InclusionProof
	// ConsistencyProof proves a smaller tree is a prefix of a larger one.
	ConsistencyProof = apiv1.ConsistencyProof
)

// AuditQuery filters GET /v1/audit/events. Zero fields do not filter.
type AuditQuery struct {
	Tool, Principal, Outcome, Phase string
	SessionID, CallID, DecisionID   string
	From, To                        time.Time
	Limit                           int    // 1..1000, default 100
	Cursor                          string // from AuditPage.NextCursor
}

// AuditPage is one page of events, newest first.
type AuditPage = apiv1.AuditEventPage

func timeRange(v url.Values, from, to time.Time) {
	if !from.IsZero() {
		v.Set("from", from.UTC().Format(time.RFC3339Nano))
	}
	if !to.IsZero() {
		v.Set("to", to.UTC().Format(time.RFC3339Nano))
	}
}

// AuditEvents queries the caller's tenant's audit log.
func (c *Client) AuditEvents(ctx context.Context, q AuditQuery) (*AuditPage, error) {
	v := url.Values{}
	for k, s := range map[string]string{
		"tool": q.Tool, "principal": q.Principal, "outcome": q.Outcome, "phase": q.Phase,
		"session_id": q.SessionID, "call_id": q.CallID, "decision_id": q.DecisionID, "cursor": q.Cursor,
	} {
		if s != "" {
			v.Set(k, s)
		}
	}
	timeRange(v, q.From, q.To)
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out AuditPage
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/audit/events", query: v}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AuditEvent returns one event of the caller's tenant.
func (c *Client) AuditEvent(ctx context.Context, id string) (*AuditEvent, error) {
	var out AuditEvent
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/audit/events/" + seg(id)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// VerifyAudit checks the caller's tenant's log (GET /v1/audit/verify).
func (c *Client) VerifyAudit(ctx context.Context) (*Verification, error) {
	var out Verification
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/audit/verify"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// VerifyCheckpoint checks the current log against a checkpoint saved
// earlier (POST /v1/audit/verify): the log must be an append-only
// extension of it. A note that does not open with the gateway's keys is
// ErrInvalidRequest.
func (c *Client) VerifyCheckpoint(ctx context.Context, checkpoint []byte) (*Verification, error) {
	var out Verification
	err := c.do(ctx, request{method: http.MethodPost, path: "/v1/audit/verify",
		body: apiv1.VerifyRequest{Checkpoint: string(checkpoint)}}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Checkpoint returns the tenant's latest signed checkpoint (a C2SP signed
// note). Right after the first events it may not exist yet: ErrUnavailable
// with RetryAfter.
func (c *Client) Checkpoint(ctx context.Context) ([]byte, error) {
	return c.text(ctx, request{method: http.MethodGet, path: "/v1/audit/checkpoint"})
}

// VerifierKey returns the note verifier key checkpoints are signed with
// (name+hash+base64key), to keep beside saved checkpoints.
func (c *Client) VerifierKey(ctx context.Context) (string, error) {
	b, err := c.text(ctx, request{method: http.MethodGet, path: "/v1/audit/checkpoint/verifier"})
	return string(bytes.TrimSpace(b)), err
}

// InclusionProof proves the event id is in the tenant's tree of size
// events (the size of a checkpoint).
func (c *Client) InclusionProof(ctx context.Context, id string, size uint64) (*InclusionProof, error) {
	var out InclusionProof
	q := url.Values{"size": {strconv.FormatUint(size, 10)}}
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/audit/events/" + seg(id) + "/proof", query: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ConsistencyProof proves the tree of from events is a prefix of the tree
// of to events.
func (c *Client) ConsistencyProof(ctx context.Context, from, to uint64) (*ConsistencyProof, error) {
	var out ConsistencyProof
	q := url.Values{"from": {strconv.FormatUint(from, 10)}, "to": {strconv.FormatUint(to, 10)}}
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/audit/consistency", query: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ErrExportInterrupted is returned by the export methods when the gateway
// ended the stream with its error line (the store failed mid-export): the
// events seen so far are genuine, the export is incomplete.
var ErrExportInterrupted = errors.New("toolgate: export interrupted")

// ExportEvents streams the tenant's events oldest first (GET
// /v1/audit/export?format=ndjson), calling fn for each as it arrives: only
// one line is in memory at a time. Zero times do not bound. fn's error
// stops the export and is returned.
func (c *Client) ExportEvents(ctx context.Context, from, to time.Time, fn func(*AuditEvent) error) error {
	return c.export(ctx, apiv1.ExportNDJSON, from, to, func(line []byte) error {
		ev := new(AuditEvent)
		if err := json.Unmarshal(line, ev); err != nil {
			return fmt.Errorf("client: decoding an export line: %w", err)
		}
		return fn(ev)
	})
}

// ExportOPA streams the tenant's decisions as OPA decision-log events
// (format=opa), oldest first.
func (c *Client) ExportOPA(ctx context.Context, from, to time.Time, fn func(*OPAEvent) error) error {
	return c.export(ctx, apiv1.ExportOPA, from, to, func(line []byte) error {
		ev := new(OPAEvent)
		if err := json.Unmarshal(line, ev); err != nil {
			return fmt.Errorf("client: decoding an export line: %w", err)
		}
		return fn(ev)
	})
}

func (c *Client) export(ctx context.Context, format string, from, to time.Time, fn func([]byte) error) error {
	v := url.Values{"format": {format}}
	timeRange(v, from, to)
	resp, err := c.send(ctx, request{method: http.MethodGet, path: "/v1/audit/export", query: v})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if bytes.HasPrefix(line, []byte(`{"error":`)) {
			var eb apiv1.ErrorBody
			if json.Unmarshal(line, &eb) == nil {
				return fmt.Errorf("%w: %s", ErrExportInterrupted, eb.Error.Message)
			}
		}
		if err := fn(line); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("client: reading the export: %w", err)
	}
	return nil
}
