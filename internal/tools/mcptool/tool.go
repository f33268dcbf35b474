package mcptool

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	upstreamv1 "github.com/toolgate/toolgate/api/upstream/v1"
	"github.com/toolgate/toolgate/internal/tools"
	"github.com/toolgate/toolgate/internal/tools/upstream"
)

// Tool is one upstream tool offered by the gateway. It is safe for
// concurrent use.
type Tool struct {
	u         *Upstream
	remote    string // the upstream's tool name
	spec      tools.Spec
	defaults  map[string]any
	resources *upstream.Resources
	withheld  withheldState
}

func newTool(u *Upstream, name string, d Definition) (*Tool, error) {
	text, err := checkSchema(name, d.InputSchema)
	if err != nil {
		return nil, err
	}
	res, err := upstream.NewResources(u.o.Resources[d.Name])
	if err != nil {
		return nil, err
	}
	return &Tool{
		u: u, remote: d.Name,
		spec: tools.Spec{
			Name: name, Description: d.Description, InputSchema: text,
			Kind: tools.KindMCP, Action: "mcp." + name, Effects: []string{"mcp." + name},
			Annotations: annotationsOf(d.Annotations), AnnotationsUntrusted: true,
			Limits:           tools.Limits{Timeout: u.o.Timeout, MaxOutputBytes: u.o.MaxOutputBytes},
			DefinitionDigest: d.Digest,
		},
		defaults:  upstream.SchemaDefaults(d.InputSchema),
		resources: res,
	}, nil
}

// Spec is the published specification: the definition offered at start.
func (t *Tool) Spec() *tools.Spec { return &t.spec }

// Remote is the upstream's name of the tool.
func (t *Tool) Remote() string { return t.remote }

// WithheldReason says why the tool is not offered now ("" when it is).
func (t *Tool) WithheldReason() string {
	if r := t.withheld.Load(); r != nil {
		return *r
	}
	return ""
}

// withhold sets the reason ("" offers the tool again) and reports whether
// that changed anything.
func (t *Tool) withhold(reason string) bool {
	if reason == "" {
		return t.withheld.Swap(nil) != nil
	}
	old := t.withheld.Swap(&reason)
	return old == nil || *old != reason
}

// call is the frozen artifact: the arguments sent and their digest.
type call struct {
	args   map[string]any
	digest string
}

// Prepare applies the schema's top-level defaults and builds the
// resources: a "service" resource naming the upstream tool, then the
// configured mapping.
func (t *Tool) Prepare(_ context.Context, _ *tools.Env, args map[string]any) (tools.Plan, error) {
	full := tools.CopyArgs(args)
	for k, v := range t.defaults {
		if _, ok := full[k]; !ok {
			full[k] = v
		}
	}
	body, err := upstream.Canonical(full)
	if err != nil {
		return tools.Plan{}, fmt.Errorf("mcp %s: canonical arguments: %w", t.spec.Name, err)
	}
	res := append([]tools.Resource{{"type": "service", "id": t.spec.Name, "upstream": t.u.o.Namespace, "tool": t.remote}},
		t.resources.Build(full)...)
	// The artifact keeps its own copy: nothing done to Plan.Args later
	// reaches the upstream.
	frozen, err := jsonValue(full)
	if err != nil {
		return tools.Plan{}, fmt.Errorf("mcp %s: %w", t.spec.Name, err)
	}
	return tools.Plan{Args: full, Resources: res, Artifact: &call{args: frozen.(map[string]any), digest: upstreamv1.ArgsDigest(body)}}, nil
}

// Run forwards the frozen arguments with tools/call and shapes the result.
func (t *Tool) Run(ctx context.Context, env *tools.Env, art any, lim tools.Limits) (tools.Result, error) {
	a, ok := art.(*call)
	if !ok {
		return tools.Result{}, fmt.Errorf("mcp %s: artifact of type %T", t.spec.Name, art)
	}
	if r := t.WithheldReason(); r != "" {
		return tools.Result{}, fmt.Errorf("mcp %s: withheld since the decision: %s", t.spec.Name, r)
	}
	select {
	case t.u.sem <- struct{}{}:
		defer func() { <-t.u.sem }()
	case <-ctx.Done():
		return tools.Result{}, fmt.Errorf("mcp %s: waiting for a slot: %w", t.spec.Name, ctx.Err())
	}
	ctx, cancel := context.WithTimeout(ctx, t.u.o.Timeout)
	defer cancel()
	claims := &upstreamv1.Claims{
		Audience: t.spec.Name, Subject: env.Principal, Tenant: env.Tenant, Roles: env.Roles,
		CallID: env.CallID, SessionID: env.SessionID, RequestDigest: env.RequestDigest, ArgsDigest: a.digest,
	}
	ctx = context.WithValue(ctx, callKey{}, claims)
	s, done, err := t.u.callSession(ctx, claims)
	if err != nil {
		return tools.Result{}, fmt.Errorf("mcp %s: %w", t.spec.Name, err)
	}
	params := &mcp.CallToolParams{Name: t.remote, Arguments: a.args}
	if t.u.o.URL == "" {
		// stdio has no headers: the assertion travels in _meta.
		tok, err := t.u.o.Signer.Sign(*claims)
		if err != nil {
			return tools.Result{}, fmt.Errorf("mcp %s: signing the assertion: %w", t.spec.Name, err)
		}
		params.Meta = mcp.Meta{upstreamv1.MetaAssertion: tok}
	}
	res, err := s.CallTool(ctx, params)
	// A broken connection (or an oversized response) is not reused; a
	// request the transport refused to send (no token) broke nothing.
	done(err != nil && ctx.Err() == nil && !errors.Is(err, ErrTokenExchange))
	if err != nil {
		return tools.Result{}, fmt.Errorf("mcp %s: tools/call: %w", t.spec.Name, err)
	}
	return t.result(res)
}

// result maps a tools/call result: text content joined by newlines is the
// result; isError with model-safe text is a model-facing error; other
// content kinds are described, never passed through.
func (t *Tool) result(res *mcp.CallToolResult) (tools.Result, error) {
	var b strings.Builder
	other := 0
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(tc.Text)
			continue
		}
		other++
	}
	text := b.String()
	if text == "" && res.StructuredContent != nil && !res.IsError {
		if v, err := upstream.Canonical(res.StructuredContent); err == nil {
			text = string(v)
		}
	}
	if int64(len(text)) > t.u.o.MaxResponseBytes {
		return tools.Result{}, fmt.Errorf("mcp %s: result larger than %d bytes", t.spec.Name, t.u.o.MaxResponseBytes)
	}
	if res.IsError {
		msg := capText(text, MaxToolErrorBytes)
		if !modelSafe(msg) {
			return tools.Result{}, fmt.Errorf("mcp %s: isError result without model-safe text", t.spec.Name)
		}
		return tools.Result{}, fmt.Errorf("mcp %s: isError: %w", t.spec.Name, &tools.ModelError{Message: msg})
	}
	if other > 0 {
		if text != "" {
			text += "\n"
		}
		text += fmt.Sprintf("[%d non-text content item(s) omitted]", other)
	}
	return tools.Result{Content: text, Bytes: len(text)}, nil
}

// capText cuts s to at most n bytes at a rune boundary, marking the cut.
func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// modelSafe accepts a non-blank, printable UTF-8 text.
func modelSafe(s string) bool {
	if strings.TrimSpace(s) == "" || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < ' ' && r != '\n' && r != '\t' || r == 0x7f {
			return false
		}
	}
	return true
}
