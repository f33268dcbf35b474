package service

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	apiv1 "github.com/toolgate/toolgate/api/v1"
)

// Every kind has its own row: a status, the code the contract pairs with
// it, and a JSON-RPC code in the reserved range. A kind added without a
// row would answer 0 and "".
func TestEveryKindHasOneRow(t *testing.T) {
	want := map[Kind]struct {
		status int
		code   string
	}{
		KindInternal: {500, apiv1.CodeInternal}, KindInvalid: {400, apiv1.CodeInvalidRequest},
		KindUnauthenticated: {401, apiv1.CodeUnauthenticated}, KindForbidden: {403, apiv1.CodeForbidden},
		KindNotFound: {404, apiv1.CodeNotFound}, KindMethodNotAllowed: {405, apiv1.CodeMethodNotAllowed},
		KindConflict: {409, apiv1.CodeConflict}, KindUnfinished: {409, apiv1.CodeUnfinished},
		KindTooLarge: {413, apiv1.CodeTooLarge}, KindUnsupportedMediaType: {415, apiv1.CodeUnsupportedMediaType},
		KindPermanent: {424, apiv1.CodePermanentFailure}, KindRateLimited: {429, apiv1.CodeRateLimited},
		KindUnavailable: {503, apiv1.CodeUnavailable},
	}
	if len(want) != int(numKinds) {
		t.Fatalf("the test knows %d kinds, the table has %d", len(want), numKinds)
	}
	codes := map[string]Kind{}
	for k := Kind(0); k < numKinds; k++ {
		w := want[k]
		if k.HTTPStatus() != w.status || k.Code() != w.code {
			t.Errorf("kind %d = %d %q, want %d %q", k, k.HTTPStatus(), k.Code(), w.status, w.code)
		}
		if rpc := k.JSONRPCCode(); rpc > -32000 || rpc < -32768 {
			t.Errorf("kind %s: JSON-RPC code %d outside the reserved range", k, rpc)
		}
		if other, dup := codes[k.Code()]; dup {
			t.Errorf("kinds %d and %d share the code %q", other, k, k.Code())
		}
		codes[k.Code()] = k
	}
	if KindInvalid.JSONRPCCode() != -32602 || KindInternal.JSONRPCCode() != -32603 {
		t.Error("invalid and internal must be JSON-RPC's own invalid params and internal error")
	}
	if k := Kind(200); k.HTTPStatus() != http.StatusInternalServerError || k.Code() != apiv1.CodeInternal {
		t.Errorf("an unknown kind answers %d %q, want the internal row", k.HTTPStatus(), k.Code())
	}
}

// An error that is no *Error never shows its text: it is internal with a
// message that says nothing.
func TestAsHidesForeignErrors(t *testing.T) {
	cause := errors.New("pq: password authentication failed for user toolgate at 10.0.0.7")
	e := As(fmt.Errorf("wrapped: %w", cause))
	if e.Kind != KindInternal || e.Message != "internal error" || strings.Contains(e.Message, "10.0.0.7") {
		t.Fatalf("As = %+v", e)
	}
	if !errors.Is(e, cause) {
		t.Error("the cause is lost for logs")
	}
	wrapped := fmt.Errorf("ctx: %w", &Error{Kind: KindNotFound, Message: "no such call"})
	if got := As(wrapped); got.Kind != KindNotFound || got.Message != "no such call" {
		t.Errorf("a wrapped *Error is not found: %+v", got)
	}
	if KindOf(nil) != KindInternal {
		// nil is not a failure, but KindOf must not panic on it.
		t.Error("KindOf(nil)")
	}
}
