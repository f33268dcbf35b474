package auth

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/toolgate/toolgate/internal/identity"
)

// clockAt is a clock a test can move.
type clockAt struct{ t atomic.Int64 }

func (c *clockAt) now() time.Time   { return time.Unix(0, c.t.Load()).UTC() }
func (c *clockAt) set(t time.Time)  { c.t.Store(t.UnixNano()) }
func newClock(t time.Time) *clockAt { c := &clockAt{}; c.set(t); return c }

// A token served from the cache must still expire, and start, exactly when
// a fresh verification would say so.
func TestCachedTokenKeepsItsValidityWindow(t *testing.T) {
	s := newSetup(t)
	clk := newClock(now)
	a, err := NewAuthenticator(*s.cfg, WithClock(clk.now))
	if err != nil {
		t.Fatal(err)
	}
	tok := sign(t, jwt.SigningMethodHS256, "", with(func(c jwt.MapClaims) {
		c["nbf"] = now.Add(-time.Minute).Unix()
		c["exp"] = now.Add(time.Minute).Unix()
	}), s.secret)

	for i := range 2 { // the second round is answered by the cache
		id, err := a.AuthenticateHeader("Bearer " + tok)
		if err != nil || id.Principal != "alice" {
			t.Fatalf("round %d: id=%v err=%v", i, id, err)
		}
	}
	if _, ok := a.cache.get(tok, clk.now()); !ok {
		t.Fatal("a verified token was not cached")
	}
	// Inside the leeway (30s) after exp: still accepted, as on a miss.
	clk.set(now.Add(time.Minute + 20*time.Second))
	if _, err := a.AuthenticateHeader("Bearer " + tok); err != nil {
		t.Fatalf("within leeway: %v", err)
	}
	// Past exp + leeway: refused as expired although it is cached.
	clk.set(now.Add(time.Minute + 31*time.Second))
	_, err = a.AuthenticateHeader("Bearer " + tok)
	wantReason(t, err, ReasonExpired)

	// Before nbf - leeway: refused as not yet valid.
	clk.set(now.Add(-time.Minute - 31*time.Second))
	_, err = a.AuthenticateHeader("Bearer " + tok)
	wantReason(t, err, ReasonNotYetValid)
}

// Refusals are never cached, and a token that differs in one byte of its
// signature is verified on its own.
func TestTokenCacheNeverServesAnotherToken(t *testing.T) {
	s := newSetup(t)
	a := s.authenticator(t, nil)
	good := sign(t, jwt.SigningMethodHS256, "", baseClaims(), s.secret)
	if _, err := a.AuthenticateHeader("Bearer " + good); err != nil {
		t.Fatal(err)
	}
	// A character in the middle of the signature: every base64url
	// character there carries six whole bits, so the result still decodes
	// (the last one carries padding bits that must be zero, and changing
	// it can make the token malformed instead of badly signed).
	i := len(good) - 10
	flip := byte('A')
	if good[i] == 'A' {
		flip = 'B'
	}
	bad := good[:i] + string(flip) + good[i+1:]
	for range 2 {
		_, err := a.AuthenticateHeader("Bearer " + bad)
		wantReason(t, err, ReasonBadSignature)
	}
	if _, ok := a.cache.get(bad, now); ok {
		t.Fatal("a refused token was cached")
	}
}

func TestTokenCacheIsBounded(t *testing.T) {
	c := newTokenCache(3)
	exp := now.Add(time.Hour)
	for i, k := range []string{"a", "b", "c", "d", "e"} {
		c.put(k, cachedToken{id: &identity.Identity{Principal: k}, expires: exp}, now)
		if len(c.m) > 3 {
			t.Fatalf("after %d puts the cache holds %d entries", i+1, len(c.m))
		}
	}
	if e, ok := c.get("e", now); !ok || e.id.Principal != "e" {
		t.Fatalf("newest entry missing: %v %v", e, ok)
	}
	if newTokenCache(0) != nil {
		t.Fatal("size 0 must disable the cache")
	}
	var off *tokenCache
	off.put("x", cachedToken{expires: exp}, now)
	if _, ok := off.get("x", now); ok {
		t.Fatal("a disabled cache returned an entry")
	}
}
