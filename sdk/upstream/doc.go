// Package upstream is the service side of a Toolgate upstream tool: it
// verifies the identity assertion the gateway sends with every call and
// strictly decodes the arguments into a typed struct, so that a tool
// service is a few lines:
//
//	v, err := upstream.NewVerifier(upstream.Options{
//		JWKSURL:  "http://127.0.0.1:8080/.well-known/jwks.json",
//		Audience: "maintenance-window", // the tool's name
//	})
//	...
//	defer v.Close() // stops refreshing the gateway's keys
//	http.Handle("POST /maintenance-window", upstream.Handle(v,
//		func(ctx context.Context, id *upstream.Identity, args Args) (any, error) {
//			return "Sunday 02:00-02:30 UTC", nil
//		}))
//
// The gateway has already authenticated the caller, validated the
// arguments against the published schema, authorized the call on its typed
// resources and written the decision to its audit log. The assertion (a
// short-lived EdDSA JWT in the Toolgate-Assertion header) names the caller
// (Identity.Subject, Tenant, Roles), the call, the digest of the request
// document the policy decided on, and the digest of the exact request
// body: a verified assertion cannot be replayed with other arguments, and
// the principal never comes from a model-supplied field.
//
// Results and errors follow the gateway's model-facing rules: a string
// result is shown to the model as is, any other value as JSON; a
// *ToolError is shown to the model with exactly its text; Permanent ends
// the agent's run; any other error is shown as "the tool failed" and its
// detail stays in the service.
package upstream
