package decision

import (
	"errors"
	"fmt"

	"github.com/open-policy-agent/opa/v1/topdown"
)

// EvalError is a policy's runtime error — a conflict (two values for one
// complete rule), a builtin's error under strict builtin errors, a
// cancelled or timed-out evaluation — as OPA reports it: its code (e.g.
// eval_conflict_error, eval_builtin_error), its message, and where in the
// policy it happened (file:row). It is for policy authors and auditors;
// the model never sees it.
type EvalError struct {
	Code     string
	Message  string
	Location string // file:row, "" when OPA gives none
}

func (e *EvalError) Error() string {
	if e.Location == "" {
		return e.Code + ": " + e.Message
	}
	return fmt.Sprintf("%s: %s (%s)", e.Code, e.Message, e.Location)
}

// EvalErrorOf finds OPA's runtime error in err (as the engine wraps it,
// with ErrEvaluation) and returns it as an EvalError; nil when err holds
// none.
func EvalErrorOf(err error) *EvalError {
	var te *topdown.Error
	if !errors.As(err, &te) {
		return nil
	}
	e := &EvalError{Code: te.Code, Message: te.Message}
	if loc := te.Location; loc != nil {
		e.Location = fmt.Sprintf("%s:%d", loc.File, loc.Row)
	}
	return e
}
