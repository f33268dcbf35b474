package auth

import "errors"

// ErrUnauthenticated is matched (errors.Is) by every credential failure.
// Clients only ever learn this much; the Reason is for logs and metrics.
var ErrUnauthenticated = errors.New("unauthenticated")

// Reason says why a credential was refused. The set is small and fixed so
// it can label a metric.
type Reason string

// Reasons a credential is refused.
const (
	ReasonMissingCredentials Reason = "missing credentials"
	ReasonMalformedHeader    Reason = "malformed header"
	ReasonMalformedToken     Reason = "malformed token"
	ReasonAlgorithm          Reason = "algorithm not allowed"
	ReasonUnknownKey         Reason = "unknown key"
	ReasonKeysNotLoaded      Reason = "keys not loaded" // the identity provider's keys have not loaded yet
	ReasonCriticalHeader     Reason = "unsupported critical header"
	ReasonBadSignature       Reason = "bad signature"
	ReasonExpired            Reason = "expired"
	ReasonNotYetValid        Reason = "not yet valid"
	ReasonMissingClaim       Reason = "missing required claim" // exp, or iss/aud when configured
	ReasonBadIssuer          Reason = "issuer mismatch"
	ReasonBadAudience        Reason = "audience mismatch"
	ReasonBadClaims          Reason = "invalid claims"
	ReasonMissingTenant      Reason = "missing tenant claim"
	ReasonUnknownTenant      Reason = "unknown tenant"
	ReasonMissingSubject     Reason = "missing subject"
	ReasonUnknownAPIKey      Reason = "unknown api key"
)

// Error is a refused credential. It matches ErrUnauthenticated; Err, when
// set, is the underlying cause (for logs only, never for responses).
type Error struct {
	Reason Reason
	Err    error
}

// Error describes the refusal for logs: "unauthenticated: <reason>[: <cause>]".
func (e *Error) Error() string {
	if e.Err != nil {
		return "unauthenticated: " + string(e.Reason) + ": " + e.Err.Error()
	}
	return "unauthenticated: " + string(e.Reason)
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Is makes every *Error match ErrUnauthenticated.
func (e *Error) Is(target error) bool { return target == ErrUnauthenticated }

func refuse(r Reason, err error) *Error { return &Error{Reason: r, Err: err} }
