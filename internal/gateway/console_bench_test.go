package gateway

import (
	"net/http"
	"testing"
	"time"
)

// BenchmarkConsolePages measures a signed-in page view end to end on
// loopback (session lookup, credential verification, the services, the
// template) with 5,000 decision events of the last hours in the tenant's
// log: the overview reads all of them (its bound), the audit search one
// page of 50, the event page one event with its proof against the
// latest checkpoint.
func BenchmarkConsolePages(b *testing.B) {
	h := start(b)
	now := time.Now().UTC()
	ids := h.appendEvents("acme", 5000, func(i int) time.Time { return now.Add(-time.Duration(i) * 10 * time.Second) }, 0)
	h.sync("acme")
	br := h.browser()
	br.signIn(h.token("acme", "root", "auditor", "approver", "policy-admin"))
	for _, c := range []struct{ name, path string }{
		{"overview-5000-events", "/console/"},
		{"audit-search-50", "/console/audit"},
		{"audit-event-with-proof", "/console/audit/" + ids[0]},
		{"approvals", "/console/approvals"},
		{"policy", "/console/policy"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if p := br.get(c.path); p.status != http.StatusOK {
					b.Fatalf("%s: %d", c.path, p.status)
				}
			}
		})
	}
}
