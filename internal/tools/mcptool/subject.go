package mcptool

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	upstreamv1 "github.com/toolgate/toolgate/api/upstream/v1"
)

// Sessions of the subjects of a token-exchange upstream.
//
// An MCP server binds a session to the user of the token that opened it
// (the Go SDK's streamable handler answers 403 "session user mismatch" to
// any other user's token), and one subject's session must never carry
// another's token. So with a token exchange each subject (tenant,
// principal, roles) calls over a session of its own, opened with its own
// token; the gateway's listing uses the upstream's main session with the
// gateway's token.
const (
	// MaxSubjectSessions is how many subjects' sessions an upstream keeps
	// open; beyond it the least recently used idle one is closed (sessions
	// in use are never closed for room, and at most max_concurrent are).
	MaxSubjectSessions = 64
	// SubjectSessionIdle closes a subject's session unused this long (the
	// next session opened sweeps them).
	SubjectSessionIdle = 5 * time.Minute
)

// subjectSession is one subject's session and its use.
type subjectSession struct {
	sess  *mcp.ClientSession
	inUse int
	last  time.Time
}

// callSession returns the session a call with claims runs on and the
// function to call once the call is done (broken: the session failed and
// must not be reused).
func (u *Upstream) callSession(ctx context.Context, claims *upstreamv1.Claims) (*mcp.ClientSession, func(broken bool), error) {
	if u.exch == nil {
		s, err := u.session(ctx)
		if err != nil {
			return nil, nil, err
		}
		return s, func(broken bool) {
			if broken {
				u.drop(s)
			}
		}, nil
	}
	key := subjectOf(*claims, false)
	if ss := u.useSubject(key); ss != nil {
		return ss.sess, u.releaser(key, ss), nil
	}
	// The call's own assertion is the subject token (the STS sees the
	// call that needs the token); the session then uses the cached token.
	tok, err := u.o.Signer.Sign(*claims)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the assertion: %w", err)
	}
	if _, err := u.exch.token(ctx, key, tok); err != nil {
		return nil, nil, err
	}
	// The session's own requests (initialize, its DELETE) speak for the
	// subject, not for the call that happened to open it.
	own := &upstreamv1.Claims{Audience: u.o.Namespace, Subject: claims.Subject, Tenant: claims.Tenant, Roles: claims.Roles}
	cctx, cancel := context.WithTimeout(context.WithValue(context.Background(), callKey{}, own), u.o.Timeout)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	client := newClient(nil)
	s, err := client.Connect(cctx, u.callTransport(), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("mcp upstream %s: connecting: %w", u.o.Namespace, err)
	}
	ss, evicted, err := u.addSubject(key, s)
	for _, e := range evicted {
		go e.Close()
	}
	if err != nil {
		return nil, nil, err
	}
	return ss.sess, u.releaser(key, ss), nil
}

// useSubject returns the open session of key, marked in use, or nil.
func (u *Upstream) useSubject(key subject) *subjectSession {
	u.mu.Lock()
	defer u.mu.Unlock()
	ss := u.subs[key]
	if ss != nil && !u.closed {
		ss.inUse++
		ss.last = time.Now()
		return ss
	}
	return nil
}

// addSubject keeps s as key's session (or uses the one another call
// opened meanwhile, closing s), making room first; evicted are the
// sessions to close.
func (u *Upstream) addSubject(key subject, s *mcp.ClientSession) (_ *subjectSession, evicted []*mcp.ClientSession, _ error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return nil, []*mcp.ClientSession{s}, errors.New("upstream closed")
	}
	if ss := u.subs[key]; ss != nil {
		ss.inUse++
		ss.last = time.Now()
		return ss, []*mcp.ClientSession{s}, nil
	}
	now := time.Now()
	for k, ss := range u.subs {
		if ss.inUse == 0 && now.Sub(ss.last) > SubjectSessionIdle {
			evicted = append(evicted, ss.sess)
			delete(u.subs, k)
		}
	}
	for len(u.subs) >= MaxSubjectSessions {
		var lru subject
		var at time.Time
		for k, ss := range u.subs {
			if ss.inUse == 0 && (at.IsZero() || ss.last.Before(at)) {
				lru, at = k, ss.last
			}
		}
		if at.IsZero() {
			break // all in use: room is made once they are done
		}
		evicted = append(evicted, u.subs[lru].sess)
		delete(u.subs, lru)
	}
	ss := &subjectSession{sess: s, inUse: 1, last: now}
	u.subs[key] = ss
	return ss, evicted, nil
}

// releaser ends one call's use of ss; a broken session is closed and
// forgotten, so that the subject's next call reconnects.
func (u *Upstream) releaser(key subject, ss *subjectSession) func(broken bool) {
	return func(broken bool) {
		u.mu.Lock()
		ss.inUse--
		ss.last = time.Now()
		drop := broken && u.subs[key] == ss
		if drop {
			delete(u.subs, key)
		}
		u.mu.Unlock()
		if drop {
			ss.sess.Close()
		}
	}
}
