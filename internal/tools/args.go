package tools

import (
	"math"
	"strconv"
)

// Argument readers for Prepare. They re-check what the published schema
// already enforces, so that a tool driven without the gateway's validator
// still cannot be fed a value of the wrong type; failures are *ArgError.

// CopyArgs returns a shallow copy of args for Plan.Args, never aliasing the
// caller's map.
func CopyArgs(args map[string]any) map[string]any {
	out := make(map[string]any, len(args)+3)
	for k, v := range args {
		out[k] = v
	}
	return out
}

// StringArg returns args[key]; present is false when it is absent.
func StringArg(args map[string]any, key string) (v string, present bool, err error) {
	raw, ok := args[key]
	if !ok {
		return "", false, nil
	}
	s, ok := raw.(string)
	if !ok {
		return "", true, &ArgError{Pointer: "/" + key, Rule: "must be a string"}
	}
	return s, true, nil
}

// RequiredString returns args[key], which must be a string.
func RequiredString(args map[string]any, key string) (string, error) {
	s, ok, err := StringArg(args, key)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", &ArgError{Pointer: "/" + key, Rule: "is required"}
	}
	return s, nil
}

// IntArg returns args[key] as an int in [min, max], or def when absent.
func IntArg(args map[string]any, key string, def, min, max int) (int, error) {
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
		return 0, &ArgError{Pointer: "/" + key, Rule: "must be an integer"}
	}
	if f != math.Trunc(f) || math.IsInf(f, 0) {
		return 0, &ArgError{Pointer: "/" + key, Rule: "must be an integer"}
	}
	if f < float64(min) || f > float64(max) {
		return 0, &ArgError{Pointer: "/" + key, Rule: "must be between " + strconv.Itoa(min) + " and " + strconv.Itoa(max)}
	}
	return int(f), nil
}

// BoolArg returns args[key], or def when absent.
func BoolArg(args map[string]any, key string, def bool) (bool, error) {
	raw, ok := args[key]
	if !ok {
		return def, nil
	}
	b, ok := raw.(bool)
	if !ok {
		return false, &ArgError{Pointer: "/" + key, Rule: "must be a boolean"}
	}
	return b, nil
}
