package decision

import (
	"slices"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Key identifies a policy input for the decision cache: the SHA-256 of the
// input's RFC 8785 canonical JSON, without the members that differ on every
// call (call_id and digest). Equal keys mean equal inputs for every rule
// that does not read those members, which the revision checks before it
// uses a key at all (see cacheability).
type Key [32]byte

// EvalOption tunes one evaluation.
type EvalOption func(*evalOptions)

type evalOptions struct {
	key    Key
	hasKey bool
	build  func() (ast.Value, error)
}

// WithInputFunc supplies the input lazily: when the method's input argument
// is nil, build is called only if the policy must really be evaluated, so
// a cache hit never pays for converting the document to an OPA value. A
// build error fails the evaluation (ErrEvaluation).
func WithInputFunc(build func() (ast.Value, error)) EvalOption {
	return func(o *evalOptions) { o.build = build }
}

// WithCacheKey lets the evaluation answer from, and fill, the revision's
// decision cache under k. Without it every evaluation runs the policy.
func WithCacheKey(k Key) EvalOption {
	return func(o *evalOptions) { o.key, o.hasKey = k, true }
}

// DefaultCacheSize is how many results a revision remembers per entrypoint
// unless configured otherwise.
const DefaultCacheSize = 4096

// resultCache remembers entrypoint results of one revision by input key. A
// revision's policy and data never change, so a result can only go stale
// with the revision itself, which takes its cache with it. Only successful
// evaluations are stored; errors always re-evaluate. The bound is crude on
// purpose: a full cache is emptied and refills from the next calls.
type resultCache struct {
	mu  sync.RWMutex
	m   map[Key]cachedResult
	max int
}

// cachedResult is one stored result; v is nil for an undefined result.
type cachedResult struct{ v ast.Value }

func newResultCache(max int) *resultCache {
	if max <= 0 {
		return nil
	}
	return &resultCache{m: make(map[Key]cachedResult), max: max}
}

func (c *resultCache) get(k Key) (ast.Value, bool) {
	c.mu.RLock()
	e, ok := c.m[k]
	c.mu.RUnlock()
	return e.v, ok
}

func (c *resultCache) put(k Key, v ast.Value) {
	c.mu.Lock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[k] = cachedResult{v: v}
	c.mu.Unlock()
}

// perCallMembers are the request document members that differ on every
// call; cache keys leave them out.
var perCallMembers = []string{"call_id", "digest"}

// clockBuiltins read the evaluation's clock without being marked
// non-deterministic in OPA's builtin table; trace and print have effects a
// cached answer would skip.
var clockBuiltins = map[string]bool{
	"io.jwt.decode_verify":                                   true,
	"crypto.x509.parse_and_verify_certificates":              true,
	"crypto.x509.parse_and_verify_certificates_with_options": true,
	"trace":          true,
	"print":          true,
	"internal.print": true,
}

// nondeterministic reports whether a ref names a builtin whose answer can
// differ between two evaluations of the same input.
func nondeterministic(r ast.Ref) (string, bool) {
	if _, ok := r[0].Value.(ast.Var); !ok {
		return "", false
	}
	name := r.String()
	if b, ok := ast.BuiltinMap[name]; (ok && b.IsNondeterministic()) || clockBuiltins[name] {
		return name, true
	}
	return "", false
}

// cacheability decides, once per revision, whether results may be reused
// for equal keys. It is conservative: any non-deterministic or clock-reading
// builtin anywhere in the compiled modules — called, or named as a `with`
// replacement (`with f as uuid.rfc4122`) — disables the cache for every
// entrypoint, and a rule that reads a per-call member of the input (or the
// input as a whole, or through a computed key) disables it for the
// entrypoints whose input carries those members (authorization and mask).
func cacheability(c *ast.Compiler) (deterministic bool, perCallFree bool, reason string) {
	deterministic, perCallFree = true, true
	for _, name := range sortedModuleNames(c) {
		mod := c.Modules[name]
		// Every mention of a builtin is a ref: an expression's operator, a
		// call nested in a term, the value of a with modifier.
		ast.WalkRefs(mod, func(r ast.Ref) bool {
			if op, ok := nondeterministic(r); ok {
				if deterministic {
					reason = "uses " + op
				}
				deterministic = false
			}
			if !r[0].Equal(ast.InputRootDocument) {
				return false
			}
			if len(r) == 1 {
				perCallFree = false
				if reason == "" {
					reason = "reads the whole input"
				}
				return false
			}
			s, ok := r[1].Value.(ast.String)
			if !ok {
				perCallFree = false
				if reason == "" {
					reason = "reads the input by a computed key"
				}
				return false
			}
			for _, m := range perCallMembers {
				if string(s) == m {
					perCallFree = false
					if reason == "" {
						reason = "reads input." + m
					}
				}
			}
			return false
		})
	}
	return deterministic, perCallFree, reason
}

// sortedModuleNames lists the compiler's modules in a stable order.
func sortedModuleNames(c *ast.Compiler) []string {
	names := make([]string, 0, len(c.Modules))
	for name := range c.Modules {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
