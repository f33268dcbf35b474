package decision

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/prometheus/client_golang/prometheus"
)

// shippedPack is the repository's default policy pack.
const shippedPack = "../../policies"

// minimalAvailability and minimalAuthz are the smallest pack that meets the
// contract.
const (
	minimalAvailability = "package toolgate.availability\n\ndefault allow := false\n\nallow if input.tool.name == \"read-file\"\n"
	minimalAuthz        = "package toolgate.authz\n\ndecision := {\"allow\": input.tool.name == \"read-file\", \"reasons\": [\"minimal\"]}\n"
)

// writePack writes files (slash paths relative to dir) into dir, creating
// folders; an empty content removes the file.
func writePack(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if content == "" {
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// newPack writes a minimal valid pack plus files into a temp dir.
func newPack(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	writePack(t, dir, map[string]string{
		"availability.rego": minimalAvailability,
		"authz.rego":        minimalAuthz,
	})
	writePack(t, dir, files)
	return dir
}

// loaded returns an engine that has loaded dir, failing the test otherwise.
func loaded(t testing.TB, dir string, reg prometheus.Registerer) *Engine {
	t.Helper()
	e := NewEngine(Options{Dir: dir, Registerer: reg})
	if err := e.Load(context.Background()); err != nil {
		t.Fatalf("Load: %v", err)
	}
	return e
}

// current returns the serving revision, failing the test if there is none.
func current(t testing.TB, e *Engine) *Revision {
	t.Helper()
	r, err := e.Current()
	if err != nil {
		t.Fatalf("Current: %v", err)
	}
	return r
}

// value parses a JSON/Rego literal into an ast.Value.
func value(t testing.TB, s string) ast.Value {
	t.Helper()
	v, err := ast.ParseTerm(s)
	if err != nil {
		t.Fatalf("parse %s: %v", s, err)
	}
	return v.Value
}

// metricValue reads a counter or gauge from reg by name and labels; -1 if
// absent.
func metricValue(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue metric
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return -1
}

// Inputs shaped like the gateway's.
const (
	availabilityDeveloper = `{"tenant":"acme","principal":{"id":"alice","roles":["developer"],"groups":[],"claims":{}},"client":{"id":"platform-a"},"session_id":"s-1","tool":{"name":"read-file","kind":"builtin","effects":["fs.read"],"annotations":{"read_only":true,"destructive":false,"idempotent":true,"open_world":false}}}`
)

// requestDoc is an authorization input for acme with the given roles, tool
// and resources (a JSON array).
func requestDoc(roles, tool, resources string) string {
	return `{"version":1,"tenant":"acme","principal":{"id":"alice","roles":` + roles + `,"groups":[],"claims":{}},` +
		`"client":{"id":"platform-a"},"session_id":"s-1","call_id":"c-1",` +
		`"tool":{"name":"` + tool + `","kind":"builtin","effects":["fs.read"],"annotations":{"read_only":true,"destructive":false,"idempotent":true,"open_world":false}},` +
		`"action":"fs.read","resources":` + resources + `,"args":{"path":"docs/guide.md"},"digest":"sha256:0000"}`
}
