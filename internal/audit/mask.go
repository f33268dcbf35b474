package audit

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
)

// MaskedValue replaces every masked value in a stored audit input.
const MaskedValue = "**masked**"

// Mask returns a copy of doc in which the value addressed by each RFC 6901
// JSON pointer ("/args/content", "/resources/0/path") is replaced by
// MaskedValue. doc is never modified: only the maps and arrays along masked
// paths are copied, everything else is shared.
//
// Pointers that address nothing are ignored. Invalid pointers are ignored
// too; CheckPointers reports them so a policy author can be told. The empty
// pointer addresses the whole document: every top-level value is masked.
//
// Mask descends into map[string]any and []any. A masked path through any
// other Go value (a struct, a typed map or slice) goes through its JSON
// form; a value that has none is masked whole rather than risk leaking it.
func Mask(doc map[string]any, pointers []string) map[string]any {
	root := &maskNode{}
	for _, p := range pointers {
		toks, err := parsePointer(p)
		if err != nil {
			continue
		}
		root.add(toks)
	}
	if doc == nil {
		return nil
	}
	if root.leaf {
		out := make(map[string]any, len(doc))
		for k := range doc {
			out[k] = MaskedValue
		}
		return out
	}
	if len(root.kids) == 0 {
		return doc
	}
	return root.apply(doc).(map[string]any)
}

// PointerError is an invalid JSON pointer.
type PointerError struct {
	Pointer string
	Reason  string
}

func (e *PointerError) Error() string {
	return "audit: invalid JSON pointer " + strconv.Quote(e.Pointer) + ": " + e.Reason
}

// CheckPointers reports the pointers Mask would ignore as invalid, joined
// (errors.Join of *PointerError), or nil when all are valid.
func CheckPointers(pointers []string) error {
	var errs []error
	for _, p := range pointers {
		if _, err := parsePointer(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// parsePointer splits an RFC 6901 pointer into unescaped reference tokens.
func parsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, &PointerError{Pointer: p, Reason: `must be empty or start with "/"`}
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		if !strings.Contains(t, "~") {
			continue
		}
		var b strings.Builder
		for j := 0; j < len(t); j++ {
			if t[j] != '~' {
				b.WriteByte(t[j])
				continue
			}
			if j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1') {
				return nil, &PointerError{Pointer: p, Reason: `"~" must be followed by "0" or "1"`}
			}
			if t[j+1] == '0' {
				b.WriteByte('~')
			} else {
				b.WriteByte('/')
			}
			j++
		}
		toks[i] = b.String()
	}
	return toks, nil
}

// maskNode is a trie of pointers: a leaf masks its whole value, so deeper
// pointers under a leaf are moot.
type maskNode struct {
	leaf bool
	kids map[string]*maskNode
}

func (n *maskNode) add(toks []string) {
	for _, t := range toks {
		if n.leaf {
			return
		}
		if n.kids == nil {
			n.kids = map[string]*maskNode{}
		}
		k := n.kids[t]
		if k == nil {
			k = &maskNode{}
			n.kids[t] = k
		}
		n = k
	}
	n.leaf, n.kids = true, nil
}

// apply returns v with the node's pointers masked; n has kids.
func (n *maskNode) apply(v any) any {
	switch c := v.(type) {
	case map[string]any:
		out := maps.Clone(c)
		for tok, kid := range n.kids {
			if old, ok := c[tok]; ok {
				out[tok] = kid.maskValue(old)
			}
		}
		return out
	case []any:
		out := slices.Clone(c)
		for tok, kid := range n.kids {
			if i, ok := arrayIndex(tok, len(c)); ok {
				out[i] = kid.maskValue(c[i])
			}
		}
		return out
	case nil, string, bool, float64, float32, int, int64, int32, uint, uint64, uint32:
		return v // a scalar has no members: the pointers address nothing
	}
	switch reflect.ValueOf(v).Kind() {
	case reflect.Map, reflect.Slice, reflect.Array, reflect.Struct, reflect.Pointer, reflect.Interface:
		b, err := json.Marshal(v)
		if err != nil {
			return MaskedValue
		}
		var g any
		if err := json.Unmarshal(b, &g); err != nil {
			return MaskedValue
		}
		switch g.(type) {
		case map[string]any, []any:
			return n.apply(g)
		}
		return g
	}
	return v
}

func (n *maskNode) maskValue(v any) any {
	if n.leaf {
		return MaskedValue
	}
	return n.apply(v)
}

// arrayIndex parses an RFC 6901 array index: digits without leading zeros.
// "-" (the element after the last) never exists.
func arrayIndex(tok string, n int) (int, bool) {
	if tok == "" || (len(tok) > 1 && tok[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return 0, false
		}
	}
	i, err := strconv.Atoi(tok)
	if err != nil || i >= n {
		return 0, false
	}
	return i, true
}
