package decision

import (
	"context"
	"strings"
	"testing"
)

func TestMCPPinsComeFromDataOrRulesAndMustBeWellFormed(t *testing.T) {
	d := "sha256:" + strings.Repeat("a", 64)
	rev := current(t, loaded(t, newPack(t, map[string]string{
		"data.json": `{"toolgate": {"mcp_pins": {"notes": {"search_notes": "` + d + `"}}}}`,
	}), nil))
	pins, err := rev.MCPPins(context.Background())
	if err != nil || pins["notes"]["search_notes"] != d {
		t.Fatalf("pins = %v, %v", pins, err)
	}
	rev = current(t, loaded(t, newPack(t, nil), nil))
	if pins, err := rev.MCPPins(context.Background()); err != nil || pins != nil {
		t.Fatalf("no pins: %v, %v", pins, err)
	}
	for name, data := range map[string]string{
		"not an object":       `{"toolgate": {"mcp_pins": ["x"]}}`,
		"tools not an object": `{"toolgate": {"mcp_pins": {"notes": "x"}}}`,
		"short digest":        `{"toolgate": {"mcp_pins": {"notes": {"t": "sha256:abc"}}}}`,
		"upper-case hex":      `{"toolgate": {"mcp_pins": {"notes": {"t": "sha256:` + strings.Repeat("A", 64) + `"}}}}`,
	} {
		rev := current(t, loaded(t, newPack(t, map[string]string{"data.json": data}), nil))
		if pins, err := rev.MCPPins(context.Background()); err == nil {
			t.Errorf("%s: accepted %v", name, pins)
		}
	}
}
