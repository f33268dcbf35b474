package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"go.opentelemetry.io/otel/trace"

	upstreamv1 "github.com/toolgate/toolgate/api/upstream/v1"
	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/internal/tools"
)

// Signer signs the identity assertion of one call.
type Signer interface {
	Sign(upstreamv1.Claims) (string, error)
}

// Declaration is one upstream tool as configured.
type Declaration struct {
	Name        string
	Description string
	InputSchema string // JSON text of a JSON Schema 2020-12 object schema
	Annotations tools.Annotations
	Action      string
	// Resources: "type" is the resource type; every other member is a
	// JSON pointer into the arguments.
	Resources        []map[string]string
	URL              string
	Method           string // POST, PUT or PATCH
	Timeout          time.Duration
	MaxConcurrent    int
	MaxResponseBytes int64
	MaxOutputBytes   int // 0: the gateway default
	// TracerProvider makes each request to the service a client span
	// ("upstream", a child of the call's invoke span); nil records none.
	// Either way the request carries the W3C trace context of the call
	// (traceparent, tracestate), so the service can join the trace.
	TracerProvider trace.TracerProvider
}

// Tool is one upstream tool. It is safe for concurrent use.
type Tool struct {
	spec        tools.Spec
	url         string
	method      string
	resources   *Resources
	defaults    map[string]any // top-level schema defaults
	client      *http.Client
	transport   *http.Transport
	sem         chan struct{}
	maxResponse int64
	signer      Signer
}

// resourceRule builds one typed resource from the arguments.
type resourceRule struct {
	typ     string
	members map[string][]string // member name -> pointer tokens
}

// New builds the tool of d. Its connection pool is its own; Close releases
// it.
func New(d Declaration, signer Signer) (*Tool, error) {
	if !tools.ValidName(d.Name) {
		return nil, fmt.Errorf("upstream tool %q: invalid name", d.Name)
	}
	if signer == nil {
		return nil, fmt.Errorf("upstream tool %s: no assertion signer", d.Name)
	}
	u, err := url.Parse(d.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("upstream tool %s: endpoint must be an http or https URL without credentials", d.Name)
	}
	if d.Timeout <= 0 || d.MaxConcurrent <= 0 || d.MaxResponseBytes <= 0 {
		return nil, fmt.Errorf("upstream tool %s: timeout, concurrency and response limit must be positive", d.Name)
	}
	var schema map[string]any
	if err := json.Unmarshal([]byte(d.InputSchema), &schema); err != nil {
		return nil, fmt.Errorf("upstream tool %s: input schema: %w", d.Name, err)
	}
	canon, err := canonical(schema)
	if err != nil {
		return nil, fmt.Errorf("upstream tool %s: input schema: %w", d.Name, err)
	}
	t := &Tool{
		spec: tools.Spec{
			Name: d.Name, Description: d.Description, InputSchema: d.InputSchema,
			Kind: tools.KindUpstream, Action: d.Action, Effects: []string{d.Action},
			Annotations:  d.Annotations,
			Limits:       tools.Limits{Timeout: d.Timeout, MaxOutputBytes: d.MaxOutputBytes},
			SchemaDigest: digestOf(canon),
		},
		url:         u.String(),
		method:      d.Method,
		defaults:    schemaDefaults(schema),
		sem:         make(chan struct{}, d.MaxConcurrent),
		maxResponse: d.MaxResponseBytes,
		signer:      signer,
	}
	if t.resources, err = NewResources(d.Resources); err != nil {
		return nil, fmt.Errorf("upstream tool %s: %w", d.Name, err)
	}
	t.transport = &http.Transport{
		Proxy:                  nil, // the endpoint is the peer, never a proxy from the environment
		DialContext:            (&net.Dialer{Timeout: d.Timeout, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           d.MaxConcurrent,
		MaxIdleConnsPerHost:    d.MaxConcurrent,
		MaxConnsPerHost:        d.MaxConcurrent,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    d.Timeout,
		MaxResponseHeaderBytes: 64 << 10,
	}
	t.client = &http.Client{
		Transport: telemetry.Transport(d.TracerProvider, t.transport),
		// A redirect could point anywhere; the configured URL is the only
		// target. A 3xx is an unexpected response.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return t, nil
}

// Spec is the published specification.
func (t *Tool) Spec() *tools.Spec { return &t.spec }

// Close releases idle connections.
func (t *Tool) Close() error {
	t.transport.CloseIdleConnections()
	return nil
}

// call is the frozen artifact: the canonical body and its digest.
type call struct {
	body       []byte
	argsDigest string
}

// Prepare applies defaults, builds resources and freezes the body.
func (t *Tool) Prepare(_ context.Context, _ *tools.Env, args map[string]any) (tools.Plan, error) {
	full := tools.CopyArgs(args)
	for k, v := range t.defaults {
		if _, ok := full[k]; !ok {
			full[k] = v
		}
	}
	body, err := canonical(full)
	if err != nil {
		return tools.Plan{}, fmt.Errorf("upstream %s: canonical arguments: %w", t.spec.Name, err)
	}
	res := t.resources.Build(full)
	return tools.Plan{
		Args:      full,
		Resources: res,
		Artifact:  &call{body: body, argsDigest: digestOf(body)},
	}, nil
}

// Run sends the frozen body with a fresh assertion and shapes the answer.
func (t *Tool) Run(ctx context.Context, env *tools.Env, art any, lim tools.Limits) (tools.Result, error) {
	a, ok := art.(*call)
	if !ok {
		return tools.Result{}, fmt.Errorf("upstream %s: artifact of type %T", t.spec.Name, art)
	}
	select {
	case t.sem <- struct{}{}:
		defer func() { <-t.sem }()
	case <-ctx.Done():
		return tools.Result{}, fmt.Errorf("upstream %s: waiting for a connection slot: %w", t.spec.Name, ctx.Err())
	}
	token, err := t.signer.Sign(upstreamv1.Claims{
		Audience: t.spec.Name, Subject: env.Principal, Tenant: env.Tenant, Roles: env.Roles,
		CallID: env.CallID, SessionID: env.SessionID, RequestDigest: env.RequestDigest, ArgsDigest: a.argsDigest,
	})
	if err != nil {
		return tools.Result{}, fmt.Errorf("upstream %s: signing the assertion: %w", t.spec.Name, err)
	}
	req, err := http.NewRequestWithContext(ctx, t.method, t.url, bytes.NewReader(a.body))
	if err != nil {
		return tools.Result{}, fmt.Errorf("upstream %s: %w", t.spec.Name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "toolgate-upstream/1")
	req.Header.Set(upstreamv1.AssertionHeader, token)
	resp, err := t.client.Do(req)
	if err != nil {
		// The url.Error names the configured URL: logs and audit only.
		return tools.Result{}, fmt.Errorf("upstream %s: %s %s: %w", t.spec.Name, t.method, t.url, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	return t.result(resp)
}

// canonical is the RFC 8785 form of v.
func canonical(v any) ([]byte, error) {
	b, err := json.Marshal(v, json.Deterministic(true))
	if err != nil {
		return nil, err
	}
	raw := jsontext.Value(b)
	if err := raw.Canonicalize(); err != nil {
		return nil, err
	}
	return raw, nil
}

func digestOf(b []byte) string { return upstreamv1.ArgsDigest(b) }

// schemaDefaults returns the "default" of each top-level property.
func schemaDefaults(schema map[string]any) map[string]any {
	out := map[string]any{}
	props, _ := schema["properties"].(map[string]any)
	for name, p := range props {
		if m, ok := p.(map[string]any); ok {
			if d, ok := m["default"]; ok {
				out[name] = d
			}
		}
	}
	return out
}

// pointerTokens splits an RFC 6901 pointer into unescaped tokens.
func pointerTokens(ptr string) ([]string, bool) {
	if ptr == "" {
		return nil, true
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, false
	}
	parts := strings.Split(ptr[1:], "/")
	for i, p := range parts {
		for j := 0; j < len(p); j++ {
			if p[j] == '~' && (j+1 >= len(p) || (p[j+1] != '0' && p[j+1] != '1')) {
				return nil, false
			}
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
	}
	return parts, true
}

// lookup resolves pointer tokens in a decoded JSON value.
func lookup(v any, toks []string) (any, bool) {
	for _, tok := range toks {
		switch c := v.(type) {
		case map[string]any:
			next, ok := c[tok]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			i, ok := arrayIndex(tok, len(c))
			if !ok {
				return nil, false
			}
			v = c[i]
		default:
			return nil, false
		}
	}
	return v, true
}

func arrayIndex(tok string, n int) (int, bool) {
	if tok == "" || len(tok) > 1 && tok[0] == '0' {
		return 0, false
	}
	i := 0
	for _, r := range tok {
		if r < '0' || r > '9' {
			return 0, false
		}
		i = i*10 + int(r-'0')
		if i >= n {
			return 0, false
		}
	}
	return i, true
}
