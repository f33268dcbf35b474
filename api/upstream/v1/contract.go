package v1

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/golang-jwt/jwt/v5"
)

const (
	// AssertionHeader is the HTTP request header that carries the
	// assertion.
	AssertionHeader = "Toolgate-Assertion"
	// MetaAssertion is the _meta member of an MCP tools/call that carries
	// the assertion to an upstream spoken to over stdio, which has no
	// headers.
	MetaAssertion = "dev.toolgate/assertion"
	// DefaultIssuer is the gateway's default "iss"
	// (auth.assertion.issuer in gateway.yaml).
	DefaultIssuer = "toolgate"
	// Algorithm is the JWS "alg" of every assertion.
	Algorithm = "EdDSA"
	// DigestPrefix starts ArgsDigest's value.
	DigestPrefix = "sha256:"
)

// Claims is the payload of an assertion: what the gateway says about one
// call. Members are encoded in the order of the fields. Audience is one
// JSON string (never an array). SessionID is left out when the call named
// no session; the gateway sends Roles as [] when the caller has none.
type Claims struct {
	Issuer        string           `json:"iss"`
	Audience      string           `json:"aud"` // the tool's name
	Subject       string           `json:"sub"` // the verified principal
	Tenant        string           `json:"tenant"`
	Roles         []string         `json:"roles"`
	CallID        string           `json:"call_id"`              // the gateway's call id
	SessionID     string           `json:"session_id,omitempty"` // "" when the call named no session
	RequestDigest string           `json:"request_digest"`       // digest of the request document policy decided on
	ArgsDigest    string           `json:"args_digest"`          // ArgsDigest of the exact request body
	IssuedAt      *jwt.NumericDate `json:"iat,omitempty"`
	NotBefore     *jwt.NumericDate `json:"nbf,omitempty"`
	ExpiresAt     *jwt.NumericDate `json:"exp,omitempty"`
	ID            string           `json:"jti"` // unique per assertion
}

var _ jwt.Claims = (*Claims)(nil)

// GetExpirationTime implements jwt.Claims.
func (c *Claims) GetExpirationTime() (*jwt.NumericDate, error) { return c.ExpiresAt, nil }

// GetIssuedAt implements jwt.Claims.
func (c *Claims) GetIssuedAt() (*jwt.NumericDate, error) { return c.IssuedAt, nil }

// GetNotBefore implements jwt.Claims.
func (c *Claims) GetNotBefore() (*jwt.NumericDate, error) { return c.NotBefore, nil }

// GetIssuer implements jwt.Claims.
func (c *Claims) GetIssuer() (string, error) { return c.Issuer, nil }

// GetSubject implements jwt.Claims.
func (c *Claims) GetSubject() (string, error) { return c.Subject, nil }

// GetAudience implements jwt.Claims: the one audience, or none when it is
// empty.
func (c *Claims) GetAudience() (jwt.ClaimStrings, error) {
	if c.Audience == "" {
		return nil, nil
	}
	return jwt.ClaimStrings{c.Audience}, nil
}

// ArgsDigest is the args_digest of a request body: DigestPrefix and the
// lowercase hex SHA-256 of exactly the bytes sent.
func ArgsDigest(body []byte) string {
	sum := sha256.Sum256(body)
	return DigestPrefix + hex.EncodeToString(sum[:])
}

// MaxToolErrorBytes bounds ErrorBody.ToolError: a longer text is not a
// declared error but a failure ("the tool failed").
const MaxToolErrorBytes = 1024

// ErrorBody is the body of a non-2xx answer a service declares (any
// other body is an undeclared failure): ToolError is shown to the model
// as is (non-blank, printable, at most MaxToolErrorBytes); Permanent ends
// the agent's run. Detail goes to the gateway's audit log, never to the
// model. A member that is nil is left out.
type ErrorBody struct {
	ToolError *string `json:"tool_error,omitzero"`
	Permanent *bool   `json:"permanent,omitzero"`
	Detail    *string `json:"detail,omitzero"`
}
