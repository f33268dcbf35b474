package shell

import (
	"math"
	"strconv"

	"github.com/toolgate/toolgate/internal/tools"
)

// The argument readers below re-check what the schema already enforces, so
// that a tool driven without the gateway's validator still cannot be fed a
// value of the wrong type. (Same shape as the workspace family's.)

// copyArgs returns a shallow copy of args for Plan.Args.
func copyArgs(args map[string]any) map[string]any {
	out := make(map[string]any, len(args)+3)
	for k, v := range args {
		out[k] = v
	}
	return out
}

// stringArg returns args[key]; present is false when it is absent.
func stringArg(args map[string]any, key string) (v string, present bool, err error) {
	raw, ok := args[key]
	if !ok {
		return "", false, nil
	}
	s, ok := raw.(string)
	if !ok {
		return "", true, &tools.ArgError{Pointer: "/" + key, Rule: "must be a string"}
	}
	return s, true, nil
}

// requiredString returns args[key], which must be a string.
func requiredString(args map[string]any, key string) (string, error) {
	s, ok, err := stringArg(args, key)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", &tools.ArgError{Pointer: "/" + key, Rule: "is required"}
	}
	return s, nil
}

// intArg returns args[key] as an int in [min, max], or def when absent.
func intArg(args map[string]any, key string, def, min, max int) (int, error) {
	raw, ok := args[key]
	if !ok {
		return def, nil
	}
	var f float64
	switch v := raw.(type) {
	case float64:
		f = v
	case int:
		f = float64(v)
	default:
		return 0, &tools.ArgError{Pointer: "/" + key, Rule: "must be an integer"}
	}
	if f != math.Trunc(f) || math.IsInf(f, 0) {
		return 0, &tools.ArgError{Pointer: "/" + key, Rule: "must be an integer"}
	}
	if f < float64(min) || f > float64(max) {
		return 0, &tools.ArgError{Pointer: "/" + key, Rule: "must be between " + strconv.Itoa(min) + " and " + strconv.Itoa(max)}
	}
	return int(f), nil
}

// boolArg returns args[key], or def when absent.
func boolArg(args map[string]any, key string, def bool) (bool, error) {
	raw, ok := args[key]
	if !ok {
		return def, nil
	}
	b, ok := raw.(bool)
	if !ok {
		return false, &tools.ArgError{Pointer: "/" + key, Rule: "must be a boolean"}
	}
	return b, nil
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
