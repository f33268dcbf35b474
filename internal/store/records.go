package store

import (
	"errors"
	"fmt"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/approval"
	"github.com/toolgate/toolgate/internal/audit"
)

// errReadOnly: a write on a store opened with ReadOnly.
var errReadOnly = errors.New("store: opened read-only")

// insertRecords writes the records of entries (audit.Entry.Record) with
// exec, inside the transaction of their events. A record that cannot be
// written fails with an *audit.RecordError naming its entry; the caller
// then rolls the whole transaction back.
func insertRecords(entries []audit.Entry, exec func(query string, args ...any) error, dollar bool) error {
	for i, e := range entries {
		if e.Record == nil {
			continue
		}
		q, args, err := insertRecord(e.Event, e.Record, dollar)
		if err == nil {
			err = exec(q, args...)
		}
		if err != nil {
			return &audit.RecordError{Index: i, Err: err}
		}
	}
	return nil
}

// insertRecord is the statement that stores rec, a record of ev. A record
// belongs to its event's tenant.
func insertRecord(ev *audit.Event, rec any, dollar bool) (string, []any, error) {
	switch r := rec.(type) {
	case *approval.Approval:
		if r.Tenant != ev.Tenant {
			return "", nil, errors.New("approval: the record's tenant is not its event's")
		}
		return insertApproval(r, dollar)
	case *approval.Question:
		if r.Tenant != ev.Tenant {
			return "", nil, errors.New("approval: the record's tenant is not its event's")
		}
		return insertQuestion(r, dollar)
	}
	return "", nil, fmt.Errorf("store: no repository keeps records of type %T", rec)
}

// insertApproval is the statement that stores a new pending approval.
func insertApproval(a *approval.Approval, dollar bool) (string, []any, error) {
	if a.ID == "" || a.Tenant == "" {
		return "", nil, errors.New("approval: id and tenant are required")
	}
	req, err := encodeRequest(a)
	if err != nil {
		return "", nil, err
	}
	return placeholders(`INSERT INTO approvals (id, tenant, call_id, principal, tool, status, created_ms, expires_ms, request)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, dollar),
		[]any{a.ID, a.Tenant, a.CallID, a.Principal, a.Tool, approval.StatusPending, a.CreatedAt.UnixMilli(), a.ExpiresAt.UnixMilli(), req},
		nil
}

// insertQuestion is the statement that stores a new pending question.
func insertQuestion(q *approval.Question, dollar bool) (string, []any, error) {
	if q.ID == "" || q.Tenant == "" {
		return "", nil, errors.New("approval: question id and tenant are required")
	}
	req, err := json.Marshal(questionRequest{
		DecisionID: q.DecisionID, SessionID: q.SessionID, Client: q.Client, Tool: q.Tool, Action: q.Action,
		Digest: q.Digest, PolicyRevision: q.PolicyRevision, Document: q.Document, Input: q.Input,
		Text: q.Text, Options: q.Options,
	}, json.Deterministic(true))
	if err != nil {
		return "", nil, fmt.Errorf("approval: encode question: %w", err)
	}
	return placeholders(`INSERT INTO questions (id, tenant, call_id, principal, status, created_ms, expires_ms, request)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, dollar),
		[]any{q.ID, q.Tenant, q.CallID, q.Principal, approval.QuestionPending, q.CreatedAt.UnixMilli(), q.ExpiresAt.UnixMilli(), req},
		nil
}
