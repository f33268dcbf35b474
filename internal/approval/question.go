package approval

import (
	"context"
	"errors"
	"time"
)

// Statuses of a question (ask-user). A question is pending until the
// user's answer arrives or it expires.
const (
	QuestionPending  = "pending"
	QuestionAnswered = "answered"
	QuestionExpired  = "expired"
)

// Question is what an ask-user call asked the caller's user, kept beside
// the held calls with the same lifecycle rules: tenant-scoped, conditional
// transitions, an expiry.
type Question struct {
	ID         string
	Tenant     string
	CallID     string
	DecisionID string // of the decision that allowed the ask-user call
	SessionID  string
	Principal  string // who asked (the call's principal)
	Client     string
	Tool       string
	Action     string
	// Digest is the ask-user call's request document digest.
	Digest         string
	PolicyRevision string
	// Document is the unmasked request document: a second decision (an
	// answer by someone other than the asker) is taken on it. It never
	// leaves the gateway.
	Document map[string]any
	// Input is the document as the audit log shows it (masked).
	Input map[string]any
	// Text and Options are the question as the tool prepared it; Options
	// is empty when any answer goes.
	Text      string
	Options   []string
	CreatedAt time.Time
	ExpiresAt time.Time

	Status     string
	Answer     string
	AnsweredBy string
	AnsweredAt time.Time // when it was answered or expired; zero while pending
}

// Answer is one answer to a pending question.
type Answer struct {
	Text string
	By   string
	At   time.Time
}

// ErrNotOffered: the answer is not one of the question's options.
var ErrNotOffered = errors.New("approval: answer is not one of the options")

// Questions persists ask-user questions. Every method is scoped by
// tenant; another tenant's question is ErrNotFound.
type Questions interface {
	// CreateQuestion stores a new pending question.
	CreateQuestion(ctx context.Context, q *Question) error
	// Question returns one question or ErrNotFound.
	Question(ctx context.Context, tenant, id string) (*Question, error)
	// QuestionByCall returns the newest question of a call id or
	// ErrNotFound.
	QuestionByCall(ctx context.Context, tenant, callID string) (*Question, error)
	// AnswerQuestion moves a pending question whose expiry is after a.At
	// to answered, atomically: of concurrent answers exactly one
	// succeeds, the others get ErrNotPending. A pending question past its
	// expiry gives ErrExpired and stays pending (ExpireQuestions moves
	// it); an answer outside the offered options gives ErrNotOffered and
	// changes nothing.
	AnswerQuestion(ctx context.Context, tenant, id string, a Answer) (*Question, error)
	// ExpireQuestions moves the tenant's pending questions whose expiry is
	// at or before now to expired and returns them (each exactly once).
	ExpireQuestions(ctx context.Context, tenant string, now time.Time) ([]*Question, error)
	// ListQuestions returns the tenant's questions matching f (Status is
	// one of the Question statuses, "" for all), newest first.
	ListQuestions(ctx context.Context, tenant string, f Filter) ([]*Question, error)
}

// Offered reports whether text answers q: any text when q offered no
// options, else exactly one of them.
func (q *Question) Offered(text string) bool {
	if len(q.Options) == 0 {
		return true
	}
	for _, o := range q.Options {
		if o == text {
			return true
		}
	}
	return false
}
