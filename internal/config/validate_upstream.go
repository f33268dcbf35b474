package config

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/internal/prepare"
	"github.com/toolgate/toolgate/internal/tools"
)

var (
	resourceKey = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
	actionName  = regexp.MustCompile(`^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*$`)
)

// applyUpstreamDefaults fills in what each declaration leaves out; list
// items are decoded from zero values, so their defaults come after decoding.
func applyUpstreamDefaults(c *Config) {
	for i := range c.Tools.Upstream {
		u := &c.Tools.Upstream[i]
		if u.Endpoint.Method == "" {
			u.Endpoint.Method = DefaultUpstreamMethod
		}
		if u.Endpoint.Timeout == 0 {
			u.Endpoint.Timeout = DefaultUpstreamTimeout
		}
		if u.Endpoint.MaxConcurrent == 0 {
			u.Endpoint.MaxConcurrent = DefaultUpstreamConcurrency
		}
		if u.Limits.MaxResponseBytes == 0 {
			u.Limits.MaxResponseBytes = DefaultUpstreamResponseBytes
		}
		if u.Action == "" && u.Name != "" {
			u.Action = "upstream." + u.Name
		}
	}
}

// upstreams checks the upstream tool declarations. seen holds the names of
// the built-in tools, so an upstream tool cannot shadow one.
func (v *validator) upstreams(c *Config, seen map[string]string) {
	for i, u := range c.Tools.Upstream {
		key := fmt.Sprintf("tools.upstream[%d]", i)
		switch {
		case u.Name == "":
			v.add(key+".name", "required")
		case !tools.ValidName(u.Name):
			v.add(key+".name", "invalid tool name %q: use %s", u.Name, tools.NameRule)
		default:
			if first, dup := seen[u.Name]; dup {
				v.add(key+".name", "duplicate tool %q (also %s)", u.Name, first)
			} else {
				seen[u.Name] = key
			}
		}
		if strings.TrimSpace(u.Description) == "" {
			v.add(key+".description", "required: models choose tools by their description")
		}
		if !actionName.MatchString(u.Action) {
			v.add(key+".action", "must be dot-separated lower-case words such as \"maintenance.read\", got %q", u.Action)
		}
		props := v.inputSchema(key+".input_schema", u.InputSchema)
		v.resources(key+".resources", u.Resources, props)
		v.endpoint(key+".endpoint", u.Endpoint)
		if u.Limits.MaxResponseBytes <= 0 {
			v.add(key+".limits.max_response_bytes", "must be positive, got %d", u.Limits.MaxResponseBytes)
		}
		if u.Limits.MaxOutputBytes < 0 {
			v.add(key+".limits.max_output_bytes", "must not be negative, got %d", u.Limits.MaxOutputBytes)
		}
	}
	v.assertion(c.Auth.Assertion, len(c.Tools.Upstream) > 0)
}

// inputSchema compiles the schema once here, so that a broken one is a
// config error naming its key; it returns the top-level property names
// (nil when the schema does not list them).
func (v *validator) inputSchema(key string, raw JSON) map[string]any {
	if len(raw) == 0 {
		v.add(key, "required: a JSON Schema (2020-12) with \"type\": \"object\"")
		return nil
	}
	// The compiler prepare uses at start, so that what loads here starts.
	const loc = "toolgate:///config/input.json"
	_, obj, err := prepare.CompileInputSchema(loc, string(raw))
	var ext *prepare.ExternalRefError
	switch {
	case err == nil:
	case errors.Is(err, prepare.ErrSchemaNotJSON):
		v.add(key, "not a JSON value: %v", err)
		return nil
	case errors.Is(err, prepare.ErrSchemaNotObject):
		v.add(key, "must be a JSON Schema object with \"type\": \"object\" (arguments are a JSON object)")
		return nil
	case errors.As(err, &ext):
		// Name the "$ref" itself, with its line, when it can be found.
		refKey := key
		if k := externalRef(key, loc, ext.URL, schemaDoc(raw)); k != "" {
			refKey = k
		}
		v.add(refKey, "%s", strings.ReplaceAll(ext.Error(), loc, "input_schema"))
		return nil
	default:
		v.add(key, "invalid schema: %s", strings.ReplaceAll(err.Error(), loc, "input_schema"))
		return nil
	}
	props, _ := obj["properties"].(map[string]any)
	return props
}

// schemaDoc decodes a schema's JSON text (nil when it is not JSON).
func schemaDoc(raw JSON) any {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil
	}
	return doc
}

// externalRef returns the key path (below key) of the first "$ref" or
// "$schema" of doc that, resolved against loc, names resource; ""
// when there is none. Keys are walked in sorted order.
func externalRef(key, loc, resource string, doc any) string {
	base, err := url.Parse(loc)
	if err != nil {
		return ""
	}
	switch d := doc.(type) {
	case map[string]any:
		for _, name := range slices.Sorted(maps.Keys(d)) {
			if ref, ok := d[name].(string); ok && (name == "$ref" || name == "$schema") {
				if u, err := base.Parse(ref); err == nil {
					u.Fragment, u.RawFragment = "", ""
					if u.String() == resource {
						return joinKey(key, name)
					}
				}
			}
			if k := externalRef(joinKey(key, name), loc, resource, d[name]); k != "" {
				return k
			}
		}
	case []any:
		for i, item := range d {
			if k := externalRef(fmt.Sprintf("%s[%d]", key, i), loc, resource, item); k != "" {
				return k
			}
		}
	}
	return ""
}

func (v *validator) resources(key string, list []map[string]string, props map[string]any) {
	for i, r := range list {
		rkey := fmt.Sprintf("%s[%d]", key, i)
		if t, ok := r["type"]; !ok || !resourceKey.MatchString(t) {
			v.add(rkey+".type", "required: a resource type of lower-case letters, digits and '_', e.g. service")
		}
		for _, name := range sortedKeys(r) {
			if name == "type" {
				continue
			}
			ptr := r[name]
			mkey := joinKey(rkey, name)
			if !resourceKey.MatchString(name) {
				v.add(mkey, "member names are lower-case letters, digits and '_'")
				continue
			}
			first, ok := pointerHead(ptr)
			if !ok {
				v.add(mkey, "must be a JSON pointer into the arguments, such as \"/service_id\", got %q", ptr)
				continue
			}
			if props != nil {
				if _, known := props[first]; !known {
					v.add(mkey, "%q points at no property of input_schema", ptr)
				}
			}
		}
	}
}

// pointerHead returns the unescaped first token of an RFC 6901 pointer.
func pointerHead(ptr string) (string, bool) {
	if !strings.HasPrefix(ptr, "/") {
		return "", false
	}
	for i := 0; i < len(ptr); i++ {
		if ptr[i] == '~' && (i+1 >= len(ptr) || (ptr[i+1] != '0' && ptr[i+1] != '1')) {
			return "", false
		}
	}
	head, _, _ := strings.Cut(ptr[1:], "/")
	head = strings.ReplaceAll(strings.ReplaceAll(head, "~1", "/"), "~0", "~")
	return head, true
}

func (v *validator) endpoint(key string, e Endpoint) {
	if e.URL == "" {
		v.add(key+".url", "required")
	} else if u, err := url.Parse(e.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.add(key+".url", "must be an absolute http or https URL")
	} else if u.User != nil {
		v.add(key+".url", "must not carry credentials (user:password@)")
	} else if u.Fragment != "" {
		v.add(key+".url", "must not have a fragment")
	}
	switch e.Method {
	case "POST", "PUT", "PATCH":
	default:
		v.add(key+".method", "must be POST, PUT or PATCH (the arguments are the request body), got %q", e.Method)
	}
	if e.Timeout <= 0 {
		v.add(key+".timeout", "must be positive, got %s", e.Timeout)
	}
	if e.MaxConcurrent <= 0 {
		v.add(key+".max_concurrent", "must be positive, got %d", e.MaxConcurrent)
	}
}

func (v *validator) assertion(a Assertion, needed bool) {
	if needed && a.SigningKeyFile == "" {
		v.add("auth.assertion.signing_key_file", "required when tools.upstream declares tools (e.g. var/assertion-key.pem, created on first start)")
	}
	if a.SigningKeyFile != "" {
		if fi, err := os.Stat(a.SigningKeyFile); err == nil && !fi.Mode().IsRegular() {
			v.add("auth.assertion.signing_key_file", "%s is not a regular file", a.SigningKeyFile)
		}
	}
	for i, f := range a.PublishedKeyFiles {
		key := fmt.Sprintf("auth.assertion.published_key_files[%d]", i)
		fi, err := os.Stat(f)
		switch {
		case err != nil:
			v.add(key, "%s: %s", f, pathErrReason(err))
		case !fi.Mode().IsRegular():
			v.add(key, "%s is not a regular file", f)
		}
	}
	if a.Issuer == "" {
		v.add("auth.assertion.issuer", "must not be empty")
	}
	if a.TTL <= 0 || a.TTL > MaxAssertionTTL {
		v.add("auth.assertion.ttl", "must be positive and at most %s, got %s", MaxAssertionTTL, a.TTL)
	}
}
