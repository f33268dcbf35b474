package mcpserver

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/service"
)

// asking is an ask-user call whose question the front door put to the
// caller's user: what the answer needs (the question) and what the
// result shows (the call's ids and the question's expiry, as the call's
// data has it). For a 2026-07-28 client it travels as the requestState
// of the input_required result and comes back with the retry.
type asking struct {
	QuestionID string `json:"q"`
	CallID     string `json:"c"`
	DecisionID string `json:"d"`
	Tool       string `json:"t"`
	ExpiresAt  string `json:"x"`
	// Until is when the state stops being accepted (Unix seconds): the
	// question's expiry.
	Until int64 `json:"u"`
}

// awaiting is the call's awaiting_user response, as the call answered it.
func (a asking) awaiting() apiv1.CallResponse {
	return apiv1.CallResponse{
		CallID: a.CallID, DecisionID: a.DecisionID, Outcome: apiv1.OutcomeAwaitingUser,
		Content: service.TextAwaitingUser,
		Data:    map[string]any{"question_id": a.QuestionID, "expires_at": a.ExpiresAt},
	}
}

// stateSealer seals requestState values: the payload, readable, and an
// HMAC-SHA256 over it and the caller (userID: credential kind, tenant,
// principal) under key. A state made up by a client, altered, presented
// by another principal, for another tool or after the question's expiry
// is refused before the store is read. key is mcp.request_state_key_file's
// (Options.StateKey), which replicas share, so a retry that reaches
// another replica, or this one after a restart, opens; without one it is
// drawn at random when the front door is built and lives in this process
// only. previous keys (mcp.request_state_previous_key_files) open states
// but never seal one: a rotation.
type stateSealer struct {
	key      []byte
	previous [][]byte
	now      func() time.Time
}

// newStateSealer seals with key (nil: a random key of this process) and
// also opens states sealed with one of previous.
func newStateSealer(key []byte, previous ...[]byte) stateSealer {
	if key == nil {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			panic("mcpserver: no randomness for the requestState key: " + err.Error())
		}
	}
	for _, k := range append([][]byte{key}, previous...) {
		if len(k) < MinStateKeyBytes {
			// Fail closed: a short key would make states forgeable.
			panic("mcpserver: a requestState key is shorter than MinStateKeyBytes")
		}
	}
	return stateSealer{key: bytes.Clone(key), previous: previous, now: time.Now}
}

const (
	statePrefix = "tg1."
	// maxStateBytes bounds a requestState worth verifying; ours are a few
	// hundred bytes.
	maxStateBytes = 2048
)

var errBadState = errors.New("requestState is not one this gateway issued for this caller and tool, or it has expired")

func mac(key []byte, payload string, id *identity.Identity) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("toolgate mcp requestState v1\x00"))
	m.Write([]byte(userID(id)))
	m.Write([]byte{0})
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// seal is the requestState of a for the caller id.
func (k stateSealer) seal(a asking, id *identity.Identity) string {
	raw, _ := json.Marshal(a)
	p := base64.RawURLEncoding.EncodeToString(raw)
	return statePrefix + p + "." + base64.RawURLEncoding.EncodeToString(mac(k.key, p, id))
}

// sealed reports whether sig is the MAC of payload for id under the key
// or one of the previous keys.
func (k stateSealer) sealed(sig []byte, payload string, id *identity.Identity) bool {
	if hmac.Equal(sig, mac(k.key, payload, id)) {
		return true
	}
	for _, prev := range k.previous {
		if hmac.Equal(sig, mac(prev, payload, id)) {
			return true
		}
	}
	return false
}

// open verifies a requestState for the caller id retrying tool.
func (k stateSealer) open(s string, id *identity.Identity, tool string) (asking, error) {
	if len(s) > maxStateBytes {
		return asking{}, errBadState
	}
	rest, ok := strings.CutPrefix(s, statePrefix)
	p, sig, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return asking{}, errBadState
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !k.sealed(got, p, id) {
		return asking{}, errBadState
	}
	raw, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return asking{}, errBadState
	}
	var a asking
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if dec.Decode(&a) != nil || a.QuestionID == "" || a.CallID == "" || a.Tool != tool || k.now().Unix() >= a.Until {
		return asking{}, errBadState
	}
	return a, nil
}
