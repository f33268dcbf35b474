package main

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/toolgate/toolgate/sdk/upstream"
	"github.com/toolgate/toolgate/sdk/upstream/upstreamtest"
)

func TestMaintenanceWindowAnswers(t *testing.T) {
	iss := upstreamtest.NewIssuer()
	v, err := upstream.NewVerifier(upstream.Options{JWKS: iss.JWKS(), Audience: "maintenance-window"})
	if err != nil {
		t.Fatal(err)
	}
	h := newHandler(v, defaultWindows(), slog.New(slog.DiscardHandler))
	alice := upstream.Identity{Audience: "maintenance-window", Subject: "alice", Tenant: "acme"}
	tests := []struct {
		name   string
		args   Args
		status int
		body   string
	}{
		{"scheduled window", Args{"checkout", 7}, 200, `{"service":"checkout","start":"2025-06-01T02:00:00Z","minutes":30}`},
		{"window beyond the horizon", Args{"search", 7}, 422, `{"tool_error":"No maintenance window is scheduled in the next 7 days."}`},
		{"unknown service reads like a quiet week", Args{"nope", 7}, 422, `{"tool_error":"No maintenance window is scheduled in the next 7 days."}`},
		{"retired service is permanent", Args{"billing", 7}, 409, `{"permanent":true,"detail":"permanent failure: billing is retired"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, iss.Request("/maintenance-window", alice, tt.args))
			b, _ := io.ReadAll(rec.Body)
			if rec.Code != tt.status || string(b) != tt.body {
				t.Fatalf("%d %s, want %d %s", rec.Code, b, tt.status, tt.body)
			}
		})
	}
	// Without the gateway's assertion nothing is answered.
	req := iss.Request("/maintenance-window", alice, Args{"checkout", 7})
	req.Header.Del(upstream.AssertionHeader)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 401 {
		t.Fatalf("no assertion: %d", rec.Code)
	}
}
