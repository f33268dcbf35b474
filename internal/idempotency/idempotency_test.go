package idempotency

import (
	"testing"
	"time"
)

func TestFingerprintBindsEveryPartOfTheRequest(t *testing.T) {
	base := Request{Mode: "call", Tool: "write-file", Arguments: []byte(`{"path":"a","content":"x"}`), SessionID: "s-1", Principal: "alice"}
	fp := Fingerprint(base)
	same := []Request{
		{Mode: "call", Tool: "write-file", Arguments: []byte(` { "content" : "x", "path" : "a" } `), SessionID: "s-1", Principal: "alice"},
		{Mode: "call", Tool: "write-file", Arguments: []byte(`{"path":"\u0061","content":"x"}`), SessionID: "s-1", Principal: "alice"},
	}
	for _, r := range same {
		if got := Fingerprint(r); got != fp {
			t.Errorf("%s: fingerprint %s, want the same request's %s", r.Arguments, got, fp)
		}
	}
	if Fingerprint(Request{Mode: "call", Tool: "t"}) != Fingerprint(Request{Mode: "call", Tool: "t", Arguments: []byte(`{}`)}) {
		t.Error("absent arguments and {} differ")
	}
	other := map[string]Request{
		"mode":      {Mode: "decision", Tool: base.Tool, Arguments: base.Arguments, SessionID: base.SessionID, Principal: base.Principal},
		"tool":      {Mode: base.Mode, Tool: "edit-file", Arguments: base.Arguments, SessionID: base.SessionID, Principal: base.Principal},
		"arguments": {Mode: base.Mode, Tool: base.Tool, Arguments: []byte(`{"path":"a","content":"y"}`), SessionID: base.SessionID, Principal: base.Principal},
		"session":   {Mode: base.Mode, Tool: base.Tool, Arguments: base.Arguments, SessionID: "", Principal: base.Principal},
		"principal": {Mode: base.Mode, Tool: base.Tool, Arguments: base.Arguments, SessionID: base.SessionID, Principal: "bob"},
		// Bytes that are not JSON (duplicate names) are not the JSON they
		// resemble.
		"duplicate names": {Mode: base.Mode, Tool: base.Tool, Arguments: []byte(`{"path":"a","path":"a","content":"x"}`), SessionID: base.SessionID, Principal: base.Principal},
		// Field boundaries count: "ab"+"c" is not "a"+"bc".
		"boundaries": {Mode: base.Mode, Tool: base.Tool + "s", Arguments: base.Arguments, SessionID: "-1", Principal: base.Principal},
	}
	seen := map[string]string{fp: "base"}
	for name, r := range other {
		got := Fingerprint(r)
		if prev, dup := seen[got]; dup {
			t.Errorf("%s has the fingerprint of %s", name, prev)
		}
		seen[got] = name
	}
}

func TestKeyStates(t *testing.T) {
	t0 := time.Unix(1000, 0)
	k := &Key{State: StatePending, LeaseUntil: t0.Add(time.Minute), ExpiresAt: t0.Add(time.Second)}
	if k.Abandoned(t0) || !k.Abandoned(t0.Add(time.Minute)) {
		t.Error("Abandoned")
	}
	if k.Expired(t0.Add(time.Second)) || !k.Expired(t0.Add(time.Minute)) {
		t.Error("a pending key expired during its lease")
	}
	k.State = StateDone
	if k.Abandoned(t0.Add(time.Hour)) || !k.Expired(t0.Add(time.Second)) || k.Expired(t0) {
		t.Error("done key")
	}
}
