// Package service is Toolgate's application layer: the few services
// every front door calls, behind small interfaces.
//
//   - [Calls]: the tools a caller may see; calls, decisions (PDP mode)
//     and batches.
//   - [Approvals]: held calls (list, read, approve, deny), ask-user
//     answers, and the caller's poll of a waiting call.
//   - [Policy]: policy administration (info, evaluation, replay).
//   - [Audit]: the auditor's queries (events, chain verification,
//     export, checkpoints and proofs).
//   - [Health]: readiness.
//
// The front doors — REST (internal/api) and MCP — decode their own
// envelopes, take identity from the verified credential, call these
// interfaces and render what they return; neither reaches a store, the
// policy engine or the pipeline directly. The concrete services wrap
// internal/pipeline, internal/audit and internal/decision; the gateway
// (internal/gateway) wires them.
//
// Results are the public wire values of api/v1, which both front doors
// render. Failures that are not tool results are *Error values whose
// Kind maps, in one table, to an HTTP status and error code and to a
// JSON-RPC error code; their Message is safe for any caller. A refused
// or failed call is a result with an outcome (apiv1.Outcome), never an
// error.
package service

// Services is the whole application layer as one value: what the gateway
// wires once and hands to each front door.
type Services struct {
	Calls     Calls
	Approvals Approvals
	Policy    Policy
	Audit     Audit
	Health    Health
}
