package upstream_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"

	"github.com/toolgate/toolgate/sdk/upstream"
	"github.com/toolgate/toolgate/sdk/upstream/upstreamtest"
)

// A tool service: verify the gateway's assertion, decode typed arguments,
// answer. In production JWKSURL points at the gateway; here a test issuer
// stands in for it.
func ExampleHandle() {
	iss := upstreamtest.NewIssuer()
	v, err := upstream.NewVerifier(upstream.Options{
		JWKS:     iss.JWKS(), // production: JWKSURL: "http://gateway:8080/.well-known/jwks.json"
		Audience: "maintenance-window",
	})
	if err != nil {
		panic(err)
	}
	type Args struct {
		ServiceID string `json:"service_id"`
	}
	h := upstream.Handle(v, func(ctx context.Context, id *upstream.Identity, a Args) (any, error) {
		if a.ServiceID != "checkout" {
			return nil, &upstream.ToolError{Message: "No maintenance window is scheduled."}
		}
		return fmt.Sprintf("%s: Sunday 02:00-02:30 UTC (asked by %s of %s)", a.ServiceID, id.Subject, id.Tenant), nil
	})

	for _, service := range []string{"checkout", "search"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, iss.Request("/maintenance-window",
			upstream.Identity{Audience: "maintenance-window", Subject: "alice", Tenant: "acme"},
			map[string]string{"service_id": service}))
		b, _ := io.ReadAll(rec.Body)
		fmt.Println(rec.Code, string(b))
	}
	// Output:
	// 200 "checkout: Sunday 02:00-02:30 UTC (asked by alice of acme)"
	// 422 {"tool_error":"No maintenance window is scheduled."}
}

// Verify on its own, for services that do not use Handle.
func ExampleVerifier_Verify() {
	iss := upstreamtest.NewIssuer()
	v, _ := upstream.NewVerifier(upstream.Options{JWKS: iss.JWKS(), Audience: "maintenance-window"})
	body := []byte(`{"service_id":"checkout"}`)
	token := iss.Sign(upstream.Identity{Audience: "maintenance-window", Subject: "alice", Tenant: "acme", Roles: []string{"oncall"}}, body)

	id, err := v.Verify(context.Background(), token, body)
	fmt.Println(id.Subject, id.Tenant, id.HasRole("oncall"), err)

	_, err = v.Verify(context.Background(), token, []byte(`{"service_id":"payments"}`))
	fmt.Println(err)
	// Output:
	// alice acme true <nil>
	// invalid toolgate assertion: issued for another request body
}
