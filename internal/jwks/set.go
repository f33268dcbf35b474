// Package jwks holds the public keys that verify JWTs: a JWK Set (RFC
// 7517) read from a file or bytes, or fetched from an identity provider —
// a JWKS URL, or the jwks_uri of an OpenID Connect issuer's discovery
// document — and kept fresh.
//
// Fetching, parsing and caching the set is github.com/MicahParks/jwkset's
// work, and golang-jwt gets keys by kid through
// github.com/MicahParks/keyfunc. This package adds what a gateway facing
// untrusted tokens needs on top of them:
//
//   - only public signature keys verify, each only for the algorithms
//     that fit its type and curve (and its "alg" when it pins one);
//   - a token naming a kid the set does not hold triggers a fetch at most
//     once per interval; callers never queue behind a rate limiter, and
//     those that arrive during a fetch wait for it instead of starting
//     another;
//   - a remote set never blocks start: it loads in the background, and
//     until it has, Key refuses with ErrNotLoaded (Loaded says so for
//     readiness checks);
//   - Holds tells a cache of verified tokens whether the key that verified
//     a token is still in the set.
package jwks

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/golang-jwt/jwt/v5"
)

// Errors of Key. Callers map them to their own refusal reasons.
var (
	// ErrNotLoaded: a remote set has not loaded yet (the provider was
	// unreachable or answered with something unusable).
	ErrNotLoaded = errors.New("the identity provider's keys are not loaded")
	// ErrUnknownKey: no usable key has the token's kid (or the token
	// names none and the set does not hold exactly one key).
	ErrUnknownKey = errors.New("no key for the token's kid")
	// ErrAlgorithm: the key does not verify the token's alg.
	ErrAlgorithm = errors.New("the key does not verify the token's alg")
)

// Set is a JWK Set of signature verification keys. It is safe for
// concurrent use.
type Set struct {
	src   atomic.Pointer[source] // nil until a remote set has loaded
	first chan struct{}          // closed when the first load attempt has ended
	algs  []string               // a static set's algorithms; nil for a remote set

	stop     context.CancelFunc // ends a remote set's loading and refreshing
	done     chan struct{}      // closed when the loader has returned
	stopOnce sync.Once
}

// source is where a loaded set's keys are read from.
type source struct {
	store  jwkset.Storage  // every key as fetched; reading never fetches
	lookup keyfunc.Keyfunc // by kid, usable keys only, through the refresh gate
	stop   func()          // ends a remote storage's refreshing; nil for a static set
}

// LoadFile reads a static JWK Set from path (see Parse).
func LoadFile(path string) (*Set, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("jwks %s: %w", path, err)
	}
	return s, nil
}

// Parse returns a static set of the keys in a JWK Set document. Keys meant
// only for encryption ("use": "enc", or key_ops without "verify") are left
// out. Private or symmetric key material, unknown key types and curves,
// RSA keys under MinRSABits, an "alg" that does not fit its key, duplicate
// key ids and a set with no verification key are errors: a file of
// verification keys that holds any of them is a mistake worth stopping
// for.
func Parse(data []byte) (*Set, error) {
	var doc struct {
		Keys []jsontext.Value `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	ctx := context.Background()
	store := jwkset.NewMemoryStorage()
	s := &Set{first: make(chan struct{})}
	close(s.first)
	kids := map[string]bool{}
	n := 0
	for i, raw := range doc.Keys {
		// jwkset drops a lone "d" (without the CRT members) silently and
		// keeps "k" as a key: refuse both before it sees them.
		var secret struct {
			D string `json:"d"`
			K string `json:"k"`
		}
		if err := json.Unmarshal(raw, &secret); err != nil {
			return nil, fmt.Errorf("keys[%d]: %w", i, err)
		}
		if secret.D != "" || secret.K != "" {
			return nil, fmt.Errorf("keys[%d]: contains private or symmetric key material; publish only public keys", i)
		}
		j, err := jwkset.NewJWKFromRawJSON([]byte(raw), jwkset.JWKMarshalOptions{Private: true}, jwkset.JWKValidateOptions{})
		if err != nil {
			return nil, fmt.Errorf("keys[%d]: %w", i, err)
		}
		key, err := publicKey(j)
		if errors.Is(err, errSkip) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("keys[%d]: %w", i, err)
		}
		kid := j.Marshal().KID
		if kids[kid] {
			if kid == "" {
				return nil, fmt.Errorf("keys[%d]: a second key without kid: give every key of a set of several a kid", i)
			}
			return nil, fmt.Errorf("keys[%d]: duplicate kid %q", i, kid)
		}
		kids[kid] = true
		if err := store.KeyWrite(ctx, j); err != nil {
			return nil, fmt.Errorf("keys[%d]: %w", i, err)
		}
		n++
		for _, a := range keyAlgorithms(j, key) {
			if !slices.Contains(s.algs, a) {
				s.algs = append(s.algs, a)
			}
		}
	}
	if n == 0 {
		return nil, errors.New("no signature verification keys")
	}
	src, err := newSource(store, store)
	if err != nil {
		return nil, err
	}
	s.src.Store(src)
	return s, nil
}

// keyAlgorithms returns the algorithms a JWK verifies: the one it pins,
// or every one that fits its key.
func keyAlgorithms(j jwkset.JWK, key crypto.PublicKey) []string {
	if alg := string(j.Marshal().ALG); alg != "" {
		return []string{alg}
	}
	return Algorithms(key)
}

func newSource(store, gated jwkset.Storage) (*source, error) {
	kf, err := keyfunc.New(keyfunc.Options{Storage: usable{gated}})
	if err != nil {
		return nil, err
	}
	return &source{store: store, lookup: kf}, nil
}

// Algorithms returns the algorithms the keys of a static set verify, in
// the order of the file; for a remote set, whose keys may change, every
// asymmetric algorithm (Asymmetric).
func (s *Set) Algorithms() []string {
	if s.stop == nil {
		return slices.Clone(s.algs)
	}
	return slices.Clone(Asymmetric)
}

// Loaded reports whether the set has keys: always for a static set; for
// a remote one, once its first fetch succeeded.
func (s *Set) Loaded() bool { return s.src.Load() != nil }

// Close stops a remote set's loading and refreshing. Keys already loaded
// stay usable. Close is safe to call more than once, and on a static set.
func (s *Set) Close() {
	if s.stop == nil {
		return
	}
	s.stopOnce.Do(func() {
		s.stop()
		<-s.done
	})
}

// loaded returns the loaded source, waiting (at most as long as ctx
// allows) for the first load attempt of a remote set to end, so that
// tokens arriving just after start are not refused for want of keys that
// are on their way.
func (s *Set) loaded(ctx context.Context) (*source, error) {
	if src := s.src.Load(); src != nil {
		return src, nil
	}
	select {
	case <-s.first:
	case <-ctx.Done():
	}
	if src := s.src.Load(); src != nil {
		return src, nil
	}
	return nil, ErrNotLoaded
}

// Key returns the key that verifies t (whose alg the caller already
// allowed) and the kid it was found under. A token without kid is
// verified only when the set holds exactly one key, so the choice is never
// ambiguous. A kid the set does not hold may fetch the set again (remote
// sets, rate-limited). Errors match ErrNotLoaded, ErrUnknownKey or
// ErrAlgorithm.
func (s *Set) Key(ctx context.Context, t *jwt.Token) (kid string, key crypto.PublicKey, err error) {
	src, err := s.loaded(ctx)
	if err != nil {
		return "", nil, err
	}
	alg := t.Method.Alg()
	v, named := t.Header[jwkset.HeaderKID]
	if !named {
		keys, err := usableKeys(ctx, src.store)
		if err != nil {
			return "", nil, err
		}
		if len(keys) != 1 {
			return "", nil, fmt.Errorf("%w: the token names no kid and the set holds %d keys", ErrUnknownKey, len(keys))
		}
		if !slices.Contains(keyAlgorithms(keys[0].jwk, keys[0].key), alg) {
			return "", nil, fmt.Errorf("%w: %q", ErrAlgorithm, alg)
		}
		return "", keys[0].key, nil
	}
	kid, ok := v.(string)
	if !ok {
		return "", nil, fmt.Errorf("%w: kid is not a string", ErrUnknownKey)
	}
	got, err := src.lookup.KeyfuncCtx(ctx)(t)
	switch {
	case errors.Is(err, jwkset.ErrKeyNotFound):
		return "", nil, fmt.Errorf("%w %q", ErrUnknownKey, kid)
	case err != nil:
		// The key pins another alg.
		return "", nil, fmt.Errorf("%w %q: %v", ErrAlgorithm, alg, err)
	}
	key, ok = got.(crypto.PublicKey)
	if !ok || !Fits(key, alg) {
		return "", nil, fmt.Errorf("%w %q", ErrAlgorithm, alg)
	}
	return kid, key, nil
}

// Holds reports whether the set still holds key under kid ("" for a key
// found for a token without kid), without fetching anything. A cache of
// verified tokens asks it before it answers, so that a token never
// outlives the removal of its key from the provider's set.
func (s *Set) Holds(kid string, key crypto.PublicKey) bool {
	src := s.src.Load()
	if src == nil {
		return false
	}
	ctx := context.Background()
	if kid == "" {
		keys, err := usableKeys(ctx, src.store)
		return err == nil && len(keys) == 1 && equal(keys[0].key, key)
	}
	// key passed every check when it verified the token; the same key
	// under the same kid needs none again (this runs on every cache hit).
	j, err := src.store.KeyRead(ctx, kid)
	return err == nil && equal(j.Key(), key)
}

type usableKey struct {
	jwk jwkset.JWK
	key crypto.PublicKey
}

// usableKeys returns the keys of store that verify signatures.
func usableKeys(ctx context.Context, store jwkset.Storage) ([]usableKey, error) {
	all, err := store.KeyReadAll(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]usableKey, 0, len(all))
	for _, j := range all {
		if key, err := publicKey(j); err == nil {
			out = append(out, usableKey{j, key})
		}
	}
	return out, nil
}

// usable hides the keys of a storage that must not verify signatures
// (private or symmetric material, encryption keys, weak or ill-fitting
// keys) from keyfunc: they read as not found.
type usable struct{ jwkset.Storage }

func (u usable) KeyRead(ctx context.Context, kid string) (jwkset.JWK, error) {
	j, err := u.Storage.KeyRead(ctx, kid)
	if err != nil {
		return j, err
	}
	if _, err := publicKey(j); err != nil {
		return jwkset.JWK{}, fmt.Errorf("%w: kid %q: %v", jwkset.ErrKeyNotFound, kid, err)
	}
	return j, nil
}
