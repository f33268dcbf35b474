package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	apiv1 "github.com/toolgate/toolgate/api/v1"
)

// MaxPollWait is the longest long-poll the gateway holds a CallStatus
// request.
const MaxPollWait = 60 * time.Second

// OutcomePending is a polled call's outcome while it waits for a human or
// an answer.
const OutcomePending = apiv1.OutcomePending

// CallStatus reads a call held for approval or an ask-user call (GET
// /v1/calls/{call_id}); only the call's own principal sees it. With wait
// > 0 the gateway holds the request while the call is pending, up to wait
// (at most MaxPollWait), and answers as soon as it is decided or answered.
func (c *Client) CallStatus(ctx context.Context, callID string, wait time.Duration) (*CallStatus, error) {
	q := url.Values{}
	if wait > 0 {
		q.Set("wait", strconv.Itoa(int(min(wait, MaxPollWait).Round(time.Second)/time.Second))+"s")
	}
	var out CallStatus
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/calls/" + seg(callID), query: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WaitForCall long-polls a held or ask-user call until it is no longer
// pending (approved and run, denied, expired, answered) or ctx ends.
func (c *Client) WaitForCall(ctx context.Context, callID string) (*CallStatus, error) {
	for {
		st, err := c.CallStatus(ctx, callID, 30*time.Second)
		if err != nil || st.Outcome != OutcomePending {
			return st, err
		}
		if err := ctx.Err(); err != nil {
			return st, err
		}
	}
}

// Question is an answered ask-user question.
type Question = apiv1.Question

// Answer answers an ask-user question once (POST
// /v1/questions/{id}/answer); the asking call then reads the answer as its
// result (CallStatus, WaitForCall). An answered question is ErrConflict,
// an unknown, expired or foreign one ErrNotFound.
func (c *Client) Answer(ctx context.Context, questionID, answer string) (*Question, error) {
	var out Question
	err := c.do(ctx, request{method: http.MethodPost, path: "/v1/questions/" + seg(questionID) + "/answer",
		body: apiv1.AnswerRequest{Answer: answer}}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// PendingQuestion is an ask-user question waiting for its answer.
type PendingQuestion = apiv1.PendingQuestion

// Questions lists the pending ask-user questions the caller may answer
// (its own, and others' when policy lets it answer for them), newest
// first; limit 0 takes the gateway's default (100).
func (c *Client) Questions(ctx context.Context, limit int) ([]PendingQuestion, error) {
	v := url.Values{}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	var out apiv1.QuestionList
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/questions", query: v}, &out); err != nil {
		return nil, err
	}
	return out.Questions, nil
}
