package auth

import (
	"crypto"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/identity"
)

// defaultTokenCacheSize bounds the verified-token cache: agents call many
// times with one token, so a few thousand entries cover a busy gateway.
const defaultTokenCacheSize = 4096

// tokenCache remembers JWTs whose signature and claims already verified,
// so a token seen again costs a map lookup instead of a signature check and
// a claims decode (Envoy's jwt_authn keeps the same kind of cache). The key
// is the whole compact token, signature included: the same string can only
// carry the same verified claims. An entry is used only inside the token's
// own validity window (exp and nbf, with the configured leeway), so expiry
// is enforced exactly as on a miss, and, for a token verified by a key
// set's key, only while the set still holds that key (the caller asks the
// set), so a token never outlives its key's removal by the identity
// provider. Failures are never cached.
type tokenCache struct {
	mu  sync.RWMutex
	m   map[string]cachedToken
	max int
}

type cachedToken struct {
	id        *identity.Identity
	notBefore time.Time        // zero: no nbf
	expires   time.Time        // exp is required, so never zero
	kid       string           // the kid the key was found under
	key       crypto.PublicKey // the key set's key that verified it; nil for HS256
}

func newTokenCache(max int) *tokenCache {
	if max <= 0 {
		return nil
	}
	return &tokenCache{m: make(map[string]cachedToken), max: max}
}

// get returns the entry of a verified token still valid at now. The
// identity is shared: nothing downstream mutates an Identity.
func (c *tokenCache) get(token string, now time.Time) (cachedToken, bool) {
	if c == nil {
		return cachedToken{}, false
	}
	c.mu.RLock()
	e, ok := c.m[token]
	c.mu.RUnlock()
	if !ok || !now.Before(e.expires) || (!e.notBefore.IsZero() && now.Before(e.notBefore)) {
		return cachedToken{}, false
	}
	return e, true
}

// drop forgets a token.
func (c *tokenCache) drop(token string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	delete(c.m, token)
	c.mu.Unlock()
}

// put remembers a verified token. When the cache is full, expired entries
// go first; if none has expired, the whole cache is dropped (a cheap,
// bounded policy: the next calls simply verify again).
func (c *tokenCache) put(token string, e cachedToken, now time.Time) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		for k, v := range c.m {
			if !now.Before(v.expires) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= c.max {
			clear(c.m)
		}
	}
	c.m[token] = e
}
