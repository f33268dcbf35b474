// Package v1 is the wire contract between the Toolgate gateway and an
// upstream tool service, written once: the gateway (internal/assertion,
// internal/tools/upstream, internal/tools/mcptool) produces it and the
// service SDK (sdk/upstream) consumes it, both with these types, so the
// two sides cannot drift.
//
// The contract is:
//
//   - every call carries an identity assertion, a compact EdDSA JWT
//     ([Algorithm]) whose payload is [Claims], in the [AssertionHeader]
//     request header (HTTP) or the [MetaAssertion] member of a tools/call's
//     _meta (MCP over stdio);
//   - its args_digest is [ArgsDigest] of the exact request body;
//   - the gateway publishes its verification keys as a [JWKS] of Ed25519
//     [JWK]s at [JWKSPath];
//   - a service declares a failure with a non-2xx [ErrorBody]: a
//     model-facing tool_error of at most [MaxToolErrorBytes], or
//     permanent.
//
// It depends only on the standard library and github.com/golang-jwt/jwt/v5
// (Claims implements jwt.Claims, so golang-jwt signs and parses it as
// is). Import it as
//
//	import upstreamv1 "github.com/toolgate/toolgate/api/upstream/v1"
package v1
