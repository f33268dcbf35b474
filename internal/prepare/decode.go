package prepare

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// MaxSafeInteger is the largest integer arguments may carry: 2^53 - 1, the
// bound of I-JSON (RFC 7493 §2.2) and JavaScript's Number.MAX_SAFE_INTEGER.
// Every integer up to it is exact as a double; 2^53 + 1 would parse as 2^53.
const MaxSafeInteger = 1<<53 - 1

// DefaultMaxDepth bounds the nesting of decoded arguments.
const DefaultMaxDepth = 32

// decodeArguments is the one strict decode of a call's arguments. It walks
// the JSON tokens itself so that it can bound nesting depth (json/v2 has no
// depth limit) while jsontext enforces the rest: duplicate member names,
// invalid UTF-8, trailing data and malformed syntax are all errors.
// Numbers become float64 (IEEE 754 doubles, as in JavaScript and OPA). A
// number whose magnitude exceeds MaxSafeInteger is refused ("integer too
// large", whatever its notation: 9007199254740993, 1e16, 1.5e300 — every
// double that large is a whole number that may have been rounded), and one
// beyond the double range ("number out of range"): no integer is ever
// silently rounded. Smaller fractions are rounded to the nearest double.
func decodeArguments(raw []byte, maxDepth int) (map[string]any, *InvalidArgumentsError) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{}, nil
	}
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	if dec.PeekKind() != '{' {
		if _, err := dec.ReadToken(); err != nil {
			return nil, syntaxProblem(err)
		}
		return nil, invalid("", "must be a JSON object")
	}
	v, perr := decodeValue(dec, 1, maxDepth)
	if perr != nil {
		return nil, perr
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, invalid("", "unexpected data after the arguments object")
	}
	return v.(map[string]any), nil
}

func decodeValue(dec *jsontext.Decoder, depth, maxDepth int) (any, *InvalidArgumentsError) {
	if depth > maxDepth {
		return nil, invalid(string(dec.StackPointer()), "nested more than "+strconv.Itoa(maxDepth)+" levels deep")
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, syntaxProblem(err)
	}
	switch tok.Kind() {
	case 'n':
		return nil, nil
	case 't', 'f':
		return tok.Bool(), nil
	case '"':
		return tok.String(), nil
	case '0':
		f, err := strconv.ParseFloat(tok.String(), 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, invalid(string(dec.StackPointer()), "number out of range")
		}
		if f == math.Trunc(f) && math.Abs(f) > MaxSafeInteger {
			return nil, invalid(string(dec.StackPointer()), "integer too large")
		}
		return f, nil
	case '[':
		arr := []any{}
		for dec.PeekKind() != ']' {
			if dec.PeekKind() == 0 {
				_, err := dec.ReadToken()
				return nil, syntaxProblem(err)
			}
			v, perr := decodeValue(dec, depth+1, maxDepth)
			if perr != nil {
				return nil, perr
			}
			arr = append(arr, v)
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, syntaxProblem(err)
		}
		return arr, nil
	case '{':
		obj := map[string]any{}
		for dec.PeekKind() != '}' {
			nameTok, err := dec.ReadToken()
			if err != nil {
				return nil, syntaxProblem(err)
			}
			name := nameTok.String() // the token is void after the next read
			v, perr := decodeValue(dec, depth+1, maxDepth)
			if perr != nil {
				return nil, perr
			}
			obj[name] = v
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, syntaxProblem(err)
		}
		return obj, nil
	}
	return nil, invalid(string(dec.StackPointer()), "malformed JSON")
}

// syntaxProblem turns a jsontext error into model-safe feedback: where it
// happened and which rule was broken, never the offending bytes.
func syntaxProblem(err error) *InvalidArgumentsError {
	ptr := ""
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		ptr = string(se.JSONPointer)
	}
	switch {
	case errors.Is(err, jsontext.ErrDuplicateName):
		return invalid(ptr, "duplicate member name")
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return invalid(ptr, "truncated JSON")
	case strings.Contains(err.Error(), "invalid UTF-8"):
		return invalid(ptr, "invalid UTF-8 in string")
	}
	return invalid(ptr, "malformed JSON")
}
