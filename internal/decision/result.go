package decision

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/toolgate/toolgate/internal/ratelimit"
)

// Member names of the authorization decision.
var (
	keyAllow            = ast.StringTerm("allow")
	keyApprovalRequired = ast.StringTerm("approval_required")
	keyReasons          = ast.StringTerm("reasons")
	keyMessage          = ast.StringTerm("message")
	keyConceal          = ast.StringTerm("conceal")
	keyObligations      = ast.StringTerm("obligations")
	keyTimeoutMS        = ast.StringTerm("timeout_ms")
	keyMaxOutputBytes   = ast.StringTerm("max_output_bytes")
	keyExcludePaths     = ast.StringTerm("exclude_paths")
	keyApprovalTTLMS    = ast.StringTerm("approval_ttl_ms")
	keyWritePaths       = ast.StringTerm("write_paths")
	keyExecPaths        = ast.StringTerm("exec_paths")
	keyMemoryBytes      = ast.StringTerm("memory_bytes")
	keyMaxProcesses     = ast.StringTerm("max_processes")
	keyNetwork          = ast.StringTerm("network")
	keyRateLimit        = ast.StringTerm("rate_limit")
)

// parseDecision reads an authorization decision. Every member it knows must
// have the right type: a policy that means to say something and says it
// wrong is broken, and broken fails closed.
func parseDecision(v ast.Value) (Decision, error) {
	obj, ok := v.(ast.Object)
	if !ok {
		return Decision{}, fmt.Errorf("decision is %s, want object", ast.ValueName(v))
	}
	var d Decision
	allow := obj.Get(keyAllow)
	if allow == nil {
		return Decision{}, errors.New(`decision has no "allow"`)
	}
	b, ok := allow.Value.(ast.Boolean)
	if !ok {
		return Decision{}, fmt.Errorf(`decision "allow" is %s, want boolean`, ast.ValueName(allow.Value))
	}
	d.Allow = bool(b)

	if t := obj.Get(keyApprovalRequired); t != nil {
		b, ok := t.Value.(ast.Boolean)
		if !ok {
			return Decision{}, fmt.Errorf(`decision "approval_required" is %s, want boolean`, ast.ValueName(t.Value))
		}
		d.ApprovalRequired = bool(b)
	}
	if t := obj.Get(keyReasons); t != nil {
		reasons, err := stringList(t.Value, `decision "reasons"`)
		if err != nil {
			return Decision{}, err
		}
		d.Reasons = reasons
	}
	if t := obj.Get(keyMessage); t != nil {
		s, ok := t.Value.(ast.String)
		if !ok {
			return Decision{}, fmt.Errorf(`decision "message" is %s, want string`, ast.ValueName(t.Value))
		}
		d.Message = string(s)
	}
	if t := obj.Get(keyConceal); t != nil {
		b, ok := t.Value.(ast.Boolean)
		if !ok {
			return Decision{}, fmt.Errorf(`decision "conceal" is %s, want boolean`, ast.ValueName(t.Value))
		}
		d.Conceal = bool(b)
	}
	raw, err := JSON(obj)
	if err != nil {
		return Decision{}, fmt.Errorf("decision: %w", err)
	}
	d.Raw, _ = raw.(map[string]any)
	if t := obj.Get(keyObligations); t != nil {
		o, err := parseObligations(t.Value)
		if err != nil {
			return Decision{}, err
		}
		// The obligations as policy returned them: the decision's own
		// member, shared (neither is ever modified).
		o.Raw, _ = d.Raw["obligations"].(map[string]any)
		d.Obligations = o
	}
	return d, nil
}

// JSON converts a policy result to the plain JSON values Toolgate records
// and answers with: objects as map[string]any, arrays (and sets, in OPA's
// order) as []any, and numbers as numbers — int64 for whole numbers that
// fit (30000 and 30000.0 alike), float64 otherwise — never the strings
// that ast.JSON's json.Number would marshal to.
func JSON(v ast.Value) (any, error) {
	raw, err := ast.JSON(v)
	if err != nil {
		return nil, err
	}
	return plainNumbers(raw), nil
}

func parseObligations(v ast.Value) (Obligations, error) {
	obj, ok := v.(ast.Object)
	if !ok {
		return Obligations{}, fmt.Errorf(`decision "obligations" is %s, want object`, ast.ValueName(v))
	}
	var o Obligations
	var err error
	if t := obj.Get(keyTimeoutMS); t != nil {
		if o.TimeoutMS, err = positiveInt(t.Value, "timeout_ms"); err != nil {
			return Obligations{}, err
		}
	}
	if t := obj.Get(keyMaxOutputBytes); t != nil {
		if o.MaxOutputBytes, err = positiveInt(t.Value, "max_output_bytes"); err != nil {
			return Obligations{}, err
		}
	}
	if t := obj.Get(keyApprovalTTLMS); t != nil {
		if o.ApprovalTTLMS, err = positiveInt(t.Value, "approval_ttl_ms"); err != nil {
			return Obligations{}, err
		}
	}
	if t := obj.Get(keyExcludePaths); t != nil {
		if o.ExcludePaths, err = stringList(t.Value, `obligation "exclude_paths"`); err != nil {
			return Obligations{}, err
		}
	}
	if t := obj.Get(keyWritePaths); t != nil {
		if o.WritePaths, err = stringList(t.Value, `obligation "write_paths"`); err != nil {
			return Obligations{}, err
		}
		if o.WritePaths == nil {
			o.WritePaths = []string{} // present and empty: nothing is writable
		}
	}
	if t := obj.Get(keyExecPaths); t != nil {
		if o.ExecPaths, err = stringList(t.Value, `obligation "exec_paths"`); err != nil {
			return Obligations{}, err
		}
	}
	if t := obj.Get(keyMemoryBytes); t != nil {
		if o.MemoryBytes, err = positiveInt(t.Value, "memory_bytes"); err != nil {
			return Obligations{}, err
		}
	}
	if t := obj.Get(keyMaxProcesses); t != nil {
		if o.MaxProcesses, err = positiveInt(t.Value, "max_processes"); err != nil {
			return Obligations{}, err
		}
	}
	if t := obj.Get(keyNetwork); t != nil {
		b, ok := t.Value.(ast.Boolean)
		if !ok {
			return Obligations{}, fmt.Errorf(`obligation "network" is %s, want boolean`, ast.ValueName(t.Value))
		}
		o.Network = bool(b)
	}
	if t := obj.Get(keyRateLimit); t != nil {
		if o.RateLimits, err = rateLimits(t.Value); err != nil {
			return Obligations{}, err
		}
	}
	return o, nil
}

// rateLimits reads the rate_limit obligation: one object {"key", "rate",
// "burst"} or an array or set of them, each member present, of its type
// and in range (ratelimit.Limit.Validate), and no other member: a typo
// such as "brust" must not silently leave a call unlimited. The result is
// normalized (ratelimit.Normalize).
func rateLimits(v ast.Value) ([]ratelimit.Limit, error) {
	var elems []*ast.Term
	switch x := v.(type) {
	case ast.Object:
		elems = []*ast.Term{ast.NewTerm(x)}
	case *ast.Array:
		for i := range x.Len() {
			elems = append(elems, x.Elem(i))
		}
	case ast.Set:
		arr := x.Sorted()
		for i := range arr.Len() {
			elems = append(elems, arr.Elem(i))
		}
	default:
		return nil, fmt.Errorf(`obligation "rate_limit" is %s, want an object {"key","rate","burst"} or a list of them`, ast.ValueName(v))
	}
	if len(elems) == 0 {
		return nil, errors.New(`obligation "rate_limit" is an empty list`)
	}
	out := make([]ratelimit.Limit, 0, len(elems))
	for i, e := range elems {
		l, err := rateLimit(e.Value)
		if err != nil {
			return nil, fmt.Errorf(`obligation "rate_limit" [%d]: %w`, i, err)
		}
		out = append(out, l)
	}
	return ratelimit.Normalize(out), nil
}

func rateLimit(v ast.Value) (ratelimit.Limit, error) {
	obj, ok := v.(ast.Object)
	if !ok {
		return ratelimit.Limit{}, fmt.Errorf("is %s, want an object", ast.ValueName(v))
	}
	var l ratelimit.Limit
	var err error
	seen := 0
	err = obj.Iter(func(k, val *ast.Term) error {
		name, ok := k.Value.(ast.String)
		if !ok {
			return fmt.Errorf("has a member named by %s", ast.ValueName(k.Value))
		}
		seen++
		switch string(name) {
		case "key":
			s, ok := val.Value.(ast.String)
			if !ok {
				return fmt.Errorf(`"key" is %s, want string`, ast.ValueName(val.Value))
			}
			l.Key = string(s)
		case "rate", "burst":
			n, ok := val.Value.(ast.Number)
			if !ok {
				return fmt.Errorf("%q is %s, want number", string(name), ast.ValueName(val.Value))
			}
			f, ok := n.Float64()
			if !ok {
				return fmt.Errorf("%q is not a finite number", string(name))
			}
			if name == "rate" {
				l.Rate = f
			} else {
				l.Burst = f
			}
		default:
			return fmt.Errorf("has an unknown member %q (want key, rate, burst)", truncate(string(name), 64))
		}
		return nil
	})
	if err != nil {
		return ratelimit.Limit{}, err
	}
	if seen != 3 {
		return ratelimit.Limit{}, errors.New(`needs exactly the members "key", "rate" and "burst"`)
	}
	if err := l.Validate(); err != nil {
		return ratelimit.Limit{}, err
	}
	return l, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// plainNumbers replaces the json.Number values ast.JSON produces with
// int64 (whole numbers that fit, 5000.0 included) or float64, so that the
// audit log and the API show "timeout_ms": 30000 rather than the string
// "30000".
func plainNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		if f, err := x.Float64(); err == nil {
			if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
				return int64(f) // 5000.0 is 5000
			}
			return f
		}
		return x.String()
	case map[string]any:
		for k, e := range x {
			x[k] = plainNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = plainNumbers(e)
		}
	}
	return v
}

// positiveInt reads a whole number > 0 that fits an int64 (30000 and
// 30000.0 both do).
func positiveInt(v ast.Value, name string) (int64, error) {
	n, ok := v.(ast.Number)
	if !ok {
		return 0, fmt.Errorf("obligation %q is %s, want a positive number", name, ast.ValueName(v))
	}
	if i, ok := n.Int64(); ok {
		if i <= 0 {
			return 0, fmt.Errorf("obligation %q is %d, want a positive number", name, i)
		}
		return i, nil
	}
	f, ok := n.Float64()
	if !ok || f <= 0 || f != math.Trunc(f) || f >= math.MaxInt64 {
		return 0, fmt.Errorf("obligation %q is %s, want a positive whole number", name, n.String())
	}
	return int64(f), nil
}

// stringList reads an array or a set of strings (sets in sorted order).
func stringList(v ast.Value, what string) ([]string, error) {
	var out []string
	bad := func(t *ast.Term) error {
		return fmt.Errorf("%s has a member that is %s, want string", what, ast.ValueName(t.Value))
	}
	var arr *ast.Array
	switch x := v.(type) {
	case *ast.Array:
		arr = x
	case ast.Set:
		arr = x.Sorted()
	default:
		return nil, fmt.Errorf("%s is %s, want an array or set of strings", what, ast.ValueName(v))
	}
	out = make([]string, 0, arr.Len())
	for i := range arr.Len() {
		s, ok := arr.Elem(i).Value.(ast.String)
		if !ok {
			return nil, bad(arr.Elem(i))
		}
		out = append(out, string(s))
	}
	return out, nil
}
