package service_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/internal/service"
)

// A front door renders any error a service returns through the one
// table: REST writes the status, code and Retry-After, MCP the JSON-RPC
// code; both show Message and nothing of the cause.
func ExampleAs() {
	err := fmt.Errorf("batch: %w", &service.Error{
		Kind: service.KindRateLimited, Message: "a limit refused the call; nothing was run; retry after the Retry-After delay",
		CallID: "c-1", DecisionID: "d-1", RetryAfter: 2 * time.Second,
	})
	e := service.As(err)
	fmt.Println(e.Kind.HTTPStatus(), e.Kind.Code(), e.Kind.JSONRPCCode(), e.RetryAfter, e.CallID)

	// An error of no kind is internal and says nothing.
	e = service.As(errors.New("dial tcp 10.0.0.7:5432: connection refused"))
	fmt.Println(e.Kind.HTTPStatus(), e.Kind.Code(), e.Message)
	// Output:
	// 429 rate_limited -32029 2s c-1
	// 500 internal internal error
}
