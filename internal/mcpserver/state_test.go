package mcpserver

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/identity"
)

// A requestState opens only for the caller and tool it was sealed for,
// unaltered, before the question expires, in the process that sealed it.
func TestRequestStateIsSealedForTheCallerAndTool(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	k := newStateSealer(nil)
	k.now = func() time.Time { return now }
	alice := &identity.Identity{Tenant: "acme", Principal: "alice", Method: "jwt"}
	a := asking{QuestionID: "q-1", CallID: "c-1", DecisionID: "d-1", Tool: "ask-user", ExpiresAt: "x", Until: now.Add(time.Hour).Unix()}
	state := k.seal(a, alice)
	if got, err := k.open(state, alice, "ask-user"); err != nil || got != a {
		t.Fatalf("open: %+v %v", got, err)
	}
	other := newStateSealer(nil)
	other.now = k.now
	flip := func(i int) string {
		b := []byte(state)
		b[i] ^= 1
		return string(b)
	}
	for name, c := range map[string]struct {
		k     stateSealer
		state string
		id    *identity.Identity
		tool  string
	}{
		"another principal":       {k, state, &identity.Identity{Tenant: "acme", Principal: "bob", Method: "jwt"}, "ask-user"},
		"another tenant":          {k, state, &identity.Identity{Tenant: "globex", Principal: "alice", Method: "jwt"}, "ask-user"},
		"another credential kind": {k, state, &identity.Identity{Tenant: "acme", Principal: "alice", Method: "api_key"}, "ask-user"},
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

// Front doors sharing a key (replicas of one mcp.request_state_key_file)
// open each other's states; another key's states are refused, as a
// forged one is. A previous key opens the states it sealed but seals none.
func TestRequestStateOpensWhereverTheKeyIsShared(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	key := []byte(strings.Repeat("k", MinStateKeyBytes))
	other := []byte(strings.Repeat("o", MinStateKeyBytes))
	sealer := func(key []byte, previous ...[]byte) stateSealer {
		s := newStateSealer(key, previous...)
		s.now = clock
		return s
	}
	a, b, c := sealer(key), sealer(bytes.Clone(key)), sealer(other)
	alice := &identity.Identity{Tenant: "acme", Principal: "alice", Method: "jwt"}
	q := asking{QuestionID: "q-1", CallID: "c-1", DecisionID: "d-1", Tool: "ask-user", ExpiresAt: "x", Until: now.Add(time.Hour).Unix()}

	fromA := a.seal(q, alice)
	if got, err := b.open(fromA, alice, "ask-user"); err != nil || got != q {
		t.Fatalf("a replica with the same key: %+v %v", got, err)
	}
	if got, err := a.open(b.seal(q, alice), alice, "ask-user"); err != nil || got != q {
		t.Fatalf("and back: %+v %v", got, err)
	}
	if _, err := c.open(fromA, alice, "ask-user"); !errors.Is(err, errBadState) {
		t.Fatalf("another key: %v, want errBadState", err)
	}
	if _, err := a.open(c.seal(q, alice), alice, "ask-user"); !errors.Is(err, errBadState) {
		t.Fatalf("another key's state: %v, want errBadState", err)
	}
	if _, err := sealer(nil).open(fromA, alice, "ask-user"); !errors.Is(err, errBadState) {
		t.Fatalf("a random key: %v, want errBadState", err)
	}
	// The same key does not lift the other checks.
	if _, err := b.open(fromA, &identity.Identity{Tenant: "acme", Principal: "bob", Method: "jwt"}, "ask-user"); err == nil {
		t.Fatal("another principal opened a state at a replica")
	}

	// Rotation: c now seals with other and still opens key's states.
	rotated := sealer(other, key)
	if got, err := rotated.open(fromA, alice, "ask-user"); err != nil || got != q {
		t.Fatalf("a previous key's state: %+v %v", got, err)
	}
	if _, err := a.open(rotated.seal(q, alice), alice, "ask-user"); err == nil {
		t.Fatal("the rotated sealer sealed with the previous key")
	}
	if got, err := c.open(rotated.seal(q, alice), alice, "ask-user"); err != nil || got != q {
		t.Fatalf("the rotated sealer's state under the new key: %+v %v", got, err)
	}
}

// A key shorter than MinStateKeyBytes is refused, not used.
func TestShortRequestStateKeyPanics(t *testing.T) {
	for name, keys := range map[string][][]byte{
		"current":  {[]byte("short")},
		"previous": {[]byte(strings.Repeat("k", MinStateKeyBytes)), []byte(strings.Repeat("p", MinStateKeyBytes-1))},
		"empty":    {{}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: a short key was accepted", name)
				}
			}()
			newStateSealer(keys[0], keys[1:]...)
		}()
	}
}

// The key file: created once with mode 0600 and then read as is; files
// that are short, not regular or readable by others are refused.
func TestRequestStateKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "new", "mcp-request-state.key")
	key, created, err := LoadOrCreateStateKey(path)
	if err != nil || !created || len(key) < MinStateKeyBytes {
		t.Fatalf("create: %d bytes, created %v, %v", len(key), created, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the new file: %v %v, want mode 0600", fi.Mode(), err)
	}
	again, created, err := LoadOrCreateStateKey(path)
	if err != nil || created || !bytes.Equal(again, key) {
		t.Fatalf("second start: created %v, same key %v, %v", created, bytes.Equal(again, key), err)
	}

	// Replicas starting at once on one folder agree on one key.
	race := filepath.Join(dir, "race.key")
	keys := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, _, err := LoadOrCreateStateKey(race)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	for _, k := range keys[1:] {
		if !bytes.Equal(k, keys[0]) {
			t.Fatal("replicas starting at once got different keys")
		}
	}

	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hex := strings.Repeat("0123456789abcdef", 4)
	if k, err := ReadStateKey(write("openssl.key", hex+"\n", 0o600)); err != nil || string(k) != hex {
		t.Fatalf("openssl rand -hex 32: %q %v", k, err)
	}
	if k, err := ReadStateKey(write("readonly.key", hex, 0o400)); err != nil || string(k) != hex {
		t.Fatalf("mode 0400: %q %v", k, err)
	}
	for name, c := range map[string]struct {
		path, problem string
	}{
		"short":            {write("short.key", "REPLACE-ME\n", 0o600), "need at least 32"},
		"short but padded": {write("padded.key", strings.Repeat("k", MinStateKeyBytes-1)+"\r\n\n", 0o600), "need at least 32"},
		"group-readable":   {write("group.key", hex, 0o640), "group and others"},
		"world-readable":   {write("world.key", hex, 0o604), "group and others"},
		"a folder":         {dir, "not a regular file"},
		"huge":             {write("huge.key", strings.Repeat("k", maxStateKeyFile+1), 0o600), "larger than"},
	} {
		k, err := ReadStateKey(c.path)
		if err == nil || !strings.Contains(err.Error(), c.problem) {
			t.Errorf("%s: %q %v, want an error about %q", name, k, err, c.problem)
		}
		if _, _, err := LoadOrCreateStateKey(c.path); err == nil {
			t.Errorf("%s: LoadOrCreateStateKey accepted it", name)
		}
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "device.key")); err == nil {
		if _, err := ReadStateKey(filepath.Join(dir, "device.key")); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("a device: %v", err)
		}
	}
	// A key never shows in an error.
	if _, err := ReadStateKey(write("leak.key", "s3cret-s3cret", 0o644)); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error %v", err)
	}
}
