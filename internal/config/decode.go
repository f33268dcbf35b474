package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

var durationType = reflect.TypeFor[time.Duration]()

// decoder walks a yaml.Node tree against a Go value using the yaml struct
// tags, so every problem can be reported with its full key path and line.
// Keys that are absent or null keep the value already there, which is how
// defaults survive (a plain yaml.Decode would zero a struct on "audit:").
type decoder struct {
	p     *problems
	lines map[string]int // key path -> line, for validation messages later
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	d.lines[path] = n.Line
	if n.Kind == yaml.AliasNode {
		d.p.add(n.Line, path, "YAML aliases are not supported")
		return
	}
	if isNull(n) {
		return
	}
	t := v.Type()
	switch {
	case t == jsonType:
		d.decodeJSON(n, v, path)
	case t == durationType:
		s, ok := d.scalar(n, path, "!!str", `a duration such as "250ms" or "30s"`)
		if !ok {
			return
		}
		dur, err := time.ParseDuration(s)
		if err != nil {
			d.p.add(n.Line, path, "invalid duration %q (use a Go duration such as \"250ms\" or \"30s\")", s)
			return
		}
		v.SetInt(int64(dur))
	case t.Kind() == reflect.String:
		if s, ok := d.scalar(n, path, "!!str", "a string"); ok {
			v.SetString(s)
		}
	case t.Kind() == reflect.Bool:
		if _, ok := d.scalar(n, path, "!!bool", "true or false"); ok {
			var b bool
			if err := n.Decode(&b); err != nil {
				d.p.add(n.Line, path, "invalid boolean %q", n.Value)
				return
			}
			v.SetBool(b)
		}
	case t.Kind() == reflect.Int || t.Kind() == reflect.Int64:
		if _, ok := d.scalar(n, path, "!!int", "an integer"); ok {
			var i int64
			if err := n.Decode(&i); err != nil || v.OverflowInt(i) {
				d.p.add(n.Line, path, "integer %s is out of range", n.Value)
				return
			}
			v.SetInt(i)
		}
	case t.Kind() == reflect.Float64:
		if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
			d.p.add(n.Line, path, "expected a number, got %s", describe(n))
			return
		}
		var f float64
		if err := n.Decode(&f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			d.p.add(n.Line, path, "number %s is not a finite number", n.Value)
			return
		}
		v.SetFloat(f)
	case t.Kind() == reflect.Pointer:
		elem := reflect.New(t.Elem())
		d.decode(n, elem.Elem(), path)
		v.Set(elem)
	case t.Kind() == reflect.Struct:
		d.decodeStruct(n, v, path)
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		d.decodeMap(n, v, path)
	case t.Kind() == reflect.Slice:
		d.decodeSlice(n, v, path)
	default:
		// A programming error in the Config struct, not a user error.
		panic(fmt.Sprintf("config: unsupported field type %s at %s", t, path))
	}
}

// scalar checks that n is a scalar with the wanted tag and returns its text.
func (d *decoder) scalar(n *yaml.Node, path, tag, want string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != tag {
		msg := "expected " + want + ", got " + describe(n)
		if tag == "!!str" && n.Kind == yaml.ScalarNode {
			msg += " (quote it to use it as text)"
		}
		d.p.add(n.Line, path, "%s", msg)
		return "", false
	}
	return n.Value, true
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.p.add(n.Line, path, "expected a mapping, got %s", describe(n))
		return
	}
	fields := structFields(v.Type())
	d.eachPair(n, path, func(key string, kn, vn *yaml.Node) {
		child := joinKey(path, key)
		idx, ok := fields[key]
		if !ok {
			msg := "unknown key"
			if s := suggest(key, fields); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			d.lines[child] = kn.Line
			d.p.add(kn.Line, child, "%s", msg)
			return
		}
		d.decode(vn, v.Field(idx), child)
		d.lines[child] = kn.Line // validation messages point at the key
	})
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.p.add(n.Line, path, "expected a mapping, got %s", describe(n))
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	d.eachPair(n, path, func(key string, kn, vn *yaml.Node) {
		elem := reflect.New(v.Type().Elem()).Elem()
		child := joinKey(path, key)
		d.decode(vn, elem, child)
		d.lines[child] = kn.Line
		v.SetMapIndex(reflect.ValueOf(key).Convert(v.Type().Key()), elem)
	})
}

// eachPair calls f for every key of a mapping whose key is a plain string,
// reporting non-string, duplicate and merge keys.
func (d *decoder) eachPair(n *yaml.Node, path string, f func(key string, kn, vn *yaml.Node)) {
	seen := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		if kn.Kind != yaml.ScalarNode || kn.ShortTag() != "!!str" {
			if kn.ShortTag() == "!!merge" {
				d.p.add(kn.Line, path, "YAML merge keys (<<) are not supported")
			} else {
				d.p.add(kn.Line, path, "key %s is not a string", describe(kn))
			}
			continue
		}
		key := kn.Value
		if first, dup := seen[key]; dup {
			d.p.add(kn.Line, joinKey(path, key), "duplicate key (first defined on line %d)", first)
			continue
		}
		seen[key] = kn.Line
		f(key, kn, vn)
	}
}

func (d *decoder) decodeSlice(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		d.p.add(n.Line, path, "expected a list, got %s", describe(n))
		return
	}
	out := reflect.MakeSlice(v.Type(), 0, len(n.Content))
	for i, item := range n.Content {
		child := fmt.Sprintf("%s[%d]", path, i)
		if isNull(item) {
			d.lines[child] = item.Line
			d.p.add(item.Line, child, "empty list item")
			continue
		}
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(item, elem, child)
		out = reflect.Append(out, elem)
	}
	v.Set(out)
}

// structFields maps yaml tag names to field indexes.
func structFields(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = i
	}
	return m
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names what a node is, for "expected X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		v := n.Value
		if len(v) > 40 {
			v = v[:40] + "..."
		}
		q := strconv.Quote(v)
		switch n.ShortTag() {
		case "!!str":
			return "the string " + q
		case "!!int":
			return "the integer " + v
		case "!!float":
			return "the number " + v
		case "!!bool":
			return "the boolean " + v
		case "!!null":
			return "null"
		case "!!timestamp":
			return "the timestamp " + v
		default:
			return fmt.Sprintf("a %s value %s", n.ShortTag(), q)
		}
	}
	return "nothing"
}

// joinKey appends key to a dotted path, quoting keys that would make the
// path ambiguous.
func joinKey(path, key string) string {
	if !plainKey(key) {
		return fmt.Sprintf("%s[%s]", path, strconv.Quote(key))
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func plainKey(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// suggest returns the known key closest to an unknown one, if it is close
// enough to be a likely typo.
func suggest(key string, fields map[string]int) string {
	best, bestDist := "", 3
	for name := range fields {
		if dist := levenshtein(key, name); dist < bestDist || dist == bestDist && name < best {
			best, bestDist = name, dist
		}
	}
	if bestDist > 2 {
		return ""
	}
	return best
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
