package config

import (
	"bytes"
	"math"
	"reflect"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
	"go.yaml.in/yaml/v3"
)

var jsonType = reflect.TypeFor[JSON]()

// decodeJSON converts a YAML value into JSON text, keeping the order of
// mapping keys so that a schema is published as it was written. Only what
// JSON can say is accepted: string keys, finite numbers, no aliases.
func (d *decoder) decodeJSON(n *yaml.Node, v reflect.Value, path string) {
	var buf bytes.Buffer
	enc := jsontext.NewEncoder(&buf)
	if !d.writeJSON(enc, n, path) {
		return
	}
	v.SetBytes(bytes.TrimSpace(buf.Bytes()))
}

func (d *decoder) writeJSON(enc *jsontext.Encoder, n *yaml.Node, path string) bool {
	d.lines[path] = n.Line // so that a problem inside the value has its line
	fail := func(format string, args ...any) bool {
		d.p.add(n.Line, path, format, args...)
		return false
	}
	switch n.Kind {
	case yaml.AliasNode:
		return fail("YAML aliases are not supported")
	case yaml.MappingNode:
		if err := enc.WriteToken(jsontext.BeginObject); err != nil {
			return fail("invalid JSON value: %v", err)
		}
		ok := true
		d.eachPair(n, path, func(key string, _, vn *yaml.Node) {
			if !ok {
				return
			}
			if err := enc.WriteToken(jsontext.String(key)); err != nil {
				ok = fail("invalid key %q: %v", key, err)
				return
			}
			ok = d.writeJSON(enc, vn, joinKey(path, key))
		})
		if !ok {
			return false
		}
		if err := enc.WriteToken(jsontext.EndObject); err != nil {
			// eachPair skipped a non-string key: the object is incomplete.
			return fail("invalid JSON value: %v", err)
		}
		return true
	case yaml.SequenceNode:
		if err := enc.WriteToken(jsontext.BeginArray); err != nil {
			return fail("invalid JSON value: %v", err)
		}
		for i, item := range n.Content {
			if !d.writeJSON(enc, item, path+"["+strconv.Itoa(i)+"]") {
				return false
			}
		}
		return enc.WriteToken(jsontext.EndArray) == nil || fail("invalid JSON value")
	case yaml.ScalarNode:
		var tok jsontext.Token
		switch n.ShortTag() {
		case "!!str":
			tok = jsontext.String(n.Value)
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				return fail("invalid boolean %q", n.Value)
			}
			tok = jsontext.Bool(b)
		case "!!null":
			tok = jsontext.Null
		case "!!int":
			var i int64
			if err := n.Decode(&i); err != nil {
				return fail("integer %s is out of range", n.Value)
			}
			tok = jsontext.Int(i)
		case "!!float":
			var f float64
			if err := n.Decode(&f); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				return fail("number %s is not a finite JSON number", n.Value)
			}
			tok = jsontext.Float(f)
		default:
			return fail("expected a JSON value, got %s (quote it to use it as text)", describe(n))
		}
		if err := enc.WriteToken(tok); err != nil {
			return fail("invalid JSON value: %v", err)
		}
		return true
	}
	return fail("expected a JSON value, got %s", describe(n))
}
