package decision

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestShippedPackLoadsAndDecides(t *testing.T) {
	e := loaded(t, shippedPack, nil)
	rev := current(t, e)
	ctx := context.Background()

	if !strings.HasPrefix(rev.ID(), "sha256:") || len(rev.ID()) != len("sha256:")+16 {
		t.Errorf("ID() = %q, want sha256: and 16 hex digits", rev.ID())
	}
	var paths []string
	for _, m := range rev.Modules() {
		paths = append(paths, m.Path)
		if len(m.SHA256) != 64 {
			t.Errorf("module %s sha256 = %q", m.Path, m.SHA256)
		}
	}
	if want := []string{"audit.rego", "authz.rego", "availability.rego", "lib.rego"}; !reflect.DeepEqual(paths, want) {
		t.Errorf("module paths = %v, want %v", paths, want)
	}

	ok, err := rev.Available(ctx, value(t, availabilityDeveloper))
	if err != nil || !ok {
		t.Errorf("Available(developer, read-file) = %v, %v; want true", ok, err)
	}

	d, err := rev.Decide(ctx, value(t, requestDoc(`["viewer"]`, "grep", `[{"type":"file","path":"docs","access":"read","recursive":true}]`)))
	if err != nil {
		t.Fatal(err)
	}
	want := Decision{
		Allow:   true,
		Reasons: []string{"allowed: viewer may read docs/**", "allowed: viewer may use grep"},
		Obligations: Obligations{
			TimeoutMS:      30000,
			MaxOutputBytes: 32768,
			ExcludePaths:   []string{"secrets", "secrets/**", "**/.env", ".env"},
		},
	}
	d.Obligations.Raw, d.Raw = nil, nil
	if !reflect.DeepEqual(d, want) {
		t.Errorf("Decide = %+v\nwant     %+v", d, want)
	}

	d, err = rev.Decide(ctx, value(t, requestDoc(`["developer"]`, "read-file", `[{"type":"file","path":"secrets/db.env","access":"read"}]`)))
	if err != nil {
		t.Fatal(err)
	}
	if d.Allow || d.Message != "access to secrets/db.env is not allowed: the path is protected" {
		t.Errorf("protected read: %+v", d)
	}

	mask, err := rev.Mask(ctx, value(t, requestDoc(`["developer"]`, "edit-file", `[]`)))
	if err != nil || !reflect.DeepEqual(mask, []string{"/args/new_string", "/args/old_string"}) {
		t.Errorf("Mask(edit-file) = %v, %v", mask, err)
	}
}

func TestNoPolicyBeforeFirstLoad(t *testing.T) {
	e := NewEngine(Options{Dir: t.TempDir()})
	if _, err := e.Current(); !errors.Is(err, ErrNoPolicy) {
		t.Fatalf("Current before Load: %v, want ErrNoPolicy", err)
	}
	if err := e.Load(context.Background()); err == nil {
		t.Fatal("Load of an empty folder succeeded; it has no entrypoints")
	}
	if _, err := e.Current(); !errors.Is(err, ErrNoPolicy) {
		t.Fatalf("Current after a failed first load: %v, want ErrNoPolicy", err)
	}
	if st := e.Status(); st.Loaded || st.LastError == "" {
		t.Errorf("Status = %+v, want not loaded with an error", st)
	}
}

func TestMissingFolderIsRejectedWithoutHostPath(t *testing.T) {
	dir := t.TempDir() + "/nowhere"
	e := NewEngine(Options{Dir: dir})
	err := e.Load(context.Background())
	if err == nil {
		t.Fatal("Load of a missing folder succeeded")
	}
	if st := e.Status(); strings.Contains(st.LastError, dir) {
		t.Errorf("LastError %q names the host path", st.LastError)
	}
}

func TestBrokenPackIsRejectedAndOldRevisionKeepsServing(t *testing.T) {
	reg := prometheus.NewRegistry()
	clock := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	dir := newPack(t, nil)
	e := NewEngine(Options{Dir: dir, Registerer: reg, Now: func() time.Time { return clock }})
	ctx := context.Background()
	if err := e.Load(ctx); err != nil {
		t.Fatal(err)
	}
	good := current(t, e)

	writePack(t, dir, map[string]string{"authz.rego": "package toolgate.authz\n\ndecision := {\"allow\": x}\n"})
	clock = clock.Add(time.Minute)
	err := e.Load(ctx)
	var le *LoadError
	if !errors.As(err, &le) {
		t.Fatalf("Load of a broken pack: %v, want *LoadError", err)
	}
	if len(le.Problems) == 0 || le.Problems[0].File != "authz.rego" || le.Problems[0].Line != 3 {
		t.Errorf("problems = %+v, want one at authz.rego:3", le.Problems)
	}
	if got := current(t, e); got != good {
		t.Errorf("Current changed to %s after a rejected load; want %s", got.ID(), good.ID())
	}
	st := e.Status()
	if !st.Loaded || st.Revision != good.ID() || !strings.Contains(st.LastError, "authz.rego:3:") || !st.LastErrorAt.Equal(clock) {
		t.Errorf("Status = %+v, want serving %s with an authz.rego:3 error at %v", st, good.ID(), clock)
	}
	if ok, err := good.Available(ctx, value(t, availabilityDeveloper)); err != nil || !ok {
		t.Errorf("old revision stopped answering: %v, %v", ok, err)
	}

	// Fixing the pack swaps in a new revision and clears the error.
	writePack(t, dir, map[string]string{"authz.rego": minimalAuthz + "\n# fixed\n"})
	if err := e.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if st := e.Status(); st.LastError != "" || st.Revision == good.ID() {
		t.Errorf("Status after fix = %+v", st)
	}
	if got := metricValue(t, reg, "toolgate_policy_reloads_total", map[string]string{"result": "ok"}); got != 2 {
		t.Errorf("reloads ok = %v, want 2", got)
	}
	if got := metricValue(t, reg, "toolgate_policy_reloads_total", map[string]string{"result": "error"}); got != 1 {
		t.Errorf("reloads error = %v, want 1", got)
	}
	if got := metricValue(t, reg, "toolgate_policy_revision_info", map[string]string{"revision": current(t, e).ID()}); got != 1 {
		t.Errorf("revision_info for the serving revision = %v, want 1", got)
	}
	if got := metricValue(t, reg, "toolgate_policy_revision_info", map[string]string{"revision": good.ID()}); got != -1 {
		t.Errorf("revision_info still reports the replaced revision (%v)", got)
	}
}

func TestPacksThatBreakTheContractAreRejected(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string // in the error
	}{
		{
			name:  "no availability rule",
			files: map[string]string{"availability.rego": ""},
			want:  "data.toolgate.availability.allow is missing",
		},
		{
			name:  "no authz decision",
			files: map[string]string{"authz.rego": "package toolgate.authz\n\nallow := true\n"},
			want:  "data.toolgate.authz.decision is missing",
		},
		{
			name:  "availability is a function",
			files: map[string]string{"availability.rego": "package toolgate.availability\n\nallow(x) if x\n"},
			want:  "must be a rule, not a function",
		},
		{
			name:  "availability is a string",
			files: map[string]string{"availability.rego": "package toolgate.availability\n\nallow := \"yes\"\n"},
			want:  "availability.rego:3: data.toolgate.availability.allow must be a boolean",
		},
		{
			name:  "availability is a set",
			files: map[string]string{"availability.rego": "package toolgate.availability\n\nallow contains input.tool.name\n"},
			want:  "must be a boolean",
		},
		{
			name:  "decision is a boolean",
			files: map[string]string{"authz.rego": "package toolgate.authz\n\ndecision := true\n"},
			want:  "must be an object",
		},
		{
			name:  "decision allow is a string",
			files: map[string]string{"authz.rego": "package toolgate.authz\n\ndecision := {\"allow\": \"yes\"}\n"},
			want:  `"allow" must be a boolean`,
		},
		{
			name:  "strict mode: unused local variable",
			files: map[string]string{"authz.rego": "package toolgate.authz\n\ndecision := {\"allow\": true} if {\n\tx := 1\n}\n"},
			want:  "authz.rego:4: rego_compile_error: assigned var x unused",
		},
		{
			name:  "parse error names file and line",
			files: map[string]string{"sub/extra.rego": "package toolgate.extra\n\np if {\n"},
			want:  "sub/extra.rego:",
		},
		{
			name:  "bad data file",
			files: map[string]string{"data.json": "{not json"},
			want:  "data.json",
		},
		{
			name:  "rule and data at the same path",
			files: map[string]string{"data.json": `{"toolgate":{"authz":{"decision":{"allow":true}}}}`},
			want:  "conflict",
		},
		{
			name:  "bad manifest",
			files: map[string]string{".manifest": "{"},
			want:  ".manifest: manifest is not valid JSON",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := NewEngine(Options{Dir: newPack(t, tt.files)})
			err := e.Load(context.Background())
			if err == nil {
				t.Fatal("Load succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if _, err := e.Current(); !errors.Is(err, ErrNoPolicy) {
				t.Errorf("a rejected pack serves: %v", err)
			}
		})
	}
}

func TestFolderLayout(t *testing.T) {
	dir := newPack(t, map[string]string{
		// Hidden files and folders, and test modules, are not served.
		".#authz.rego":          "broken {",
		".git/objects/x.rego":   "broken {",
		"..data/authz.rego":     "broken {",
		"authz_test.rego":       "broken {",
		"README.md":             "# not policy",
		"schema.json":           "not data",
		"tenants/data.yaml":     "acme:\n  name: Acme\n",
		"tenants/lookup.rego":   "package toolgate.lookup\n\nname := data.tenants.acme.name\n",
		"nested/deep/more.rego": "package toolgate.more\n\nx := 1\n",
	})
	e := loaded(t, dir, nil)
	var paths []string
	for _, m := range current(t, e).Modules() {
		paths = append(paths, m.Path)
	}
	want := []string{"authz.rego", "availability.rego", "nested/deep/more.rego", "tenants/lookup.rego"}
	if !reflect.DeepEqual(paths, want) {
		t.Errorf("modules = %v, want %v", paths, want)
	}
}

func TestRevisionID(t *testing.T) {
	dir := newPack(t, map[string]string{"data.json": `{"x": 1}`})
	ctx := context.Background()
	e := loaded(t, dir, nil)
	first := current(t, e)

	// Loading the same content keeps the serving revision.
	if err := e.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if current(t, e) != first {
		t.Error("reloading unchanged content swapped the revision")
	}

	// Data is part of the revision.
	writePack(t, dir, map[string]string{"data.json": `{"x": 2}`})
	if err := e.Load(ctx); err != nil {
		t.Fatal(err)
	}
	second := current(t, e)
	if second.ID() == first.ID() {
		t.Errorf("changing data kept revision %s", first.ID())
	}

	// A manifest names the revision; content changes still swap.
	writePack(t, dir, map[string]string{".manifest": `{"revision": "v42"}`})
	if err := e.Load(ctx); err != nil {
		t.Fatal(err)
	}
	third := current(t, e)
	if third.ID() != "v42" {
		t.Errorf("ID() = %q, want the manifest revision v42", third.ID())
	}
	writePack(t, dir, map[string]string{"data.json": `{"x": 3}`})
	if err := e.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if current(t, e) == third {
		t.Error("a content change under the same manifest revision was not swapped in")
	}
}

func TestStatusAndLoadedAtUseTheClock(t *testing.T) {
	at := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	e := NewEngine(Options{Dir: newPack(t, nil), Now: func() time.Time { return at }})
	if err := e.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := e.Status()
	if !st.Loaded || !st.LoadedAt.Equal(at) || st.Revision != current(t, e).ID() || st.LastError != "" {
		t.Errorf("Status = %+v", st)
	}
	if !current(t, e).LoadedAt().Equal(at) {
		t.Errorf("LoadedAt = %v, want %v", current(t, e).LoadedAt(), at)
	}
}

func TestTwoEnginesShareOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	loaded(t, newPack(t, nil), reg)
	loaded(t, newPack(t, nil), reg)
	if got := metricValue(t, reg, "toolgate_policy_reloads_total", map[string]string{"result": "ok"}); got != 2 {
		t.Errorf("reloads ok = %v, want 2 (shared counter)", got)
	}
}
