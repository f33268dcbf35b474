package gateway

import (
	"fmt"

	"github.com/toolgate/toolgate/internal/assertion"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/tools"
	"github.com/toolgate/toolgate/internal/tools/upstream"
)

// loadAssertionSigner creates the signing key on first start and loads the
// signer; nil when no key is configured (then no upstream tool is either).
func (g *Gateway) loadAssertionSigner() (*assertion.Signer, error) {
	a := g.cfg.Auth.Assertion
	if a.SigningKeyFile == "" {
		return nil, nil
	}
	created, err := assertion.EnsureKey(a.SigningKeyFile)
	if err != nil {
		return nil, &config.Error{File: g.cfg.File, Key: "auth.assertion.signing_key_file", Problem: err.Error()}
	}
	if created {
		g.log.Info("created an assertion signing key", "file", a.SigningKeyFile)
	}
	s, err := assertion.New(assertion.Options{
		Issuer: a.Issuer, TTL: a.TTL, SigningKeyFile: a.SigningKeyFile, PublishedKeyFiles: a.PublishedKeyFiles,
	})
	if err != nil {
		return nil, &config.Error{File: g.cfg.File, Key: "auth.assertion", Problem: err.Error()}
	}
	return s, nil
}

// addUpstreamTools registers the configured upstream tools after the
// built-ins, in declaration order.
func (g *Gateway) addUpstreamTools(reg *tools.Registry, signer *assertion.Signer) error {
	builtin := map[string]bool{}
	for _, n := range BuiltinNames() {
		builtin[n] = true
	}
	for i, u := range g.cfg.Tools.Upstream {
		key := fmt.Sprintf("tools.upstream[%d]", i)
		// Policies (the default pack's included) judge built-ins by name: an
		// upstream tool must never be mistaken for one, configured or not.
		if builtin[u.Name] {
			return &config.Error{File: g.cfg.File, Key: key + ".name", Problem: fmt.Sprintf("%q is the name of a built-in tool", u.Name)}
		}
		if signer == nil {
			return &config.Error{File: g.cfg.File, Key: "auth.assertion.signing_key_file", Problem: "required when tools.upstream declares tools"}
		}
		t, err := upstream.New(upstream.Declaration{
			Name: u.Name, Description: u.Description, InputSchema: string(u.InputSchema),
			Annotations: tools.Annotations{
				ReadOnly: u.Annotations.ReadOnly, Destructive: u.Annotations.Destructive,
				Idempotent: u.Annotations.Idempotent, OpenWorld: u.Annotations.OpenWorld,
			},
			Action: u.Action, Resources: u.Resources,
			URL: u.Endpoint.URL, Method: u.Endpoint.Method, Timeout: u.Endpoint.Timeout,
			MaxConcurrent: u.Endpoint.MaxConcurrent, MaxResponseBytes: u.Limits.MaxResponseBytes,
			MaxOutputBytes: u.Limits.MaxOutputBytes, TracerProvider: g.tracing.Provider(),
		}, signer)
		if err != nil {
			return &config.Error{File: g.cfg.File, Key: key, Problem: err.Error()}
		}
		g.closers = append(g.closers, t.Close)
		if err := reg.Add(t); err != nil {
			return &config.Error{File: g.cfg.File, Key: key + ".name", Problem: err.Error()}
		}
	}
	return nil
}
