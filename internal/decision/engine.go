package decision

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Options configure an Engine.
type Options struct {
	// Dir is the policy folder: *.rego modules (recursively; *_test.rego
	// files are left to `gateway policy test`), data.json / data.yaml files
	// loaded under data at their folder's path, and an optional .manifest
	// whose "revision" names the revision. Hidden files and folders are
	// ignored.
	Dir string
	// Logger receives reloads and fail-closed evaluations; nil discards.
	Logger *slog.Logger
	// Registerer receives the engine's metrics; nil registers none.
	Registerer prometheus.Registerer
	// Debounce is how long Watch waits for changes to settle; default 250ms.
	Debounce time.Duration
	// Now is the clock for LoadedAt and LastErrorAt; default time.Now.
	Now func() time.Time
	// Bundle, when set, is the policy source instead of Dir: an OPA bundle
	// file or bundle server URL (see BundleOptions).
	Bundle *BundleOptions
	// CacheSize is how many results each revision remembers per
	// entrypoint for evaluations given a key (WithCacheKey); 0 disables
	// the decision cache.
	CacheSize int
	// Tests are folders of the pack's Rego tests (policy.tests): a folder
	// whose tests fail or error, run against it as RunTests runs them, is
	// rejected like one that does not compile. Only with Dir.
	Tests []string
}

// Status describes the engine's policy for operators.
type Status struct {
	Loaded   bool      // a revision is serving
	Revision string    // its id
	LoadedAt time.Time // when it was compiled
	// LastError is why the latest load was rejected (file:line problems),
	// "" when the latest load succeeded. The previous revision keeps serving.
	LastError   string
	LastErrorAt time.Time
}

// Engine serves the current policy revision and replaces it when the policy
// folder changes. Evaluations never wait for a load: they use the revision
// that Current returned.
type Engine struct {
	dir      string
	tests    []string // the pack's test folders: a load must pass them
	log      *slog.Logger
	now      func() time.Time
	debounce time.Duration
	m        *metrics
	cacheMax int

	cur    atomic.Pointer[Revision]
	loadMu sync.Mutex // one load at a time

	bundle *BundleOptions // nil: the policy folder
	etag   string         // of the last bundle fetched over HTTP; guarded by loadMu

	mu          sync.Mutex // guards the two fields below
	lastErr     string
	lastErrorAt time.Time
}

// NewEngine returns an engine with no revision; call Load, then Watch for
// hot reload.
func NewEngine(opts Options) *Engine {
	e := &Engine{
		tests:    opts.Tests,
		dir:      opts.Dir,
		log:      opts.Logger,
		now:      opts.Now,
		debounce: opts.Debounce,
		m:        newMetrics(opts.Registerer),
		bundle:   opts.Bundle,
		cacheMax: opts.CacheSize,
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.now == nil {
		e.now = time.Now
	}
	if e.debounce <= 0 {
		e.debounce = DefaultReloadDebounce
	}
	return e
}

// Current is the revision serving now, or ErrNoPolicy before the first
// successful load. Use one revision for all decisions of one request.
func (e *Engine) Current() (*Revision, error) {
	if r := e.cur.Load(); r != nil {
		return r, nil
	}
	return nil, ErrNoPolicy
}

// Status reports the serving revision and the latest load failure.
func (e *Engine) Status() Status {
	var st Status
	if r := e.cur.Load(); r != nil {
		st.Loaded, st.Revision, st.LoadedAt = true, r.id, r.loadedAt
	}
	e.mu.Lock()
	st.LastError, st.LastErrorAt = e.lastErr, e.lastErrorAt
	e.mu.Unlock()
	return st
}

// Load reads, compiles and checks the policy folder, and swaps the result
// in. A folder that fails (a *LoadError naming file:line, or an unreadable
// folder) is rejected whole: the previous revision keeps serving, and the
// failure is logged, counted and kept for Status. Loading an unchanged
// folder keeps the serving revision.
func (e *Engine) Load(ctx context.Context) error {
	e.loadMu.Lock()
	defer e.loadMu.Unlock()

	started := time.Now()
	rev, err := e.build(ctx)
	if errors.Is(err, errNotModified) {
		return nil
	}
	if err != nil {
		e.m.reloads.WithLabelValues("error").Inc()
		e.mu.Lock()
		e.lastErr, e.lastErrorAt = err.Error(), e.now()
		e.mu.Unlock()
		keeping := "none"
		if old := e.cur.Load(); old != nil {
			keeping = old.id
		}
		e.log.Error("policy rejected; previous revision keeps serving",
			"source", e.sourceName(), "serving", keeping, "err", err)
		return err
	}

	e.m.reloads.WithLabelValues("ok").Inc()
	e.mu.Lock()
	e.lastErr, e.lastErrorAt = "", time.Time{}
	e.mu.Unlock()
	if old := e.cur.Load(); old != nil && old.digest == rev.digest {
		e.log.Debug("policy unchanged", "revision", old.id)
		return nil
	}
	e.cur.Store(rev)
	e.m.setRevision(rev.id)
	e.log.Info("policy loaded", "revision", rev.id, "modules", len(rev.modules),
		"took", time.Since(started).Round(time.Microsecond))
	return nil
}

// build compiles the folder into a revision that is not yet serving.
func (e *Engine) build(ctx context.Context) (*Revision, error) {
	read := func() (*source, []Problem, error) { return readSource(e.dir) }
	if e.bundle != nil {
		read = func() (*source, []Problem, error) { return e.readBundle(ctx) }
	}
	src, problems, err := read()
	if err != nil {
		return nil, err
	}
	if len(problems) > 0 {
		return nil, &LoadError{Problems: problems}
	}
	c, problems, err := compileSource(ctx, src)
	if err != nil {
		return nil, fmt.Errorf("compile policy: %w", err)
	}
	if len(problems) > 0 {
		return nil, &LoadError{Problems: problems}
	}
	if len(e.tests) > 0 && e.bundle == nil {
		if err := e.runTests(ctx); err != nil {
			return nil, err
		}
	}
	queries, err := c.prepare(ctx)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		return nil, &LoadError{Problems: problemsOf(err)}
	}
	rev := &Revision{
		id:       src.id(),
		digest:   src.digest,
		loadedAt: e.now(),
		modules:  src.list,
		queries:  queries,
		compiled: c,
		m:        e.m,
		log:      e.log,
	}
	if e.cacheMax > 0 {
		deterministic, perCallFree, reason := cacheability(c.compiler)
		for ep := range numEntrypoints {
			// The availability input has no per-call members; a pack
			// without a mask has no mask results.
			if deterministic && (ep == epAvailability || perCallFree) && queries[ep] != nil {
				rev.cache[ep] = newResultCache(e.cacheMax)
			}
		}
		if reason != "" {
			e.log.Info("decision cache limited by the policy", "revision", rev.id, "reason", reason,
				"availability", rev.cache[epAvailability] != nil, "authorization", rev.cache[epAuthz] != nil,
				"mask", rev.cache[epMask] != nil)
		}
	}
	return rev, nil
}

// TestsError rejects a pack whose own tests (policy.tests) fail or error:
// Report is what `gateway policy test` prints of the failures.
type TestsError struct {
	Report string
}

func (e *TestsError) Error() string {
	return "the pack's tests do not pass: " + e.Report
}

// runTests runs the pack's tests against the folder as it is now.
func (e *Engine) runTests(ctx context.Context) error {
	var report strings.Builder
	passed, err := RunTests(ctx, append([]string{e.dir}, e.tests...), &report, TestOptions{})
	if err != nil {
		return fmt.Errorf("the pack's tests: %w", err)
	}
	if !passed {
		var failed []string
		for _, line := range strings.Split(report.String(), "\n") {
			if strings.Contains(line, ": FAIL") || strings.Contains(line, ": ERROR") || strings.HasPrefix(line, "FAIL:") || strings.HasPrefix(line, "ERROR:") {
				failed = append(failed, strings.TrimSpace(line))
			}
		}
		return &TestsError{Report: strings.Join(failed, "; ")}
	}
	return nil
}
