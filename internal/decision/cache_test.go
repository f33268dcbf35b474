package decision

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func cachedEngine(t *testing.T, dir string, reg prometheus.Registerer) *Engine {
	t.Helper()
	e := NewEngine(Options{Dir: dir, Registerer: reg, CacheSize: 16})
	if err := e.Load(context.Background()); err != nil {
		t.Fatalf("Load: %v", err)
	}
	return e
}

// Each way a policy can make equal keys mean different answers turns the
// cache off where it matters, and nothing else does. Every pack here has a
// mask, so the mask column is about the policy, not about a missing rule.
func TestCacheabilityOfPolicies(t *testing.T) {
	authz := func(body string) map[string]string {
		return map[string]string{"authz.rego": "package toolgate.authz\n\n" + body}
	}
	availability := func(body string) map[string]string {
		return map[string]string{"availability.rego": "package toolgate.availability\n\n" + body}
	}
	mask := func(body string) map[string]string {
		return map[string]string{"audit.rego": "package toolgate.audit\n\n" + body}
	}
	tests := []struct {
		name                     string
		files                    map[string]string
		availability, auth, mask bool
	}{
		{"minimal pack", nil, true, true, true},
		{"shipped-style lookups", authz(`decision := {"allow": input.tool.name in {"read-file"}, "reasons": [input.resources[0].path]}` + "\n"), true, true, true},
		{"reads call_id", authz(`decision := {"allow": startswith(input.call_id, "c-")}` + "\n"), true, false, false},
		{"reads digest", authz(`decision := {"allow": input.digest != ""}` + "\n"), true, false, false},
		{"reads the whole input", authz(`decision := {"allow": count(object.keys(input)) > 0}` + "\n"), true, false, false},
		{"reads input by a computed key", authz(`k := "call_id"` + "\n\n" + `decision := {"allow": input[k] != ""}` + "\n"), true, false, false},
		{"uses the clock", authz(`decision := {"allow": time.now_ns() > 0}` + "\n"), false, false, false},
		{"uses randomness", authz(`decision := {"allow": rand.intn("x", 10) >= 0}` + "\n"), false, false, false},
		// print statements are erased by the compiler (print is not enabled), so
		// they cannot make a cached answer differ.
		{"prints", authz("decision := {\"allow\": true} if {\n\tprint(\"hi\")\n}\n"), true, true, true},
		{"verifies a JWT against the clock", authz(`decision := {"allow": io.jwt.decode_verify("a.b.c", {"secret": "s"})[0]}` + "\n"), false, false, false},
		// A builtin that is never called but replaces a function: each
		// evaluation of h gives a new UUID.
		{"replaces a function with a non-deterministic builtin", authz("f(s) := lower(s)\n\nh := x if {\n\tx := f(\"A\") with f as uuid.rfc4122\n}\n\n" + `decision := {"allow": true, "reasons": [h]}` + "\n"), false, false, false},
		{"calls the clock in a comprehension", authz(`decision := {"allow": count([x | x := time.now_ns()]) > 0}` + "\n"), false, false, false},
		{"availability uses the clock", availability("default allow := false\n\nallow if time.now_ns() > 0\n"), false, false, false},
		{"availability reads the session and claims", availability("default allow := false\n\nallow if {\n\tinput.session_id != \"\"\n\tinput.principal.claims.team == \"red\"\n}\n"), true, true, true},
		{"mask reads call_id", mask(`mask contains "/args/text" if startswith(input.call_id, "c-")` + "\n"), true, false, false},
		{"mask asks a server", mask(`mask contains "/args/text" if http.send({"method": "GET", "url": "http://127.0.0.1:1"}).status_code == 200` + "\n"), false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]string{"audit.rego": "package toolgate.audit\n\nmask contains \"/args/content\" if input.tool.name == \"write-file\"\n"}
			maps.Copy(files, tt.files)
			rev := current(t, cachedEngine(t, newPack(t, files), nil))
			if got := rev.Cached("availability"); got != tt.availability {
				t.Errorf("availability cached = %v, want %v", got, tt.availability)
			}
			if got := rev.Cached("authz"); got != tt.auth {
				t.Errorf("authorization cached = %v, want %v", got, tt.auth)
			}
			if got := rev.Cached("mask"); got != tt.mask {
				t.Errorf("mask cached = %v, want %v", got, tt.mask)
			}
		})
	}
	// Without a size the cache is off whatever the policy.
	if rev := current(t, loaded(t, newPack(t, nil), nil)); rev.Cached("availability") || rev.Cached("authz") || rev.Cached("mask") {
		t.Error("cache on with CacheSize 0")
	}
	// A pack without a mask caches no mask results.
	if current(t, cachedEngine(t, newPack(t, nil), nil)).Cached("mask") {
		t.Error("mask cached in a pack that has no mask")
	}
}

// A hit answers exactly what the evaluation answered, a reload starts from
// an empty cache, and a policy that reads call_id is evaluated per call.
func TestCachedDecisions(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewPedanticRegistry()
	dir := newPack(t, map[string]string{"data.json": `{"allowed": "read-file"}`,
		"authz.rego": "package toolgate.authz\n\ndecision := {\"allow\": input.tool.name == data.allowed, \"reasons\": [\"r\"]}\n"})
	e := cachedEngine(t, dir, reg)
	in := value(t, `{"tool": {"name": "read-file"}, "call_id": "c-1"}`)
	k := Key{1}
	for i := range 3 {
		d, err := current(t, e).Decide(ctx, in, WithCacheKey(k))
		if err != nil || !d.Allow || len(d.Reasons) != 1 {
			t.Fatalf("round %d: %+v %v", i, d, err)
		}
	}
	hits := counterValue(t, e.m.cache[epAuthz][cacheHit])
	misses := counterValue(t, e.m.cache[epAuthz][cacheMiss])
	if hits != 2 || misses != 1 {
		t.Fatalf("hits=%v misses=%v, want 2 and 1", hits, misses)
	}
	// Unkeyed evaluations never touch the cache.
	if _, err := current(t, e).Decide(ctx, in); err != nil {
		t.Fatal(err)
	}
	if counterValue(t, e.m.cache[epAuthz][cacheHit]) != 2 {
		t.Fatal("an unkeyed evaluation was answered from the cache")
	}

	// New data, new revision: the same key must be evaluated again.
	writePack(t, dir, map[string]string{"data.json": `{"allowed": "glob"}`})
	if err := e.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if d, err := current(t, e).Decide(ctx, in, WithCacheKey(k)); err != nil || d.Allow {
		t.Fatalf("after reload: %+v %v (served from the old revision's cache?)", d, err)
	}

	// A policy that reads call_id: same key, different call ids, different
	// answers.
	dir2 := newPack(t, map[string]string{"authz.rego": "package toolgate.authz\n\ndecision := {\"allow\": input.call_id == \"c-1\"}\n"})
	e2 := cachedEngine(t, dir2, nil)
	d1, err1 := current(t, e2).Decide(ctx, value(t, `{"call_id": "c-1"}`), WithCacheKey(k))
	d2, err2 := current(t, e2).Decide(ctx, value(t, `{"call_id": "c-2"}`), WithCacheKey(k))
	if err1 != nil || err2 != nil || !d1.Allow || d2.Allow {
		t.Fatalf("call_id policy: %+v %v / %+v %v", d1, err1, d2, err2)
	}
}

// Errors are never cached: a failing evaluation fails again.
func TestCacheDoesNotStoreErrors(t *testing.T) {
	ctx := context.Background()
	dir := newPack(t, map[string]string{"authz.rego": "package toolgate.authz\n\ndecision := {\"allow\": to_number(input.n) > 0}\n"})
	e := cachedEngine(t, dir, nil)
	for range 2 {
		if _, err := current(t, e).Decide(ctx, value(t, `{"n": "x"}`), WithCacheKey(Key{2})); err == nil {
			t.Fatal("a builtin error was not an error (served from the cache?)")
		}
	}
	if n := len(current(t, e).cache[epAuthz].m); n != 0 {
		t.Fatalf("cache holds %d entries after errors", n)
	}
}

func TestResultCacheIsBounded(t *testing.T) {
	c := newResultCache(2)
	for i := range 5 {
		c.put(Key{byte(i)}, nil)
		if len(c.m) > 2 {
			t.Fatalf("cache grew to %d", len(c.m))
		}
	}
	if _, ok := c.get(Key{4}); !ok {
		t.Fatal("newest entry missing")
	}
	if newResultCache(0) != nil {
		t.Fatal("size 0 must disable")
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// A lazily built input is built only when the policy really runs, and a
// build failure fails closed.
func TestLazyInputIsBuiltOnlyOnAMiss(t *testing.T) {
	ctx := context.Background()
	e := cachedEngine(t, newPack(t, nil), nil)
	builds := 0
	build := WithInputFunc(func() (ast.Value, error) {
		builds++
		return ast.InterfaceToValue(map[string]any{"tool": map[string]any{"name": "read-file"}})
	})
	for range 3 {
		d, err := current(t, e).Decide(ctx, nil, WithCacheKey(Key{7}), build)
		if err != nil || !d.Allow {
			t.Fatalf("%+v %v", d, err)
		}
	}
	if builds != 1 {
		t.Fatalf("input built %d times for one miss and two hits", builds)
	}
	_, err := current(t, e).Decide(ctx, nil, WithCacheKey(Key{8}), WithInputFunc(func() (ast.Value, error) {
		return nil, errors.New("boom")
	}))
	if !errors.Is(err, ErrEvaluation) {
		t.Fatalf("build failure: %v, want ErrEvaluation", err)
	}
	if _, err := current(t, e).Decide(ctx, nil); !errors.Is(err, ErrEvaluation) {
		t.Fatalf("no input at all: %v, want ErrEvaluation", err)
	}
}

// The mask answered from the cache is the mask a fresh evaluation gives,
// for every tool the shipped pack masks and one it does not, and a caller
// that edits its copy does not edit the cached answer.
func TestCachedMaskMatchesEvaluation(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewPedanticRegistry()
	cached := current(t, cachedEngine(t, shippedPack, reg))
	fresh := current(t, loaded(t, shippedPack, nil))
	if !cached.Cached("mask") {
		t.Fatal("the shipped pack's mask is not cached")
	}
	tools := []string{"write-file", "edit-file", "fetch", "process-input", "read-file"}
	for i, tool := range tools {
		in := value(t, requestDoc(`["developer"]`, tool, benchRead))
		want, err := fresh.Mask(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(want)
		for round := range 3 {
			got, err := cached.Mask(ctx, in, WithCacheKey(Key{byte(i)}))
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("%s round %d: mask %q, uncached %q", tool, round, got, want)
			}
			for j := range got {
				got[j] = "/edited"
			}
		}
		if tool != "read-file" && len(want) == 0 {
			t.Fatalf("%s: the shipped pack masks nothing (test inputs wrong?)", tool)
		}
	}
	hits := counterValue(t, cached.m.cache[epMask][cacheHit])
	misses := counterValue(t, cached.m.cache[epMask][cacheMiss])
	if hits != float64(2*len(tools)) || misses != float64(len(tools)) {
		t.Fatalf("mask hits=%v misses=%v, want %d and %d", hits, misses, 2*len(tools), len(tools))
	}
}

// Availability results belong to the revision: new data is evaluated anew
// under the same key.
func TestCachedAvailabilityEndsWithTheRevision(t *testing.T) {
	ctx := context.Background()
	dir := newPack(t, map[string]string{
		"data.json":         `{"offered": ["read-file"]}`,
		"availability.rego": "package toolgate.availability\n\nallow := input.tool.name in data.offered\n",
	})
	e := cachedEngine(t, dir, nil)
	in := value(t, availabilityDeveloper)
	for range 2 {
		if ok, err := current(t, e).Available(ctx, in, WithCacheKey(Key{3})); err != nil || !ok {
			t.Fatalf("before the reload: %v %v", ok, err)
		}
	}
	if counterValue(t, e.m.cache[epAvailability][cacheHit]) != 1 {
		t.Fatal("the second availability evaluation was not a hit")
	}
	writePack(t, dir, map[string]string{"data.json": `{"offered": []}`})
	if err := e.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := current(t, e).Available(ctx, in, WithCacheKey(Key{3})); err != nil || ok {
		t.Fatalf("after the reload: %v %v (served from the old revision's cache?)", ok, err)
	}
}

// A revision whose availability reads the clock evaluates every keyed
// call: nothing is stored, nothing is answered from a store.
func TestClockReadingAvailabilityIsEvaluatedEveryTime(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewPedanticRegistry()
	dir := newPack(t, map[string]string{
		"availability.rego": "package toolgate.availability\n\ndefault allow := false\n\nallow if time.now_ns() > 0\n",
	})
	e := cachedEngine(t, dir, reg)
	in := value(t, availabilityDeveloper)
	const n = 3
	for range n {
		if ok, err := current(t, e).Available(ctx, in, WithCacheKey(Key{4})); err != nil || !ok {
			t.Fatalf("%v %v", ok, err)
		}
	}
	evaluated := metricValue(t, reg, "toolgate_policy_decision_duration_seconds", map[string]string{"entrypoint": "availability"})
	hits := counterValue(t, e.m.cache[epAvailability][cacheHit])
	if evaluated != n || hits != 0 {
		t.Fatalf("evaluated %v times with %v hits, want %d and 0", evaluated, hits, n)
	}
}
