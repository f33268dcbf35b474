package gateway

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// CPU is shared between tenants, not between processes: one tenant keeping
// four jails busy does not take a contended CPU from another tenant's
// single busy command, which gets about half of it (a fifth without the
// per-tenant CPU cgroups). All the commands count on CPU 0, so they
// contend whatever the scheduler's balancer does.
func TestCPUIsSharedByTenant(t *testing.T) {
	needPython(t)
	asGatewayUsers(t, func(t *testing.T) {
		h := start(t, withAllTools, ownJailPack(t), func(s *setup) {
			s.files["globex/out/.keep"] = ""
			s.limitYAML = "  cpu_weight: 100\n"
		})
		conf, _ := h.do("GET", "/readyz", "", nil).body["confinement"].(map[string]any)
		if os.Geteuid() != 0 {
			// A non-root gateway here has no cgroup it may write: it says
			// so (docs/security-model.md "What a gateway that is not root
			// needs").
			if conf["cpu"] != "process" || conf["cpu_reason"] == "" {
				t.Fatalf("a non-root gateway's confinement: %v", conf)
			}
			return
		}
		if conf["cpu"] != "weight" {
			t.Fatalf("a root gateway's confinement: %v", conf)
		}
		hog := func(name string) string {
			return "python3 -c " + shellQuote(fmt.Sprintf(`import os
os.sched_setaffinity(0, {0})
n = 0
while True:
    n += 1
    if n %% 200000 == 0:
        with open("out/%[1]s.tmp", "w") as f:
            f.write(str(n))
        os.replace("out/%[1]s.tmp", "out/%[1]s")
`, name))
		}
		starts := []struct{ tenant, name string }{
			{"acme", "a1"}, {"acme", "a2"}, {"acme", "a3"}, {"acme", "a4"}, {"globex", "g1"},
		}
		var ids []struct{ tenant, id string }
		for _, s := range starts {
			tok := h.token(s.tenant, "p", "anyone")
			b, _ := json.Marshal(map[string]any{"arguments": map[string]any{"command": hog(s.name), "background": true}, "session_id": "s1"})
			r := h.call(tok, "bash", string(b))
			data, _ := r.body["data"].(map[string]any)
			id, _ := data["process_id"].(string)
			if r.str("outcome") != "ok" || id == "" {
				t.Fatalf("background start: %s", r.raw)
			}
			ids = append(ids, struct{ tenant, id string }{s.tenant, id})
		}
		t.Cleanup(func() {
			for _, x := range ids {
				b, _ := json.Marshal(map[string]any{"arguments": map[string]any{"process_id": x.id, "grace_ms": 0}, "session_id": "s1"})
				h.call(h.token(x.tenant, "p", "anyone"), "process-stop", string(b))
			}
		})
		counts := func() map[string]int {
			out := map[string]int{}
			for _, s := range starts {
				b, err := os.ReadFile(filepath.Join(h.dir, "ws", s.tenant, "out", s.name))
				if err != nil {
					return nil
				}
				out[s.name], _ = strconv.Atoi(string(b))
			}
			return out
		}
		var before map[string]int
		for deadline := time.Now().Add(60 * time.Second); before == nil && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
			before = counts()
		}
		if before == nil {
			t.Fatal("the five commands did not all start counting")
		}
		time.Sleep(2 * time.Second) // the measuring window
		after := counts()
		acme, globex := 0, after["g1"]-before["g1"]
		for name, n := range after {
			if strings.HasPrefix(name, "a") {
				acme += n - before[name]
			}
		}
		share := float64(globex) / float64(max(1, acme+globex))
		t.Logf("acme's four commands %d, globex's one %d: globex's share %.2f", acme, globex, share)
		if share < 0.35 {
			t.Errorf("globex's one command got %.0f%% of the CPU against acme's four, want about half", 100*share)
		}
	})
}
