package gateway

import (
	"context"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/decision"
)

// The repository's own gateway.yaml is what `go run ./cmd/gateway` uses:
// it must load, name only real tools, and the shipped pack must offer
// every one of them to the demo tenant's developer.
func TestShippedConfigOffersEveryTool(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load("../../gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, n := range BuiltinNames() {
		known[n] = true
	}
	if len(cfg.Tools.Builtin) != len(known) {
		t.Errorf("the shipped config enables %d of %d built-in tools", len(cfg.Tools.Builtin), len(known))
	}
	eng := decision.NewEngine(decision.Options{Dir: cfg.Policy.Dir})
	if err := eng.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	rev, _ := eng.Current()
	for _, name := range cfg.Tools.Builtin {
		if !known[name] {
			t.Errorf("shipped config names unknown tool %q", name)
			continue
		}
		in := ast.MustInterfaceToValue(map[string]any{
			"tenant": "acme", "principal": map[string]any{"id": "alice", "roles": []any{"developer"}, "groups": []any{}, "claims": map[string]any{}},
			"client": map[string]any{"id": ""}, "session_id": "s",
			"tool": map[string]any{"name": name, "kind": "builtin", "effects": []any{}, "annotations": map[string]any{}},
		})
		ok, err := rev.Available(context.Background(), in)
		if err != nil || !ok {
			t.Errorf("the shipped pack does not offer %s to an acme developer (err %v)", name, err)
		}
	}
}

// The shipped config declares the example upstream tool; the pack offers
// it to the demo developer, who may ask about the services data.yaml
// lists for the role.
func TestShippedConfigDeclaresTheExampleUpstreamTool(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load("../../gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Tools.Upstream) != 1 || cfg.Tools.Upstream[0].Name != "maintenance-window" || cfg.Auth.Assertion.SigningKeyFile == "" {
		t.Fatalf("upstream tools %+v, assertion %+v", cfg.Tools.Upstream, cfg.Auth.Assertion)
	}
	eng := decision.NewEngine(decision.Options{Dir: cfg.Policy.Dir})
	if err := eng.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	rev, _ := eng.Current()
	in := ast.MustInterfaceToValue(map[string]any{
		"tenant": "acme", "principal": map[string]any{"id": "alice", "roles": []any{"developer"}, "groups": []any{}, "claims": map[string]any{}},
		"client": map[string]any{"id": ""}, "session_id": "s",
		"tool": map[string]any{"name": "maintenance-window", "kind": "upstream", "effects": []any{"maintenance.read"}, "annotations": map[string]any{}},
	})
	if ok, err := rev.Available(context.Background(), in); err != nil || !ok {
		t.Fatalf("the shipped pack does not offer maintenance-window to an acme developer (err %v)", err)
	}
}
