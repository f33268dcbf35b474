package gateway

import (
	"fmt"
	"os"

	"github.com/open-policy-agent/opa/v1/bundle"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/decision"
)

// bundleOptions turns policy.bundle and policy.signing into the engine's
// bundle source; nil when the policy is a folder.
func bundleOptions(cfg *config.Config) (*decision.BundleOptions, error) {
	p := cfg.Policy
	if p.Bundle == "" {
		return nil, nil
	}
	b := &decision.BundleOptions{Location: p.Bundle, PollInterval: p.PollInterval, MaxBackoff: p.PollMaxBackoff}
	if p.Signing == nil {
		return b, nil
	}
	keys := map[string]*bundle.KeyConfig{}
	for id, k := range p.Signing.Keys {
		raw, err := os.ReadFile(k.KeyFile)
		if err != nil {
			return nil, &config.Error{File: cfg.File, Key: "policy.signing.keys." + id + ".key_file", Problem: "cannot read the key file"}
		}
		alg := k.Algorithm
		if alg == "" {
			alg = "RS256"
		}
		keys[id] = &bundle.KeyConfig{Key: string(raw), Algorithm: alg}
	}
	b.Verification = bundle.NewVerificationConfig(keys, "", p.Signing.Scope, nil)
	if len(keys) == 0 {
		return nil, fmt.Errorf("policy.signing: no keys")
	}
	return b, nil
}
