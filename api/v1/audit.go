package v1

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Phases of an audit event.
const (
	PhaseDecision = "decision" // written before any effect
	PhaseResult   = "result"   // written after the tool ran
	PhaseApproval = "approval" // a human's step on a held call, or its expiry
	PhaseQuestion = "question" // an ask-user answer, or its expiry
	// PhaseDefinition records an MCP tool definition that is not offered:
	// it drifted from its pin, has none, vanished or is invalid.
	PhaseDefinition = "definition"
)

// AuditEvent is one audit record: GET /v1/audit/events, an ndjson export
// line, and what the gateway stores and hashes (internal/audit.Event is
// this type). Every member takes part in its hash but LogIndex.
type AuditEvent struct {
	ID             string         `json:"id"`
	Time           string         `json:"time"` // RFC 3339, UTC, millisecond precision
	Tenant         string         `json:"tenant"`
	Principal      string         `json:"principal"`
	Client         string         `json:"client,omitempty"`
	CallID         string         `json:"call_id"`
	DecisionID     string         `json:"decision_id"`
	SessionID      string         `json:"session_id"`
	Tool           string         `json:"tool"`
	Action         string         `json:"action"`
	Phase          string         `json:"phase"`
	Outcome        string         `json:"outcome"`
	Reasons        []string       `json:"reasons"`
	PolicyRevision string         `json:"policy_revision"`
	RequestDigest  string         `json:"request_digest"`
	Input          map[string]any `json:"input"` // masked request document
	Obligations    map[string]any `json:"obligations,omitempty"`
	// Decision is the policy's result exactly as policy returned it (what
	// OPA would log as "result"): the whole authorization decision object
	// on decision events where authorization ran, false on unavailable
	// events the availability policy refused. Absent where no policy ran
	// (invalid arguments, an unknown or withheld tool), on result,
	// approval and question events, and on events written before it
	// existed.
	Decision any `json:"decision,omitempty"`
	// Concealed is set on a denied decision event whose caller was
	// answered as if the target did not exist: the policy asked for it
	// ("conceal": true) and the tool knows its unknown-target answer. The
	// event's outcome and reasons are the denial's. Absent otherwise.
	Concealed bool `json:"concealed,omitzero"`
	// Error is why policy made no decision, on a decision event of
	// outcome error: OPA's error code (eval_conflict_error,
	// eval_builtin_error, …, or Toolgate's malformed_decision and
	// no_policy), its message and where in the pack (file:row). The model
	// never sees it. Absent otherwise.
	Error       *AuditError      `json:"error,omitempty"`
	Result      *AuditResult     `json:"result,omitempty"`
	DurationsUS map[string]int64 `json:"durations_us"`
	// Approval links the events of a call held for a human.
	Approval *AuditApproval `json:"approval,omitempty"`
	// Question links the events of an ask-user call and its answer.
	Question *AuditQuestion `json:"question,omitempty"`
	// Shadow is what the shadow policy would have decided.
	Shadow *AuditShadow `json:"shadow,omitempty"`
	// TraceID is the W3C trace id (32 lower-case hex digits) of the
	// request that wrote the event: the caller's when it sent a
	// traceparent, else the gateway's own when tracing is on; absent
	// otherwise. Log.Append fills it from the context's span. It is part
	// of the hashed content; events without one hash as before it existed.
	TraceID string `json:"trace_id,omitempty"`
	// Via is the front door a call arrived through when it is not the
	// REST API: "mcp" for the MCP front door (/mcp or stdio); on a
	// question's answered event, the front door the answer came through
	// (an MCP elicitation). Client stays the calling platform named by the
	// credential. Absent for REST and the console.
	Via string `json:"via,omitempty"`
	// LeafVersion is the rule by which the event's JSON becomes its hash,
	// its leaf in the tenant's tree (see LeafVersionOf): 2 on every event
	// the log writes now; absent (version 1) on events written before it.
	// It is part of the hashed content, so it cannot change without
	// changing the hash.
	LeafVersion int64 `json:"leaf_version,omitzero"`
	// MCPRequestID is the JSON-RPC id of the MCP tools/call request that
	// made the call (its JSON text: 7 or "7"; over 128 bytes, "sha256:"
	// and the hex digest of that text), over /mcp and over stdio alike.
	// Absent otherwise.
	MCPRequestID string `json:"mcp_request_id,omitempty"`
	// Chain, Seq and PrevHash are the hash chain of events written before
	// the Merkle tree (chain segment, position from 1, predecessor's
	// hash); they still verify. Events written since have "", 0 and "":
	// the tenant's tree orders them (LogIndex).
	Chain    string `json:"chain"`
	Seq      int64  `json:"seq"`
	PrevHash string `json:"prev_hash"`
	Hash     string `json:"hash"`
	// LogIndex is the event's position in its tenant's Merkle tree, set
	// once the event is integrated (normally within a second of its
	// commit). It is not part of the hashed content.
	LogIndex *int64 `json:"log_index,omitempty"`
}

// AuditResult summarizes what a tool returned. Error is an internal
// diagnostic for auditors; it never reaches a model-facing response.
type AuditResult struct {
	IsError   bool   `json:"is_error"`
	Bytes     int    `json:"bytes"`
	Truncated bool   `json:"truncated"`
	Error     string `json:"error,omitempty"`
}

// AuditApproval ties an event to a held call: its approval id, when it
// expires (on the event that held it), and who approved or denied it.
type AuditApproval struct {
	ID        string `json:"id"`
	ExpiresAt string `json:"expires_at,omitempty"`
	By        string `json:"by,omitempty"`
	Comment   string `json:"comment,omitempty"`
}

// AuditQuestion ties an event to an ask-user question: its id, when it
// expires (on the event that asked it), and who answered it. The answer's
// text is not logged, only its size (result.bytes).
type AuditQuestion struct {
	ID        string `json:"id"`
	ExpiresAt string `json:"expires_at,omitempty"`
	By        string `json:"by,omitempty"`
}

// AuditShadow is the shadow policy's verdict on the same request document.
// It never changes the outcome.
type AuditShadow struct {
	Revision string `json:"revision"`
	// Outcome is allow, denied or approval_required, or error when the
	// shadow policy failed to evaluate.
	Outcome  string `json:"outcome"`
	Diverged bool   `json:"diverged"`
}

// AuditEventPage is one page of GET /v1/audit/events, newest first.
type AuditEventPage struct {
	Events     []*AuditEvent `json:"events"`
	NextCursor string        `json:"next_cursor"` // empty on the last page
}

// HashPrefix starts every event hash.
const HashPrefix = "sha256:"

// ComputeHash recomputes the event's hash as the gateway computed it when
// it wrote the event:
//
//	"sha256:" + hex(SHA-256(RFC 8785 canonical JSON of the event without "hash" and "log_index")).
//
// An event read from the API or an export hashes to its Hash unless it
// was changed — or decoded into a type that lost a member.
func (e *AuditEvent) ComputeHash() (string, error) {
	raw, err := json.Marshal(e)
	if err != nil {
		return "", err
	}
	return HashOf(raw)
}

// Leaf versions: how an event's JSON becomes its hash, the 32 bytes that
// are its leaf in the tenant's RFC 6962 tree. Versions 1 and 2 hash by the
// same rule (ComputeHash); version 2 names itself in the hashed content,
// so that a later rule can be told apart from it by every verifier.
const (
	// LeafVersion1: an event without a "leaf_version" member, everything
	// written before the member existed.
	LeafVersion1 = 1
	// LeafVersion2: "leaf_version": 2, every event the log writes now.
	LeafVersion2 = 2
	// CurrentLeafVersion is the version the log writes.
	CurrentLeafVersion = LeafVersion2
)

// ErrUnknownLeafVersion: an event's "leaf_version" is not one this code
// knows how to hash (a newer gateway's event, or a malformed member).
// The error names the event; verifiers report it, they never guess.
var ErrUnknownLeafVersion = errors.New("unknown audit leaf version")

// LeafVersionOf returns the leaf version of an event given as its JSON
// object: 1 when it has no "leaf_version" member, else the member's value
// when it is a known version. Every verifier reads it before hashing. An
// unknown or malformed version fails with ErrUnknownLeafVersion, naming
// the event by its "id".
func LeafVersionOf(raw []byte) (int, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return 0, errors.New("v1: an event is a JSON object")
	}
	var id string
	var version jsontext.Value
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return 0, err
		}
		switch tok.String() {
		case "id":
			v, err := dec.ReadValue()
			if err != nil {
				return 0, err
			}
			json.Unmarshal(v, &id) // a malformed id only names the event worse
		case "leaf_version":
			v, err := dec.ReadValue()
			if err != nil {
				return 0, err
			}
			version = bytes.Clone(v)
		default:
			if err := dec.SkipValue(); err != nil {
				return 0, err
			}
		}
	}
	if version == nil {
		return LeafVersion1, nil
	}
	if version.Kind() == '0' {
		if n, err := strconv.ParseFloat(string(version), 64); err == nil && (n == LeafVersion1 || n == LeafVersion2) {
			return int(n), nil
		}
	}
	return 0, fmt.Errorf("%w %s of event %q", ErrUnknownLeafVersion, version, id)
}

// HashOf computes the hash of an event given as its JSON object (as
// stored, as the API returns it, a line of an ndjson export): the members
// "hash" and "log_index" are left out, everything else counts. It reads
// the event's leaf version first (LeafVersionOf) and refuses one it does
// not know with ErrUnknownLeafVersion.
func HashOf(raw []byte) (string, error) {
	if _, err := LeafVersionOf(raw); err != nil {
		return "", err
	}
	var members map[string]jsontext.Value
	if err := json.Unmarshal(raw, &members); err != nil {
		return "", err
	}
	if members == nil {
		return "", errors.New("v1: an event is a JSON object")
	}
	delete(members, "hash")
	delete(members, "log_index")
	b, err := json.Marshal(members)
	if err != nil {
		return "", err
	}
	v := jsontext.Value(bytes.Clone(b))
	if err := v.Canonicalize(); err != nil {
		return "", err
	}
	sum := sha256.Sum256(v)
	return HashPrefix + hex.EncodeToString(sum[:]), nil
}

// VerifyResult is the answer of GET and POST /v1/audit/verify.
type VerifyResult struct {
	OK bool `json:"ok"`
	// EventsChecked counts the stored events read, up to and including
	// the first bad one.
	EventsChecked int `json:"events_checked"`
	// FirstBadEvent is the id of the first event that fails, when an
	// event is to blame; a missing one is named "(log_index N)".
	FirstBadEvent string `json:"first_bad_event,omitempty"`
	// Problem says what is wrong, in a sentence, when OK is false.
	Problem string `json:"problem,omitempty"`
	// TreeSize is the number of events integrated into the tenant's tree.
	TreeSize int64 `json:"tree_size"`
	// CheckpointSize is the size of the largest signed checkpoint the log
	// was checked against (0: none).
	CheckpointSize int64 `json:"checkpoint_size"`
	// GivenCheckpointSize is the size of the checkpoint the caller gave
	// (POST /v1/audit/verify with a checkpoint), absent otherwise: the log
	// was checked to extend exactly that one.
	GivenCheckpointSize int64 `json:"given_checkpoint_size,omitzero"`
	// EventsPruned counts the events retention deleted from the front of
	// the log; the tree still commits to them.
	EventsPruned int64 `json:"events_pruned,omitempty"`
}

// VerifyRequest is the body of POST /v1/audit/verify.
type VerifyRequest struct {
	Checkpoint string `json:"checkpoint"` // a signed note the auditor saved
}

// InclusionProof is the answer of GET /v1/audit/events/{id}/proof: an
// RFC 6962 inclusion proof of the event's leaf (its hash's 32 bytes) at
// Index in the tree of Size events. Hashes are base64 in JSON.
type InclusionProof struct {
	Index  uint64   `json:"index"`
	Size   uint64   `json:"size"`
	Hashes [][]byte `json:"hashes"`
}

// ConsistencyProof is the answer of GET /v1/audit/consistency: an RFC 6962
// proof that the tree of From events is a prefix of the tree of To.
type ConsistencyProof struct {
	From   uint64   `json:"from"`
	To     uint64   `json:"to"`
	Hashes [][]byte `json:"hashes"`
}

// AuditError is a policy error recorded on a decision event.
type AuditError struct {
	Code     string `json:"code"`
	Message  string `json:"message"`
	Location string `json:"location,omitempty"` // file:row in the pack
}
