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
	"github.com/toolgate/toolgate/internal/auth"
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
// principal) under a key drawn at random when the front door is built.
// A state made up by a client, altered, presented by another principal,
// for another tool or after the question's expiry is refused before the
// store is read. The key lives in this process only: a retry that
// reaches another replica (or this one after a restart) is refused too,
// and the question stays answerable over REST.
type stateSealer struct {
	key []byte
	now func() time.Time
}

func newStateSealer() stateSealer {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic("mcpserver: no randomness for the requestState key: " + err.Error())
	}
	return stateSealer{key: key, now: time.Now}
}

const (
	statePrefix = "tg1."
	// maxStateBytes bounds a requestState worth verifying; ours are a few
	// hundred bytes.
	maxStateBytes = 2048
)

var errBadState = errors.New("requestState is not one this gateway issued for this caller and tool, or it has expired")

func (k stateSealer) mac(payload string, id *auth.Identity) []byte {
	m := hmac.New(sha256.New, k.key)
	m.Write([]byte("toolgate mcp requestState v1\x00"))
	m.Write([]byte(userID(id)))
	m.Write([]byte{0})
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// seal is the requestState of a for the caller id.
func (k stateSealer) seal(a asking, id *auth.Identity) string {
	raw, _ := json.Marshal(a)
	p := base64.RawURLEncoding.EncodeToString(raw)
	return statePrefix + p + "." + base64.RawURLEncoding.EncodeToString(k.mac(p, id))
}

// open verifies a requestState for the caller id retrying tool.
func (k stateSealer) open(s string, id *auth.Identity, tool string) (asking, error) {
	if len(s) > maxStateBytes {
		return asking{}, errBadState
	}
	rest, ok := strings.CutPrefix(s, statePrefix)
	p, sig, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return asking{}, errBadState
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, k.mac(p, id)) {
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
