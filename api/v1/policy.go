package v1

import "github.com/go-json-experiment/json/jsontext"

// PolicyInfo is the answer of GET /v1/policy.
type PolicyInfo struct {
	Revision  string         `json:"revision"`
	LoadedAt  string         `json:"loaded_at"`
	Modules   []PolicyModule `json:"modules"`
	LastError *PolicyError   `json:"last_error,omitempty"`
}

// PolicyModule is one Rego file of the serving revision.
type PolicyModule struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// PolicyError is the last failed reload, until one succeeds.
type PolicyError struct {
	Message string `json:"message"`
	At      string `json:"at"`
}

// PolicyEvalRequest is the body of POST /v1/policy/eval: a request
// document (Input), or a would-be call (Tool, Arguments, Principal,
// SessionID); Explain is "", notes, fails or full.
type PolicyEvalRequest struct {
	Input     map[string]any   `json:"input,omitempty"`
	Tool      string           `json:"tool,omitempty"`
	Arguments jsontext.Value   `json:"arguments,omitempty"`
	Principal *PolicyPrincipal `json:"principal,omitempty"`
	SessionID string           `json:"session_id,omitempty"`
	Explain   string           `json:"explain,omitempty"`
}

// PolicyPrincipal is whom a would-be call of PolicyEvalRequest is made as.
type PolicyPrincipal struct {
	ID     string         `json:"id"`
	Roles  []string       `json:"roles,omitempty"`
	Groups []string       `json:"groups,omitempty"`
	Claims map[string]any `json:"claims,omitempty"`
}

// PolicyEvalResponse is what the current revision decides.
type PolicyEvalResponse struct {
	Revision  string   `json:"revision"`
	Outcome   Outcome  `json:"outcome"`
	Available bool     `json:"available"`
	Reasons   []string `json:"reasons"`
	Message   string   `json:"message,omitempty"`
	// Decision is the decision object as policy returned it, numbers as
	// numbers.
	Decision    any            `json:"decision,omitempty"`
	Rules       []FiredRule    `json:"rules"`
	Input       map[string]any `json:"input,omitempty"`
	Problems    []any          `json:"problems,omitempty"`
	Explanation []string       `json:"explanation,omitempty"`
	// Error is the policy's runtime error when the outcome is error
	// because evaluation failed (a conflict, a builtin's error): OPA's
	// code, its message and where it happened.
	Error *PolicyEvalError `json:"error,omitempty"`
}

// PolicyEvalError is a policy's runtime error as OPA reports it.
type PolicyEvalError struct {
	Code     string `json:"code"`               // e.g. eval_conflict_error, eval_builtin_error
	Message  string `json:"message"`            // OPA's message
	Location string `json:"location,omitempty"` // file:row in the pack
}

// FiredRule is a rule that produced a value during an evaluation.
type FiredRule struct {
	Rule     string `json:"rule"`
	Location string `json:"location"`
	Title    string `json:"title,omitempty"`
}
