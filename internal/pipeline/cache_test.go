package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/decision"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/tools"
)

// withCache gives the fixture's pipeline an engine with the decision cache
// on, loaded from the same policy folder and counting into a fresh
// registry.
func (f *fixture) withCache(t *testing.T) (*decision.Engine, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	eng := decision.NewEngine(decision.Options{Dir: f.policies, Registerer: reg, CacheSize: decision.DefaultCacheSize})
	if err := eng.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.pl.o.Engine, f.eng = Engine(eng), eng
	return eng, reg
}

// cacheCount reads toolgate_policy_decision_cache_total for an entrypoint
// and result ("hit" or "miss").
func cacheCount(t *testing.T, reg *prometheus.Registry, entrypoint, result string) int {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range families {
		if fam.GetName() != "toolgate_policy_decision_cache_total" {
			continue
		}
		for _, m := range fam.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["entrypoint"] == entrypoint && labels["result"] == result {
				return int(m.GetCounter().GetValue())
			}
		}
	}
	t.Fatalf("no decision cache counter for %s/%s", entrypoint, result)
	return 0
}

// narrowAvailability offers one tool to one caller, judged on every member
// of the availability input.
const narrowAvailability = `package toolgate.availability

default allow := false

allow if {
	input.tenant == "acme"
	input.principal.id == "alice"
	"developer" in input.principal.roles
	"g1" in input.principal.groups
	input.principal.claims.team == "red"
	input.client.id == "platform-a"
	input.session_id == "s-1"
	input.tool.name == "probe"
}
`

// A cached availability answer is only ever given to the caller, tool and
// session it was computed for: each member of the availability input that
// differs is a new evaluation, and here a refusal.
func TestCachedAvailabilityIsPerCallerAndTool(t *testing.T) {
	other := newProbe()
	other.spec.Name = "probe-2"
	f := newFixture(t, map[string]string{"a.rego": narrowAvailability, "b.rego": authzAllow}, newProbe(), other)
	f.pl.o.Envs["globex"] = &tools.Env{Tenant: "globex", Workspace: f.pl.o.Envs["acme"].Workspace}
	_, reg := f.withCache(t)
	ctx := context.Background()

	base := identity.Identity{Tenant: "acme", Principal: "alice", Roles: []string{"developer"}, Groups: []string{"g1"},
		Claims: map[string]any{"team": "red"}, Client: "platform-a"}
	decide := func(id identity.Identity, tool, session string) string {
		t.Helper()
		resp, err := f.pl.Decide(ctx, Request{Identity: &id, Tool: tool, SessionID: session, Arguments: []byte(`{"text":"x"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return string(resp.Outcome)
	}
	for round := range 2 {
		if got := decide(base, "probe", "s-1"); got != string(apiv1.OutcomeAllow) {
			t.Fatalf("round %d: the caller the policy offers the tool to: %s", round, got)
		}
	}
	if hits := cacheCount(t, reg, "availability", "hit"); hits != 1 {
		t.Fatalf("availability hits = %d after two equal calls, want 1", hits)
	}

	with := func(edit func(*identity.Identity)) identity.Identity {
		id := base
		id.Roles = append([]string(nil), base.Roles...)
		id.Groups = append([]string(nil), base.Groups...)
		id.Claims = map[string]any{"team": "red"}
		edit(&id)
		return id
	}
	variations := []struct {
		name    string
		id      identity.Identity
		tool    string
		session string
	}{
		{"another tenant", with(func(id *identity.Identity) { id.Tenant = "globex" }), "probe", "s-1"},
		{"another principal", with(func(id *identity.Identity) { id.Principal = "bob" }), "probe", "s-1"},
		{"another role", with(func(id *identity.Identity) { id.Roles = []string{"viewer"} }), "probe", "s-1"},
		{"another group", with(func(id *identity.Identity) { id.Groups = []string{"g2"} }), "probe", "s-1"},
		{"another claim", with(func(id *identity.Identity) { id.Claims["team"] = "blue" }), "probe", "s-1"},
		{"another client", with(func(id *identity.Identity) { id.Client = "platform-b" }), "probe", "s-1"},
		{"another session", base, "probe", "s-2"},
		{"another tool", base, "probe-2", "s-1"},
	}
	for _, v := range variations {
		if got := decide(v.id, v.tool, v.session); got != string(apiv1.OutcomeUnavailable) {
			t.Errorf("%s: %s, want unavailable (answered from the first caller's cache entry?)", v.name, got)
		}
	}
	if hits := cacheCount(t, reg, "availability", "hit"); hits != 1 {
		t.Fatalf("availability hits = %d, want still 1: a different caller or tool was answered from the cache", hits)
	}
	if misses := cacheCount(t, reg, "availability", "miss"); misses != 1+len(variations) {
		t.Fatalf("availability misses = %d, want %d", misses, 1+len(variations))
	}
}

// A chooser's values are each judged on their own: the answer for the tool
// without a value is not the answer for a value.
func TestCachedAvailabilityKeepsChoicesApart(t *testing.T) {
	f, _, _ := skillFixture(t)
	_, reg := f.withCache(t)
	viewer := &identity.Identity{Tenant: "acme", Principal: "p", Roles: []string{"viewer"}}
	for round := range 2 {
		specs, err := f.pl.Tools(context.Background(), viewer, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(specs) != 1 || !strings.Contains(specs[0].InputSchema, `"enum":["review"]`) {
			t.Fatalf("round %d: %v, want only the review skill", round, specs)
		}
	}
	if cacheCount(t, reg, "availability", "hit") == 0 {
		t.Fatal("the second listing was not answered from the cache")
	}
}

// A policy change is never answered from the previous revision's cache.
func TestReloadEndsCachedAvailability(t *testing.T) {
	f := newFixture(t, map[string]string{"a.rego": allowAll, "b.rego": authzAllow}, newProbe())
	eng, reg := f.withCache(t)
	ctx := context.Background()
	req := Request{Identity: alice, Tool: "probe", Arguments: []byte(`{"text":"x"}`)}
	for range 2 {
		if resp, err := f.pl.Decide(ctx, req); err != nil || resp.Outcome != apiv1.OutcomeAllow {
			t.Fatalf("%+v %v", resp, err)
		}
	}
	if cacheCount(t, reg, "availability", "hit") != 1 {
		t.Fatal("the second call's availability was not a hit")
	}
	closed := strings.Replace(allowAll, `input.tenant == "acme"`, `input.tenant == "nobody"`, 1)
	if err := os.WriteFile(filepath.Join(f.policies, "a.rego"), []byte(closed), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := eng.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if resp, err := f.pl.Decide(ctx, req); err != nil || resp.Outcome != apiv1.OutcomeUnavailable {
		t.Fatalf("after the reload: %+v %v, want unavailable", resp, err)
	}
}

// An availability policy that reads the clock is evaluated for every call.
func TestClockReadingAvailabilityIsNotCached(t *testing.T) {
	clock := "package toolgate.availability\n\ndefault allow := false\n\nallow if time.now_ns() > 0\n"
	f := newFixture(t, map[string]string{"a.rego": clock, "b.rego": authzAllow}, newProbe())
	_, reg := f.withCache(t)
	for range 3 {
		resp, err := f.pl.Decide(context.Background(), Request{Identity: alice, Tool: "probe", Arguments: []byte(`{"text":"x"}`)})
		if err != nil || resp.Outcome != apiv1.OutcomeAllow {
			t.Fatalf("%+v %v", resp, err)
		}
	}
	for _, ep := range []string{"availability", "authz", "mask"} {
		if n := cacheCount(t, reg, ep, "hit") + cacheCount(t, reg, ep, "miss"); n != 0 {
			t.Errorf("%s: %d cache lookups in a revision that reads the clock", ep, n)
		}
	}
}

// A mask answered from the cache masks the audited document exactly as the
// evaluation did.
func TestCachedMaskMasksTheAuditedDocument(t *testing.T) {
	mask := "package toolgate.audit\n\nmask contains \"/args/text\" if input.tool.name == \"probe\"\n"
	f := newFixture(t, map[string]string{"a.rego": allowAll, "b.rego": authzAllow, "c.rego": mask}, newProbe())
	_, reg := f.withCache(t)
	for _, id := range []string{"m1", "m2"} {
		resp, err := f.pl.Decide(context.Background(), Request{Identity: alice, Tool: "probe", Arguments: []byte(`{"text":"secret"}`), CallID: id})
		if err != nil || resp.Outcome != apiv1.OutcomeAllow {
			t.Fatalf("%s: %+v %v", id, resp, err)
		}
		evs := f.events(t, id)
		if len(evs) != 1 || evs[0].Input["args"].(map[string]any)["text"] != audit.MaskedValue {
			t.Fatalf("%s: audited %+v, want args.text masked", id, evs)
		}
	}
	if hits := cacheCount(t, reg, "mask", "hit"); hits != 1 {
		t.Fatalf("mask hits = %d, want 1 (the second call)", hits)
	}
}
