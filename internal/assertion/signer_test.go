package assertion

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/golang-jwt/jwt/v5"

	upstreamv1 "github.com/toolgate/toolgate/api/upstream/v1"
)

func newKey(t *testing.T, dir, name string) string {
	t.Helper()
	f := filepath.Join(dir, name)
	created, err := EnsureKey(f)
	if err != nil || !created {
		t.Fatalf("EnsureKey = %v, %v", created, err)
	}
	return f
}

type jwkSet struct {
	Keys []upstreamv1.JWK `json:"keys"`
}

func publishedKeys(t *testing.T, s *Signer) map[string]ed25519.PublicKey {
	t.Helper()
	var set jwkSet
	if err := json.Unmarshal(s.JWKS(), &set); err != nil {
		t.Fatal(err)
	}
	out := map[string]ed25519.PublicKey{}
	for _, k := range set.Keys {
		if k.Kty != "OKP" || k.Crv != "Ed25519" || k.Alg != "EdDSA" || k.Use != "sig" {
			t.Fatalf("unexpected key shape %+v", k)
		}
		x, err := base64.RawURLEncoding.DecodeString(k.X)
		if err != nil {
			t.Fatal(err)
		}
		out[k.Kid] = ed25519.PublicKey(x)
	}
	return out
}

func TestEnsureKeyCreatesOnceAndKeepsTheFile(t *testing.T) {
	dir := t.TempDir()
	f := newKey(t, dir, "sub/key.pem")
	fi, err := os.Stat(f)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v", fi.Mode(), err)
	}
	before, _ := os.ReadFile(f)
	created, err := EnsureKey(f)
	after, _ := os.ReadFile(f)
	if err != nil || created || string(before) != string(after) {
		t.Fatalf("second EnsureKey: created=%v err=%v, file changed=%v", created, err, string(before) != string(after))
	}
	os.WriteFile(filepath.Join(dir, "junk.pem"), []byte("not a key"), 0o600)
	if _, err := EnsureKey(filepath.Join(dir, "junk.pem")); err == nil {
		t.Fatal("a file without a key was accepted")
	}
}

func TestSignedAssertionVerifiesWithThePublishedKey(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_700_000_000, 0)
	s, err := New(Options{Issuer: "toolgate", TTL: time.Minute, SigningKeyFile: newKey(t, dir, "k.pem"), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := s.Sign(upstreamv1.Claims{Audience: "maintenance-window", Subject: "alice", Tenant: "acme", Roles: []string{"developer"},
		CallID: "c-1", SessionID: "s-1", RequestDigest: "sha256:aa", ArgsDigest: "sha256:bb"})
	if err != nil {
		t.Fatal(err)
	}
	keys := publishedKeys(t, s)
	claims := jwt.MapClaims{}
	_, err = jwt.ParseWithClaims(tok, claims, func(tk *jwt.Token) (any, error) {
		return keys[tk.Header["kid"].(string)], nil
	}, jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithTimeFunc(func() time.Time { return now }),
		jwt.WithAudience("maintenance-window"), jwt.WithIssuer("toolgate"), jwt.WithExpirationRequired())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"sub": "alice", "tenant": "acme", "call_id": "c-1", "session_id": "s-1",
		"request_digest": "sha256:aa", "args_digest": "sha256:bb", "exp": float64(now.Unix() + 60)}
	for k, v := range want {
		if claims[k] != v {
			t.Errorf("claim %s = %v, want %v", k, claims[k], v)
		}
	}
	if r, _ := claims["roles"].([]any); len(r) != 1 || r[0] != "developer" {
		t.Errorf("roles = %v", claims["roles"])
	}
}

func TestRotationPublishesPreviousKeysAndSignsWithTheNewOne(t *testing.T) {
	dir := t.TempDir()
	oldFile := newKey(t, dir, "old.pem")
	old, err := New(Options{Issuer: "toolgate", TTL: time.Minute, SigningKeyFile: oldFile})
	if err != nil {
		t.Fatal(err)
	}
	oldToken, _ := old.Sign(upstreamv1.Claims{Audience: "t"})

	// A previous key may also be kept as its public half only.
	pubOnly := filepath.Join(dir, "older.pub.pem")
	der, _ := x509.MarshalPKIXPublicKey(ed25519.PublicKey(make([]byte, ed25519.PublicKeySize)))
	os.WriteFile(pubOnly, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600)

	s, err := New(Options{Issuer: "toolgate", TTL: time.Minute, SigningKeyFile: newKey(t, dir, "new.pem"),
		PublishedKeyFiles: []string{oldFile, pubOnly, oldFile}})
	if err != nil {
		t.Fatal(err)
	}
	keys := publishedKeys(t, s)
	if len(keys) != 3 || keys[old.KeyID()] == nil || keys[s.KeyID()] == nil || s.KeyID() == old.KeyID() {
		t.Fatalf("published kids %v, active %s, previous %s", keys, s.KeyID(), old.KeyID())
	}
	tok, _ := s.Sign(upstreamv1.Claims{Audience: "t"})
	parsed, _, _ := jwt.NewParser().ParseUnverified(tok, jwt.MapClaims{})
	if parsed.Header["kid"] != s.KeyID() {
		t.Fatalf("signed with %v, want the active key", parsed.Header["kid"])
	}
	// An assertion signed before the rotation still verifies.
	if _, err := jwt.Parse(oldToken, func(tk *jwt.Token) (any, error) { return keys[tk.Header["kid"].(string)], nil },
		jwt.WithValidMethods([]string{"EdDSA"})); err != nil {
		t.Fatalf("pre-rotation assertion no longer verifies: %v", err)
	}
	if _, err := New(Options{Issuer: "toolgate", TTL: time.Minute, SigningKeyFile: pubOnly}); err == nil {
		t.Fatal("a public key was accepted as the signing key")
	}
}
