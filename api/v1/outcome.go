package v1

// Outcome says what became of a call, a decision or a step on a held call.
// It is the one set of outcome words of the whole gateway: the pipeline,
// the invoker, the audit log, replay and both front doors (REST, MCP) use
// these constants, never string literals, so a word cannot drift between
// them. On the wire an outcome is a plain JSON string.
type Outcome string

// Decision outcomes: the "outcome" of a decision event and of
// POST /v1/tools/{name}/decisions (CONTRACT §4). Denied, unavailable,
// invalid_arguments and approval_required are also call outcomes.
const (
	OutcomeAllow            Outcome = "allow"
	OutcomeDenied           Outcome = "denied"
	OutcomeUnavailable      Outcome = "unavailable"
	OutcomeInvalidArguments Outcome = "invalid_arguments"
	OutcomeApprovalRequired Outcome = "approval_required"
	// OutcomeRateLimited: a rate_limit obligation, the tenant's limit or
	// approvals.max_pending refused the call (HTTP 429); nothing ran.
	OutcomeRateLimited Outcome = "rate_limited"
)

// Call outcomes besides the decision outcomes above (CONTRACT §4), and the
// "outcome" of a result event (ok, tool_error).
const (
	OutcomeOK        Outcome = "ok"
	OutcomeToolError Outcome = "tool_error"
	// OutcomeAwaitingUser: ask-user asked a question; the answer arrives
	// later (data.question_id).
	OutcomeAwaitingUser Outcome = "awaiting_user"
	// OutcomeCanceled: a sibling in the same batch failed permanently
	// before this call finished.
	OutcomeCanceled Outcome = "canceled"
)

// Outcomes of a polled call (GET /v1/calls/{call_id}) and of the events of
// a held call (phase "approval") or an ask-user question (phase
// "question").
const (
	OutcomePending  Outcome = "pending"
	OutcomeApproved Outcome = "approved"
	OutcomeExpired  Outcome = "expired"
	OutcomeAnswered Outcome = "answered"
)

// OutcomeError is the outcome of a decision policy could not make: the
// evaluation failed (a conflict, a builtin's error), the decision broke
// the contract, or no policy was loaded. The call fails closed (503); the
// decision event records it with its error, and POST /v1/policy/eval
// reports it.
const OutcomeError Outcome = "error"
