package task

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/tools"
)

// The argument readers re-check what the schema already enforces, so that
// a tool driven without the gateway's validator still cannot be fed a value
// of the wrong type or size.

// errNoEnv is a wiring mistake, not the model's.
var errNoEnv = errors.New("task: no env")

// scope returns the (tenant, session) a call works in. A call without a
// session has no task list.
func scope(env *tools.Env) (tenant, session string, err error) {
	if env == nil {
		return "", "", errNoEnv
	}
	if env.SessionID == "" {
		return "", "", &tools.ArgError{Pointer: "", Rule: "requires a session_id in the call"}
	}
	return env.Tenant, env.SessionID, nil
}

// notFound is the one answer for an id that is not a task of the caller's
// session, whether it is missing or belongs to another session or tenant;
// and, when policy conceals its denial, for a task of another principal
// of the session.
func notFound(pointer string) *tools.ArgError {
	return &tools.ArgError{Pointer: pointer, Rule: "not_found: no such task"}
}

// allOwners is the owner argument of task-list that asks for the tasks of
// every principal of the session.
const allOwners = "*"

// maxOwner bounds the owner argument: a principal id (the gateway accepts
// subjects of at most 256 bytes).
const maxOwner = 256

// ownerArg returns task-list's owner argument: a principal id, allOwners,
// or, when absent, the caller.
func ownerArg(args map[string]any, caller string) (string, error) {
	s, ok, err := stringArg(args, "owner")
	if err != nil || !ok {
		return caller, err
	}
	switch {
	case s == "":
		return "", &tools.ArgError{Pointer: "/owner", Rule: "must not be empty"}
	case len(s) > maxOwner:
		return "", &tools.ArgError{Pointer: "/owner", Rule: "must be at most " + strconv.Itoa(maxOwner) + " bytes"}
	case !utf8.ValidString(s):
		return "", &tools.ArgError{Pointer: "/owner", Rule: "must be valid UTF-8"}
	}
	return s, nil
}

// The shared argument readers of package tools.
var (
	copyArgs  = tools.CopyArgs
	stringArg = tools.StringArg
)

// textArg returns args[key] checked as task text of at most max characters.
// A subject is one non-blank line.
func textArg(args map[string]any, key string, max int, subject bool) (v string, present bool, err error) {
	s, ok, err := stringArg(args, key)
	if err != nil || !ok {
		return "", ok, err
	}
	ptr := "/" + key
	switch {
	case !utf8.ValidString(s):
		return "", true, &tools.ArgError{Pointer: ptr, Rule: "must be valid UTF-8"}
	case utf8.RuneCountInString(s) > max:
		return "", true, &tools.ArgError{Pointer: ptr, Rule: "must be at most " + strconv.Itoa(max) + " characters"}
	case strings.ContainsRune(s, 0):
		// PostgreSQL text cannot hold NUL; refuse it everywhere alike.
		return "", true, &tools.ArgError{Pointer: ptr, Rule: "must not contain NUL characters"}
	case subject && strings.TrimSpace(s) == "":
		return "", true, &tools.ArgError{Pointer: ptr, Rule: "must not be blank"}
	case subject && strings.ContainsAny(s, "\r\n"):
		return "", true, &tools.ArgError{Pointer: ptr, Rule: "must be a single line"}
	}
	return s, true, nil
}

// idArg returns args[key], which must be a task id.
func idArg(args map[string]any, key string) (string, error) {
	s, ok, err := stringArg(args, key)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", &tools.ArgError{Pointer: "/" + key, Rule: "is required"}
	}
	if !ValidID(s) {
		return "", errBadID("/" + key)
	}
	return s, nil
}

func errBadID(ptr string) error {
	return &tools.ArgError{Pointer: ptr, Rule: "must be a task id (task_ and 12 characters a-z, 2-7)"}
}

// idsArg returns args[key] as a list of distinct task ids of at most max
// entries ([] when absent).
func idsArg(args map[string]any, key string, max int) ([]string, bool, error) {
	raw, ok := args[key]
	if !ok {
		return []string{}, false, nil
	}
	ptr := "/" + key
	var items []any
	switch v := raw.(type) {
	case []any:
		items = v
	case []string:
		for _, s := range v {
			items = append(items, s)
		}
	default:
		return nil, true, &tools.ArgError{Pointer: ptr, Rule: "must be an array of task ids"}
	}
	if len(items) > max {
		return nil, true, &tools.ArgError{Pointer: ptr, Rule: "must have at most " + strconv.Itoa(max) + " items"}
	}
	out := make([]string, 0, len(items))
	seen := make(map[string]bool, len(items))
	for i, it := range items {
		p := ptr + "/" + strconv.Itoa(i)
		s, ok := it.(string)
		if !ok || !ValidID(s) {
			return nil, true, errBadID(p)
		}
		if seen[s] {
			return nil, true, &tools.ArgError{Pointer: ptr, Rule: "items must be unique"}
		}
		seen[s] = true
		out = append(out, s)
	}
	return out, true, nil
}

// idsToArgs turns ids back into the JSON shape of Plan.Args.
func idsToArgs(ids []string) []any {
	out := make([]any, len(ids))
	for i, s := range ids {
		out[i] = s
	}
	return out
}

// statusArg returns args[key] if it is a valid status.
func statusArg(args map[string]any, key string) (string, bool, error) {
	s, ok, err := stringArg(args, key)
	if err != nil || !ok {
		return "", ok, err
	}
	if !validStatus(s) {
		return "", true, &tools.ArgError{Pointer: "/" + key, Rule: "must be one of pending, in_progress, completed"}
	}
	return s, true, nil
}
