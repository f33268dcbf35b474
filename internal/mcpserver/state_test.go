package mcpserver

import (
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/auth"
)

// A requestState opens only for the caller and tool it was sealed for,
// unaltered, before the question expires, in the process that sealed it.
func TestRequestStateIsSealedForTheCallerAndTool(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	k := newStateSealer()
	k.now = func() time.Time { return now }
	alice := &auth.Identity{Tenant: "acme", Principal: "alice", Method: "jwt"}
	a := asking{QuestionID: "q-1", CallID: "c-1", DecisionID: "d-1", Tool: "ask-user", ExpiresAt: "x", Until: now.Add(time.Hour).Unix()}
	state := k.seal(a, alice)
	if got, err := k.open(state, alice, "ask-user"); err != nil || got != a {
		t.Fatalf("open: %+v %v", got, err)
	}
	other := newStateSealer()
	other.now = k.now
	flip := func(i int) string {
		b := []byte(state)
		b[i] ^= 1
		return string(b)
	}
	for name, c := range map[string]struct {
		k     stateSealer
		state string
		id    *auth.Identity
		tool  string
	}{
		"another principal":       {k, state, &auth.Identity{Tenant: "acme", Principal: "bob", Method: "jwt"}, "ask-user"},
		"another tenant":          {k, state, &auth.Identity{Tenant: "globex", Principal: "alice", Method: "jwt"}, "ask-user"},
		"another credential kind": {k, state, &auth.Identity{Tenant: "acme", Principal: "alice", Method: "api_key"}, "ask-user"},
		"another tool":            {k, state, alice, "read-file"},
		"another process":         {other, state, alice, "ask-user"},
		"payload altered":         {k, flip(len(statePrefix) + 3), alice, "ask-user"},
		"mac altered":             {k, flip(len(state) - 3), alice, "ask-user"},
		"no mac":                  {k, state[:strings.LastIndex(state, ".")], alice, "ask-user"},
		"made up":                 {k, "tg1.eyJxIjoicS0xIn0.AAAA", alice, "ask-user"},
		"empty":                   {k, "", alice, "ask-user"},
		"huge":                    {k, state + strings.Repeat("A", maxStateBytes), alice, "ask-user"},
	} {
		if _, err := c.k.open(c.state, c.id, c.tool); err == nil {
			t.Errorf("%s: opened", name)
		}
	}
	now = now.Add(time.Hour)
	if _, err := k.open(state, alice, "ask-user"); err == nil {
		t.Error("opened after the question's expiry")
	}
}
