package approval

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json"
)

const questionColumns = `id, tenant, call_id, principal, status, created_ms, expires_ms, answered_by, answered_ms, answer, request`

// questionRequest is the immutable part of a question, stored as one JSON
// value beside the columns.
type questionRequest struct {
	DecisionID     string         `json:"decision_id"`
	SessionID      string         `json:"session_id"`
	Client         string         `json:"client"`
	Tool           string         `json:"tool"`
	Action         string         `json:"action"`
	Digest         string         `json:"digest"`
	PolicyRevision string         `json:"policy_revision"`
	Document       map[string]any `json:"document"`
	Input          map[string]any `json:"input"`
	Text           string         `json:"text"`
	Options        []string       `json:"options,omitempty"`
}

func scanQuestion(sc scanner) (*Question, error) {
	var (
		q                                Question
		createdMS, expiresMS, answeredMS int64
		req                              []byte
	)
	if err := sc.Scan(&q.ID, &q.Tenant, &q.CallID, &q.Principal, &q.Status, &createdMS, &expiresMS,
		&q.AnsweredBy, &answeredMS, &q.Answer, &req); err != nil {
		return nil, err
	}
	var r questionRequest
	if err := json.Unmarshal(req, &r); err != nil {
		return nil, fmt.Errorf("approval: stored question %s: %w", q.ID, err)
	}
	q.DecisionID, q.SessionID, q.Client, q.Tool, q.Action = r.DecisionID, r.SessionID, r.Client, r.Tool, r.Action
	q.Digest, q.PolicyRevision, q.Document, q.Input = r.Digest, r.PolicyRevision, r.Document, r.Input
	q.Text, q.Options = r.Text, r.Options
	q.CreatedAt, q.ExpiresAt = time.UnixMilli(createdMS).UTC(), time.UnixMilli(expiresMS).UTC()
	if answeredMS > 0 {
		q.AnsweredAt = time.UnixMilli(answeredMS).UTC()
	}
	return &q, nil
}

func (s *sqlStore) CreateQuestion(ctx context.Context, q *Question) error {
	if q.ID == "" || q.Tenant == "" {
		return errors.New("approval: question id and tenant are required")
	}
	req, err := json.Marshal(questionRequest{
		DecisionID: q.DecisionID, SessionID: q.SessionID, Client: q.Client, Tool: q.Tool, Action: q.Action,
		Digest: q.Digest, PolicyRevision: q.PolicyRevision, Document: q.Document, Input: q.Input,
		Text: q.Text, Options: q.Options,
	}, json.Deterministic(true))
	if err != nil {
		return fmt.Errorf("approval: encode question: %w", err)
	}
	_, err = s.db.ExecContext(ctx, s.q(`INSERT INTO questions (id, tenant, call_id, principal, status, created_ms, expires_ms, request)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`),
		q.ID, q.Tenant, q.CallID, q.Principal, QuestionPending, q.CreatedAt.UnixMilli(), q.ExpiresAt.UnixMilli(), req)
	if err != nil {
		return fmt.Errorf("approval: create question: %w", err)
	}
	return nil
}

func (s *sqlStore) Question(ctx context.Context, tenant, id string) (*Question, error) {
	q, err := scanQuestion(s.db.QueryRowContext(ctx, s.q(`SELECT `+questionColumns+` FROM questions WHERE tenant = ? AND id = ?`), tenant, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return q, err
}

func (s *sqlStore) QuestionByCall(ctx context.Context, tenant, callID string) (*Question, error) {
	q, err := scanQuestion(s.db.QueryRowContext(ctx, s.q(`SELECT `+questionColumns+` FROM questions
		WHERE tenant = ? AND call_id = ? ORDER BY created_ms DESC, id DESC LIMIT 1`), tenant, callID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return q, err
}

func (s *sqlStore) AnswerQuestion(ctx context.Context, tenant, id string, a Answer) (*Question, error) {
	cur, err := s.Question(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	// The options are immutable, so checking them before the conditional
	// update is not a race.
	if !cur.Offered(a.Text) {
		return cur, ErrNotOffered
	}
	q, err := scanQuestion(s.db.QueryRowContext(ctx, s.q(`UPDATE questions SET status = 'answered', answer = ?, answered_by = ?, answered_ms = ?
		WHERE tenant = ? AND id = ? AND status = 'pending' AND expires_ms > ?
		RETURNING `+questionColumns), a.Text, a.By, a.At.UnixMilli(), tenant, id, a.At.UnixMilli()))
	if err == nil {
		return q, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("approval: answer: %w", err)
	}
	if cur, err = s.Question(ctx, tenant, id); err != nil {
		return nil, err
	}
	if cur.Status != QuestionPending {
		return cur, ErrNotPending
	}
	return cur, ErrExpired
}

func (s *sqlStore) ExpireQuestions(ctx context.Context, tenant string, now time.Time) ([]*Question, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`UPDATE questions SET status = 'expired', answered_ms = ?
		WHERE tenant = ? AND status = 'pending' AND expires_ms <= ?
		RETURNING `+questionColumns), now.UnixMilli(), tenant, now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("approval: expire questions: %w", err)
	}
	defer rows.Close()
	out := []*Question{}
	for rows.Next() {
		q, err := scanQuestion(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, rows.Err()
}
