package config

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/console"
	"github.com/toolgate/toolgate/internal/mcpserver"
)

// The configuration reference (docs/configuration.md) is checked against
// the types gateway.yaml decodes into and the defaults Load applies (the
// owners' exported constants): every key of the types is documented, every
// documented key exists, and every default the reference writes as a
// literal is the default Load gives.

const referenceDoc = "../../docs/configuration.md"

// refKey is one key path of gateway.yaml: "<>" stands for a map key (a
// tenant, a signing key id) and "[]" for any element of a list.
type refKey struct {
	leaf bool
	// free: a leaf whose value is free-form (a map or list of maps), so
	// the reference may document keys below it.
	free bool
	def  reflect.Value // the default Load gives; invalid when there is none to compare
}

// effectiveDefaults are the defaults of keys whose zero value in Config
// means "the owner's default": what the gateway actually uses.
func effectiveDefaults(c *Config) map[string]any {
	return map[string]any{
		"mcp.enabled":          c.MCP.On(),
		"console.enabled":      c.Console.On(),
		"tools.mcp[].pin":      c.Tools.MCP[0].Pinned(),
		"mcp.session_timeout":  mcpserver.DefaultSessionTimeout,
		"console.session_ttl":  console.DefaultSessionTTL,
		"console.idle_timeout": console.DefaultIdleTimeout,
	}
}

// notCompared are documented defaults not compared, and why: the owner
// applies them and does not export them (yet).
var notCompared = map[string]string{
	"console.scopes": "internal/console applies it (openid, profile, email)",
}

// referenceDefaults is a Config holding every default Load applies,
// with one element in each list so that the defaults of elements show.
func referenceDefaults() *Config {
	c := defaults()
	c.Tools.Upstream = []Upstream{{}}
	c.Tools.MCP = []MCPUpstream{{TokenExchange: &MCPTokenExchange{}}}
	applyAuditDefaults(c)
	applyUpstreamDefaults(c)
	applyMCPDefaults(c, "/")
	return c
}

func configKeys(t *testing.T) map[string]refKey {
	keys := map[string]refKey{}
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		typ := v.Type()
		switch {
		case typ == durationType || typ == jsonType:
			keys[path] = refKey{leaf: true, def: v}
			return
		}
		switch typ.Kind() {
		case reflect.Struct:
			if path != "" {
				keys[path] = refKey{}
			}
			for i := range typ.NumField() {
				f := typ.Field(i)
				name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
				if name == "" || name == "-" || !f.IsExported() {
					continue
				}
				walk(v.Field(i), joinRefKey(path, name))
			}
		case reflect.Pointer:
			if typ.Elem().Kind() == reflect.Struct {
				if v.IsNil() {
					v = reflect.New(typ.Elem())
				}
				walk(v.Elem(), path)
				return
			}
			keys[path] = refKey{leaf: true, def: v}
		case reflect.Slice:
			if typ.Elem().Kind() == reflect.Struct {
				keys[path] = refKey{}
				elem := reflect.New(typ.Elem()).Elem()
				if v.Len() > 0 {
					elem = v.Index(0)
				}
				walk(elem, path+"[]")
				return
			}
			keys[path] = refKey{leaf: true, free: typ.Elem().Kind() == reflect.Map, def: v}
		case reflect.Map:
			if typ.Elem().Kind() == reflect.Struct {
				keys[path] = refKey{}
				walk(reflect.New(typ.Elem()).Elem(), path+".<>")
				return
			}
			keys[path] = refKey{leaf: true, free: typ.Elem().Kind() != reflect.String, def: v}
		default:
			keys[path] = refKey{leaf: true, def: v}
		}
	}
	walk(reflect.ValueOf(referenceDefaults()).Elem(), "")
	if len(keys) < 100 {
		t.Fatalf("only %d keys found in Config", len(keys))
	}
	return keys
}

func joinRefKey(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// docRow is one row of the reference table.
type docRow struct {
	line    int
	keys    []string // normalized
	def     []string // one per key
	meaning string
}

var (
	backticked  = regexp.MustCompile("`([^`]*)`")
	placeholder = regexp.MustCompile(`<[^>]*>`)
	// literalDefault is a default written as one literal, optionally
	// followed by a note in parentheses: "`30s`", "`0` (off)".
	literalDefault = regexp.MustCompile("^`([^`]*)`(?: \\([^()]*\\))?$")
)

func referenceRows(t *testing.T) []docRow {
	data, err := os.ReadFile(referenceDoc)
	if err != nil {
		t.Fatal(err)
	}
	var rows []docRow
	for i, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.SplitN(strings.TrimPrefix(line, "| "), " | ", 3)
		if len(cells) != 3 {
			t.Fatalf("%s:%d: not a row of three cells", referenceDoc, i+1)
		}
		r := docRow{line: i + 1, meaning: cells[2]}
		parent := ""
		for j, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			k := placeholder.ReplaceAllString(m[1], "<>")
			if j == 0 {
				if i := strings.LastIndex(k, "."); i >= 0 {
					parent = k[:i+1]
				}
			} else if !strings.Contains(k, ".") {
				k = parent + k // "auth.jwt.tenant_claim`, `roles_claim"
			}
			r.keys = append(r.keys, k)
		}
		defs := []string{cells[1]}
		if len(r.keys) > 1 {
			if parts := strings.Split(cells[1], ", "); len(parts) == len(r.keys) {
				defs = parts
			}
		}
		for j := range r.keys {
			r.def = append(r.def, defs[min(j, len(defs)-1)])
		}
		rows = append(rows, r)
	}
	if len(rows) < 50 {
		t.Fatalf("%s: only %d rows found", referenceDoc, len(rows))
	}
	return rows
}

func TestConfigurationReferenceMatchesTheTypes(t *testing.T) {
	keys := configKeys(t)
	rows := referenceRows(t)
	eff := effectiveDefaults(referenceDefaults())

	documented := map[string]docRow{}
	compared := 0
	for _, r := range rows {
		for j, k := range r.keys {
			documented[k] = r
			if _, ok := keys[k]; !ok && !belowFreeLeaf(keys, k) {
				t.Errorf("%s:%d: documented key %s is no key of gateway.yaml", referenceDoc, r.line, k)
				continue
			}
			if checkDefault(t, r, k, r.def[j], keys, eff) {
				compared++
			}
		}
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range keys {
			if !yield(k) {
				return
			}
		}
	}) {
		if !keys[k].leaf {
			continue
		}
		if _, ok := documented[k]; ok || mentionedByAncestor(k, documented) || documentedBelow(k, documented) {
			continue
		}
		t.Errorf("%s: key %s of gateway.yaml is not documented", referenceDoc, k)
	}
	t.Logf("%d keys in Config, %d documented, %d defaults compared", len(keys), len(documented), compared)
	if compared < 60 {
		t.Errorf("only %d defaults compared", compared)
	}
}

// belowFreeLeaf reports whether k lies below a free-form leaf (such as
// tools.mcp[].resources.<tool>[] below tools.mcp[].resources).
func belowFreeLeaf(keys map[string]refKey, k string) bool {
	for p, rk := range keys {
		if rk.free && (strings.HasPrefix(k, p+".") || strings.HasPrefix(k, p+"[")) {
			return true
		}
	}
	return false
}

// documentedBelow reports whether keys below the free-form leaf k are
// documented (tools.mcp[].resources.<tool>[]).
func documentedBelow(k string, documented map[string]docRow) bool {
	for d := range documented {
		if strings.HasPrefix(d, k+".") || strings.HasPrefix(d, k+"[") {
			return true
		}
	}
	return false
}

// mentionedByAncestor reports whether the nearest documented ancestor of k
// names the next segment of k in its meaning (auth.api_keys[] lists `id`,
// `sha256`, …).
func mentionedByAncestor(k string, documented map[string]docRow) bool {
	for i := len(k) - 1; i > 0; i-- {
		if k[i] != '.' {
			continue
		}
		r, ok := documented[k[:i]]
		if !ok {
			continue
		}
		next, _, _ := strings.Cut(k[i+1:], ".")
		next = strings.TrimSuffix(next, "[]")
		return regexp.MustCompile(`\b` + regexp.QuoteMeta(next) + `\b`).MatchString(r.meaning)
	}
	return false
}

// checkDefault compares the default of k the reference gives in cell
// with Load's, and reports whether it did.
func checkDefault(t *testing.T, r docRow, k, cell string, keys map[string]refKey, eff map[string]any) bool {
	t.Helper()
	rk := keys[k]
	if !rk.leaf || !rk.def.IsValid() {
		return false
	}
	where := referenceDoc + ":" + strconv.Itoa(r.line) + ": " + k
	if why, ok := notCompared[k]; ok {
		t.Logf("%s: default %s not compared (%s)", where, cell, why)
		return false
	}
	def := rk.def
	if e, ok := eff[k]; ok {
		def = reflect.ValueOf(e)
	}
	if strings.HasPrefix(cell, "—") {
		if def.Kind() == reflect.Pointer && def.IsNil() || def.IsZero() || (def.Kind() == reflect.Slice || def.Kind() == reflect.Map) && def.Len() == 0 {
			return true
		}
		t.Errorf("%s: the reference says no default, Load gives %v", where, def)
		return true
	}
	m := literalDefault.FindStringSubmatch(cell)
	if m == nil {
		return false // described in words ("the upstream's `url`")
	}
	lit := m[1]
	if _, ok := keys[strings.ReplaceAll(lit, "<name>", "<>")]; ok {
		return false // another key's value (`limits.workspace_bytes`)
	}
	if !sameDefault(lit, def) {
		t.Errorf("%s: the reference says default %s, Load gives %v", where, cell, def)
	}
	return true
}

func sameDefault(lit string, v reflect.Value) bool {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return false
		}
		v = v.Elem()
	}
	if v.Type() == durationType {
		d, err := time.ParseDuration(lit)
		if lit == "0" {
			d, err = 0, nil
		}
		return err == nil && d == time.Duration(v.Int())
	}
	switch v.Kind() {
	case reflect.String:
		return lit == v.String()
	case reflect.Bool:
		b, err := strconv.ParseBool(lit)
		return err == nil && b == v.Bool()
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(lit, 10, 64)
		return err == nil && n == v.Int()
	case reflect.Float64:
		f, err := strconv.ParseFloat(lit, 64)
		return err == nil && f == v.Float()
	case reflect.Slice:
		if !strings.HasPrefix(lit, "[") || !strings.HasSuffix(lit, "]") {
			return false
		}
		var want []string
		if s := strings.TrimSpace(lit[1 : len(lit)-1]); s != "" {
			want = strings.Split(s, ", ")
		}
		if v.Len() != len(want) {
			return false
		}
		for i, w := range want {
			if v.Index(i).Kind() != reflect.String || v.Index(i).String() != w {
				return false
			}
		}
		return true
	case reflect.Map:
		return lit == "{}" && v.Len() == 0
	}
	return false
}
