package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"sync"
	"time"
)

// maxSessions bounds the sessions one process holds; opening one more
// ends the session idle the longest.
const maxSessions = 10000

// session is the server-side record a console cookie refers to. The
// cookie holds only a random id; the bearer credential stays here, in
// this process's memory, and is verified again on every request, so a
// revoked key or an expired token ends the session at once.
type session struct {
	token    string // the credential the session was opened with
	method   string // "token" (the sign-in form) or "oidc"
	csrf     string // the CSRF token of every form of this session
	created  time.Time
	expires  time.Time // created+session_ttl, or the credential's expiry if sooner
	lastSeen time.Time
}

// sessionStore holds the sessions of this process, by the SHA-256 of
// their cookie value (so neither a map dump nor a timing difference gives
// a usable cookie).
type sessionStore struct {
	mu   sync.Mutex
	byID map[[32]byte]*session
	ttl  time.Duration
	idle time.Duration
	now  func() time.Time
}

func newSessionStore(ttl, idle time.Duration, now func() time.Time) *sessionStore {
	return &sessionStore{byID: map[[32]byte]*session{}, ttl: ttl, idle: idle, now: now}
}

// randomToken is 32 random bytes, base64url.
func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("console: no randomness: " + err.Error()) // crypto/rand never fails on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func key(cookie string) [32]byte { return sha256.Sum256([]byte(cookie)) }

// open records a session for a verified credential and returns the
// cookie value that names it. credentialExpiry, when not zero, caps the
// session's life. Only lastSeen changes afterwards, under the store's lock.
func (st *sessionStore) open(token, method string, credentialExpiry time.Time) (string, *session) {
	now := st.now()
	s := &session{token: token, method: method, csrf: randomToken(), created: now, lastSeen: now,
		expires: now.Add(st.ttl)}
	if !credentialExpiry.IsZero() && credentialExpiry.Before(s.expires) {
		s.expires = credentialExpiry
	}
	cookie := randomToken()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.sweepLocked(now)
	if len(st.byID) >= maxSessions {
		var oldest [32]byte
		var at time.Time
		for k, v := range st.byID {
			if at.IsZero() || v.lastSeen.Before(at) {
				oldest, at = k, v.lastSeen
			}
		}
		delete(st.byID, oldest)
	}
	st.byID[key(cookie)] = s
	return cookie, s
}

// get returns the live session of a cookie value, touching it; an
// expired or idle one is ended.
func (st *sessionStore) get(cookie string) *session {
	if cookie == "" {
		return nil
	}
	k := key(cookie)
	now := st.now()
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.byID[k]
	if s == nil {
		return nil
	}
	if !now.Before(s.expires) || now.Sub(s.lastSeen) >= st.idle {
		delete(st.byID, k)
		return nil
	}
	s.lastSeen = now
	return s
}

// end ends the session of a cookie value.
func (st *sessionStore) end(cookie string) {
	st.mu.Lock()
	delete(st.byID, key(cookie))
	st.mu.Unlock()
}

// len is the number of sessions held.
func (st *sessionStore) len() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.byID)
}

func (st *sessionStore) sweepLocked(now time.Time) {
	for k, s := range st.byID {
		if !now.Before(s.expires) || now.Sub(s.lastSeen) >= st.idle {
			delete(st.byID, k)
		}
	}
}

// sameSecret compares two secrets in constant time.
func sameSecret(a, b string) bool {
	return a != "" && len(a) == len(b) && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
