package backend

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/pipeline"
	"github.com/toolgate/toolgate/internal/service"
)

// The pipeline's failures keep today's statuses, messages and
// Retry-After: the gateway fails closed and says what failed, never how.
func TestPipelineFailuresMapAsBefore(t *testing.T) {
	for _, c := range []struct {
		err   error
		kind  service.Kind
		msg   string
		retry time.Duration
	}{
		{fmt.Errorf("%w: rego_type_error: secret detail", pipeline.ErrPolicy), service.KindUnavailable, "policy is unavailable; nothing was run", 0},
		{fmt.Errorf("%w: queue", pipeline.ErrOverloaded), service.KindUnavailable, "audit log is overloaded; nothing was run", time.Second},
		{fmt.Errorf("%w: disk full", pipeline.ErrAudit), service.KindUnavailable, "audit log is unavailable; nothing was run", 0},
		{fmt.Errorf("%w: conn refused", pipeline.ErrLimits), service.KindUnavailable, "rate limits cannot be counted; nothing was run", 0},
		{errors.New("boom"), service.KindInternal, "internal error; nothing was run", 0},
		{&pipeline.LimitError{Limit: pipeline.LimitLongPolls, RetryAfter: 3 * time.Second}, service.KindRateLimited,
			"too many long polls of this tenant are waiting; retry after the Retry-After delay, or poll without wait", 3 * time.Second},
		{pipeline.ErrKeyWait, service.KindUnavailable, "the first request with this call_id is still running; retry with the same call_id to get its response", time.Second},
	} {
		e := callError(c.err)
		if e.Kind != c.kind || e.Message != c.msg || e.RetryAfter != c.retry {
			t.Errorf("%v → %s %q retry %s, want %s %q retry %s", c.err, e.Kind, e.Message, e.RetryAfter, c.kind, c.msg, c.retry)
		}
		if strings.Contains(e.Message, "detail") || strings.Contains(e.Message, "disk") {
			t.Errorf("%v leaks its cause: %q", c.err, e.Message)
		}
		if !errors.Is(e, c.err) {
			t.Errorf("%v: the cause is not kept for logs", c.err)
		}
	}
}

func TestKeyErrorsNameTheirCall(t *testing.T) {
	if e := keyError(pipeline.ErrKeyConflict, "calls[2]: "); e.Kind != service.KindConflict || !strings.HasPrefix(e.Message, "calls[2]: call_id was already used") {
		t.Errorf("conflict: %+v", e)
	}
	u := &pipeline.UnfinishedError{CallID: "c1", DecisionID: "d1", Started: true, Outcome: apiv1.OutcomeToolError}
	e := keyError(fmt.Errorf("x: %w", u), "")
	if e.Kind != service.KindUnfinished || e.CallID != "c1" || e.DecisionID != "d1" ||
		!strings.Contains(e.Message, "the tool may have run") || !strings.Contains(e.Message, "(the last of them says tool_error)") {
		t.Errorf("unfinished: %+v", e)
	}
	u = &pipeline.UnfinishedError{CallID: "c1", DecisionID: "d1", Started: true, Outcome: apiv1.OutcomeAllow}
	if e := keyError(u, ""); strings.Contains(e.Message, "last of them") {
		t.Errorf("an allow outcome is named: %q", e.Message)
	}
	if e := keyError(pipeline.ErrPolicy, ""); e != nil {
		t.Errorf("a policy failure is a key error: %+v", e)
	}
}
