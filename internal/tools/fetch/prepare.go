package fetch

import (
	"context"
	"net/http"
	"net/netip"
	"strconv"

	"github.com/toolgate/toolgate/internal/tools"
)

// maxBodyBytes bounds the request body (the schema bounds characters).
const maxBodyBytes = 1 << 20

// artifact is what Run executes: nothing in it is looked up again.
type artifact struct {
	target target
	method string
	header http.Header // canonical names; cloned before use
	body   string
	hasReq bool // a request body is sent (POST)
	addrs  []netip.Addr
}

// Prepare normalizes the URL, resolves its host once and pins the
// addresses. Its only effect outside the process is that DNS lookup.
func (f *Fetch) Prepare(ctx context.Context, _ *tools.Env, args map[string]any) (tools.Plan, error) {
	rawURL, err := stringArg(args, "url", true)
	if err != nil {
		return tools.Plan{}, err
	}
	method, err := stringArg(args, "method", false)
	if err != nil {
		return tools.Plan{}, err
	}
	switch method {
	case "":
		method = http.MethodGet
	case http.MethodGet, http.MethodPost:
	default:
		return tools.Plan{}, &tools.ArgError{Pointer: "/method", Rule: "must be GET or POST"}
	}
	header, shownHeader, err := headersArg(args)
	if err != nil {
		return tools.Plan{}, err
	}
	_, hasBody := args["body"]
	body, err := stringArg(args, "body", false)
	if err != nil {
		return tools.Plan{}, err
	}
	if hasBody && method != http.MethodPost {
		return tools.Plan{}, &tools.ArgError{Pointer: "/body", Rule: "is only allowed with method POST"}
	}
	if len(body) > maxBodyBytes {
		return tools.Plan{}, &tools.ArgError{Pointer: "/body", Rule: "must be at most " + strconv.Itoa(maxBodyBytes) + " bytes"}
	}

	t, err := parseTarget(rawURL)
	if err != nil {
		return tools.Plan{}, err
	}
	addrs, err := f.resolve(ctx, t)
	if err != nil {
		return tools.Plan{}, err
	}

	canonical := t.String()
	planArgs := map[string]any{"url": canonical, "method": method, "headers": shownHeader}
	if method == http.MethodPost {
		planArgs["body"] = body
	}
	return tools.Plan{
		Args:      planArgs,
		Resources: []tools.Resource{urlResource(t, method, addrs)},
		Artifact: artifact{
			target: t, method: method, header: header, body: body,
			hasReq: method == http.MethodPost, addrs: addrs,
		},
	}, nil
}

// urlResource is the "url" resource of the policy contract.
func urlResource(t target, method string, addrs []netip.Addr) tools.Resource {
	shown := make([]any, len(addrs))
	classes := make([]string, len(addrs))
	for i, a := range addrs {
		classes[i] = classify(a)
		shown[i] = map[string]any{"ip": a.String(), "class": classes[i]}
	}
	return tools.Resource{
		"type":          "url",
		"url":           t.String(),
		"scheme":        t.scheme,
		"host":          t.host,
		"port":          float64(t.port),
		"path":          t.path,
		"method":        method,
		"addresses":     shown,
		"address_class": worstClass(classes),
	}
}

// stringArg returns args[key] ("" when absent). It re-checks what the
// schema enforces so that a tool driven without the validator is still safe.
func stringArg(args map[string]any, key string, required bool) (string, error) {
	raw, ok := args[key]
	if !ok {
		if required {
			return "", &tools.ArgError{Pointer: "/" + key, Rule: "is required"}
		}
		return "", nil
	}
	s, ok := raw.(string)
	if !ok {
		return "", &tools.ArgError{Pointer: "/" + key, Rule: "must be a string"}
	}
	return s, nil
}
