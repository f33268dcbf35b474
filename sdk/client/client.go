// Package client is a Go client for the Toolgate REST API (v1), covering
// what a platform uses: list the tools a caller is offered, call them one
// by one or in batches, ask for decisions without running anything (PDP
// mode), poll held and ask-user calls, approve or deny held calls, answer
// questions, and read, export, verify and prove the audit log.
//
// The request and response types are the API's own wire types (package
// github.com/toolgate/toolgate/api/v1, re-exported here under shorter
// names), the ones the server encodes with, so the two cannot drift.
//
// Outcomes that are tool results — ok, tool_error, denied, unavailable,
// invalid_arguments, approval_required, awaiting_user — come back as a
// *CallResult with Content for the model. Failures that are not tool
// results (401, 403, 404, 409, 413, 415, 424, 429, 503, …) are returned as
// *Error; test their kind with errors.Is and the sentinels ErrRateLimited,
// ErrConflict, ErrNotFound, ErrPermanent, … and read RetryAfter from the
// *Error (errors.As).
package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"

	apiv1 "github.com/toolgate/toolgate/api/v1"
)

// Client calls one gateway with one credential. It is safe for concurrent
// use.
type Client struct {
	base  *url.URL
	token string
	hc    *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client (default: one with a 2 minute
// timeout, longer than the longest long-poll).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// New returns a client for the gateway at baseURL (e.g.
// "http://127.0.0.1:8080") sending token (a JWT or an API key) as the
// bearer credential.
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: base URL must be an absolute http or https URL")
	}
	c := &Client{base: u, token: token, hc: &http.Client{Timeout: 2 * time.Minute}}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Error is a failure that is not a tool result: {"error":{"code","message"}}
// with its HTTP status. Compare it with the sentinels (errors.Is(err,
// client.ErrRateLimited)).
type Error struct {
	Status  int
	Code    string // e.g. "unauthenticated", "rate_limited", "conflict", "permanent_failure"
	Message string
	// CallID and DecisionID are set on permanent failures, and on a call
	// or decision a rate limit refused (its audited decision event).
	CallID     string
	DecisionID string
	// RetryAfter is the server's Retry-After (429 rate_limited, a 503 of
	// an overloaded audit log), 0 when it sent none. Nothing ran: retry
	// the same request (same call_id) after it.
	RetryAfter time.Duration
	// Results is, for a batch a failure canceled, what became of each
	// call (entries with Error are the failed ones).
	Results []BatchResult
}

func (e *Error) Error() string {
	return fmt.Sprintf("toolgate: %d %s: %s", e.Status, e.Code, e.Message)
}

// Kinds of *Error, for errors.Is.
var (
	ErrUnauthenticated = errors.New("toolgate: unauthenticated")        // 401
	ErrForbidden       = errors.New("toolgate: forbidden")              // 403
	ErrNotFound        = errors.New("toolgate: not found")              // 404
	ErrConflict        = errors.New("toolgate: conflict")               // 409: decided, answered, or a call_id reused differently
	ErrInvalidRequest  = errors.New("toolgate: invalid request")        // 400, 413, 415
	ErrPermanent       = errors.New("toolgate: permanent tool failure") // 424: end the run rather than retry
	ErrRateLimited     = errors.New("toolgate: rate limited")           // 429: retry after RetryAfter
	ErrUnavailable     = errors.New("toolgate: unavailable")            // 503: failed closed, nothing ran
)

// Is reports whether e is of the kind target names.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrUnauthenticated:
		return e.Status == http.StatusUnauthorized
	case ErrForbidden:
		return e.Status == http.StatusForbidden
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrConflict:
		return e.Status == http.StatusConflict
	case ErrInvalidRequest:
		return e.Status == http.StatusBadRequest || e.Status == http.StatusRequestEntityTooLarge || e.Status == http.StatusUnsupportedMediaType
	case ErrPermanent:
		return e.Status == http.StatusFailedDependency || e.Code == apiv1.CodePermanentFailure
	case ErrRateLimited:
		return e.Status == http.StatusTooManyRequests
	case ErrUnavailable:
		return e.Status == http.StatusServiceUnavailable
	}
	return false
}

// IsPermanent reports whether err is a permanent failure a tool declared
// (HTTP 424): the run should end rather than retry.
func IsPermanent(err error) bool { return errors.Is(err, ErrPermanent) }

// RetryAfter reports how long to wait before retrying a request that
// failed with err, when the server said so (429, or 503 while the audit
// log is overloaded).
func RetryAfter(err error) (time.Duration, bool) {
	var e *Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		return e.RetryAfter, true
	}
	return 0, false
}

// request is one API request.
type request struct {
	method, path string
	query        url.Values
	body         any // marshaled as JSON when not nil
}

// send performs r and returns the response of a 200 (the caller closes
// its body) or the *Error of any other status.
func (c *Client) send(ctx context.Context, r request) (*http.Response, error) {
	// r.path has its variable segments escaped (seg).
	target := c.base.String() + r.path
	if q := r.query.Encode(); q != "" {
		target += "?" + q
	}
	var rd io.Reader
	if r.body != nil {
		b, err := json.Marshal(r.body)
		if err != nil {
			return nil, fmt.Errorf("client: encoding the request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target, rd)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return nil, errorOf(resp, b)
}

// errorOf reads a non-200 answer.
func errorOf(resp *http.Response, b []byte) *Error {
	e := &Error{Status: resp.StatusCode, Code: "http_" + strconv.Itoa(resp.StatusCode), Message: http.StatusText(resp.StatusCode)}
	var body apiv1.BatchResponse // an ErrorBody, with results for a batch
	if json.Unmarshal(b, &body) == nil && body.Error != nil && body.Error.Code != "" {
		e.Code, e.Message, e.CallID, e.DecisionID = body.Error.Code, body.Error.Message, body.Error.CallID, body.Error.DecisionID
		e.Results = body.Results
	}
	e.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	return e
}

// parseRetryAfter reads delay-seconds or an HTTP date (RFC 9110 §10.2.3).
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
		if n < 0 {
			return 0
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// do performs r and decodes a 200's JSON body into out.
func (c *Client) do(ctx context.Context, r request, out any) error {
	resp, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("client: reading the response: %w", err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("client: decoding the response: %w", err)
	}
	return nil
}

// text performs r and returns a 200's body as is (text/plain routes).
func (c *Client) text(ctx context.Context, r request) ([]byte, error) {
	resp, err := c.send(ctx, r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("client: reading the response: %w", err)
	}
	return b, nil
}

// seg escapes one path segment.
func seg(s string) string { return url.PathEscape(s) }

// IsRateLimited reports whether err is a 429 rate_limited (a policy's
// rate_limit, the tenant's request rate, approvals.max_pending or the
// tenant's long polls) and how long the gateway asks to wait before trying
// again. Nothing ran.
func IsRateLimited(err error) (retryAfter time.Duration, ok bool) {
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusTooManyRequests {
		return e.RetryAfter, true
	}
	return 0, false
}
