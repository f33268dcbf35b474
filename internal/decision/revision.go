package decision

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// Module is one Rego file of a revision.
type Module struct {
	Path   string // relative to the policy folder, slash-separated
	SHA256 string // hex of the file's SHA-256
}

// Revision is one compiled policy folder. It is immutable and safe for
// concurrent use; a request keeps the revision it started with even when a
// newer one is swapped in.
type Revision struct {
	id       string
	digest   string
	loadedAt time.Time
	modules  []Module
	queries  [numEntrypoints]*rego.PreparedEvalQuery
	// compiled is kept for partial evaluation (replay's Depends); the hot
	// path never touches it.
	compiled *compiled
	cache    [numEntrypoints]*resultCache // nil: not cacheable or disabled
	m        *metrics
	log      *slog.Logger
}

// ID is the manifest revision, or "sha256:" and 16 hex digits of a hash
// over the modules and data.
func (r *Revision) ID() string { return r.id }

// LoadedAt is when this revision was compiled.
func (r *Revision) LoadedAt() time.Time { return r.loadedAt }

// Modules lists the revision's Rego files, sorted by path. The slice is a
// copy.
func (r *Revision) Modules() []Module { return append([]Module(nil), r.modules...) }

// Available evaluates the availability entrypoint. Undefined means false;
// a non-boolean result is ErrMalformed and an OPA error is ErrEvaluation.
func (r *Revision) Available(ctx context.Context, input ast.Value, opts ...EvalOption) (bool, error) {
	v, err := r.eval(ctx, epAvailability, input, opts)
	if err != nil || v == nil {
		return false, err
	}
	b, ok := v.(ast.Boolean)
	if !ok {
		return false, r.malformed(epAvailability, fmt.Errorf("result is %s, want boolean", ast.ValueName(v)))
	}
	return bool(b), nil
}

// Decide evaluates the authorization entrypoint. An undefined decision, or
// one that is not an object with a boolean "allow" and well-typed optional
// members, is ErrMalformed; an OPA error is ErrEvaluation. Both fail closed.
func (r *Revision) Decide(ctx context.Context, input ast.Value, opts ...EvalOption) (Decision, error) {
	v, err := r.eval(ctx, epAuthz, input, opts)
	if err != nil {
		return Decision{}, err
	}
	if v == nil {
		return Decision{}, r.malformed(epAuthz, errors.New("decision is undefined"))
	}
	d, err := parseDecision(v)
	if err != nil {
		return Decision{}, r.malformed(epAuthz, err)
	}
	return d, nil
}

// Mask evaluates the optional mask entrypoint: JSON pointers into the
// request document to mask in the audit log. Undefined (or a policy with no
// mask) is nil; anything but a set or array of strings is ErrMalformed.
func (r *Revision) Mask(ctx context.Context, input ast.Value, opts ...EvalOption) ([]string, error) {
	if r.queries[epMask] == nil {
		return nil, nil
	}
	v, err := r.eval(ctx, epMask, input, opts)
	if err != nil || v == nil {
		return nil, err
	}
	ptrs, err := stringList(v, "mask")
	if err != nil {
		return nil, r.malformed(epMask, err)
	}
	return ptrs, nil
}

// Cached reports whether this revision reuses results of an entrypoint
// ("availability", "authz" or "mask", as in the metrics) for equal keys. A
// revision without a mask rule has no mask results to reuse.
func (r *Revision) Cached(ep string) bool {
	for e := range numEntrypoints {
		if e.String() == ep {
			return r.cache[e] != nil
		}
	}
	return false
}

// eval runs one entrypoint, or answers from the revision's cache when the
// caller gave a key and the revision's policy allows reuse. The result is
// nil when it is undefined.
func (r *Revision) eval(ctx context.Context, ep entrypoint, input ast.Value, opts []EvalOption) (ast.Value, error) {
	if err := ctx.Err(); err != nil {
		r.m.errors[ep][kindCanceled].Inc()
		return nil, fmt.Errorf("%w: %s: %w", ErrEvaluation, ep, err)
	}
	var o evalOptions
	for _, opt := range opts {
		opt(&o)
	}
	c := r.cache[ep]
	if c != nil && o.hasKey {
		if v, ok := c.get(o.key); ok {
			r.m.cache[ep][cacheHit].Inc()
			return v, nil
		}
		r.m.cache[ep][cacheMiss].Inc()
	}
	if input == nil && o.build != nil {
		var err error
		if input, err = o.build(); err != nil {
			r.m.errors[ep][kindEvaluation].Inc()
			return nil, fmt.Errorf("%w: %s: building the input: %w", ErrEvaluation, ep, err)
		}
	}
	if input == nil {
		r.m.errors[ep][kindEvaluation].Inc()
		return nil, fmt.Errorf("%w: %s: no input", ErrEvaluation, ep)
	}
	v, err := r.evalQuery(ctx, ep, input)
	if err == nil && c != nil && o.hasKey {
		c.put(o.key, v)
	}
	return v, err
}

// evalQuery runs one entrypoint's prepared query.
func (r *Revision) evalQuery(ctx context.Context, ep entrypoint, input ast.Value) (ast.Value, error) {
	// context.AfterFunc instead of rego's own goroutine per evaluation.
	cancel := topdown.NewCancel()
	stop := context.AfterFunc(ctx, cancel.Cancel)
	start := time.Now()
	rs, err := r.queries[ep].Eval(ctx, rego.EvalParsedInput(input), rego.EvalExternalCancel(cancel))
	r.m.latency[ep].Observe(time.Since(start).Seconds())
	stop()
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			r.m.errors[ep][kindCanceled].Inc()
			return nil, fmt.Errorf("%w: %s: %w", ErrEvaluation, ep, ctxErr)
		}
		r.m.errors[ep][kindEvaluation].Inc()
		r.log.Error("policy evaluation failed; failing closed",
			"entrypoint", ep.String(), "revision", r.id, "err", err)
		return nil, fmt.Errorf("%w: %s: %w", ErrEvaluation, ep, err)
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return nil, nil
	}
	v, ok := rs[0].Expressions[0].Value.(ast.Value)
	if !ok {
		// astResult makes every result an ast.Value; this is unreachable
		// unless rego changes underneath.
		return nil, r.malformed(ep, fmt.Errorf("result of type %T", rs[0].Expressions[0].Value))
	}
	return v, nil
}

// malformed counts and logs a result that breaks the contract: the policy
// is broken and every affected call fails closed.
func (r *Revision) malformed(ep entrypoint, cause error) error {
	r.m.errors[ep][kindMalformed].Inc()
	r.log.Error("policy returned a malformed result; failing closed",
		"entrypoint", ep.String(), "revision", r.id, "problem", cause.Error())
	return fmt.Errorf("%w: %s: %w", ErrMalformed, ep, cause)
}
