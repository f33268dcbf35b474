package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/toolgate/toolgate/sdk/upstream"
)

// Args are the tool's arguments, as declared by its input_schema in
// gateway.yaml. The gateway has validated them and applied defaults.
type Args struct {
	ServiceID string `json:"service_id"`
	Days      int    `json:"days"`
}

// Window is a planned maintenance window.
type Window struct {
	Service string `json:"service"`
	Start   string `json:"start"` // RFC 3339
	Minutes int    `json:"minutes"`
	InDays  int    `json:"-"`
	Retired bool   `json:"-"`
}

func defaultWindows() map[string]Window {
	return map[string]Window{
		"checkout": {Service: "checkout", Start: "2025-06-01T02:00:00Z", Minutes: 30, InDays: 3},
		"search":   {Service: "search", Start: "2025-06-14T01:00:00Z", Minutes: 90, InDays: 16},
		"payments": {Service: "payments", Start: "2025-06-02T03:00:00Z", Minutes: 20, InDays: 4},
		"billing":  {Service: "billing", Retired: true},
	}
}

// newHandler is the whole tool: look the service up, answer. Who asks
// comes from the verified assertion (id), never from the arguments.
func newHandler(v *upstream.Verifier, windows map[string]Window, log *slog.Logger) http.Handler {
	return upstream.Handle(v, func(_ context.Context, id *upstream.Identity, a Args) (any, error) {
		log.Info("maintenance-window", "call_id", id.CallID, "tenant", id.Tenant, "principal", id.Subject, "service", a.ServiceID)
		w, ok := windows[a.ServiceID]
		switch {
		case ok && w.Retired:
			// Asking again cannot help: the gateway ends the run (HTTP 424).
			return nil, upstream.Permanent(a.ServiceID + " is retired")
		case !ok || w.InDays > a.Days:
			// Unknown services read the same as a quiet week: the model
			// learns nothing about which services exist.
			return nil, &upstream.ToolError{Message: fmt.Sprintf("No maintenance window is scheduled in the next %d days.", a.Days)}
		}
		return w, nil
	}, upstream.WithLogger(log))
}
