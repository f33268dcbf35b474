package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/approval"
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

func scanQuestion(sc scanner) (*approval.Question, error) {
	var (
		q                                approval.Question
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

func (s *approvals) CreateQuestion(ctx context.Context, q *approval.Question) error {
	query, args, err := insertQuestion(q, s.dollar)
	if err != nil {
		return err
	}
	if _, err := s.w.ExecContext(ctx, query, args...); err != nil {
		return fmt.Errorf("approval: create question: %w", err)
	}
	return nil
}

func (s *approvals) Question(ctx context.Context, tenant, id string) (*approval.Question, error) {
	q, err := scanQuestion(s.r.QueryRowContext(ctx, s.q(`SELECT `+questionColumns+` FROM questions WHERE tenant = ? AND id = ?`), tenant, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, approval.ErrNotFound
	}
	return q, err
}

func (s *approvals) QuestionByCall(ctx context.Context, tenant, callID string) (*approval.Question, error) {
	q, err := scanQuestion(s.r.QueryRowContext(ctx, s.q(`SELECT `+questionColumns+` FROM questions
		WHERE tenant = ? AND call_id = ? ORDER BY created_ms DESC, id DESC LIMIT 1`), tenant, callID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, approval.ErrNotFound
	}
	return q, err
}

func (s *approvals) AnswerQuestion(ctx context.Context, tenant, id string, a approval.Answer) (*approval.Question, error) {
	cur, err := s.Question(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	// The options are immutable, so checking them before the conditional
	// update is not a race.
	if !cur.Offered(a.Text) {
		return cur, approval.ErrNotOffered
	}
	q, err := scanQuestion(s.w.QueryRowContext(ctx, s.q(`UPDATE questions SET status = 'answered', answer = ?, answered_by = ?, answered_ms = ?
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
	if cur.Status != approval.QuestionPending {
		return cur, approval.ErrNotPending
	}
	return cur, approval.ErrExpired
}

func (s *approvals) ExpireQuestions(ctx context.Context, tenant string, now time.Time) ([]*approval.Question, error) {
	return s.manyQuestions(ctx, s.w, "expire questions", `UPDATE questions SET status = 'expired', answered_ms = ?
		WHERE tenant = ? AND status = 'pending' AND expires_ms <= ?
		RETURNING `+questionColumns, now.UnixMilli(), tenant, now.UnixMilli())
}

func (s *approvals) ListQuestions(ctx context.Context, tenant string, f approval.Filter) ([]*approval.Question, error) {
	query := `SELECT ` + questionColumns + ` FROM questions WHERE tenant = ?`
	args := []any{tenant}
	if f.Status != "" {
		query += ` AND status = ?`
		args = append(args, f.Status)
	}
	query += ` ORDER BY created_ms DESC, id DESC LIMIT ?`
	args = append(args, f.PageSize())
	return s.manyQuestions(ctx, s.r, "list questions", query, args...)
}

// manyQuestions runs a query whose rows are questions.
func (s *approvals) manyQuestions(ctx context.Context, db *sql.DB, what, query string, args ...any) ([]*approval.Question, error) {
	rows, err := db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("approval: %s: %w", what, err)
	}
	defer rows.Close()
	out := []*approval.Question{}
	for rows.Next() {
		q, err := scanQuestion(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, rows.Err()
}
