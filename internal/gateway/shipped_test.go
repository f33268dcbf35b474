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
