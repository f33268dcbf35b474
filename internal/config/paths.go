package config

import (
	"path/filepath"
	"strings"
)

// resolvePaths makes every path in cfg absolute, relative to base (the
// config file's folder), so the process's working directory never matters
// after Load.
func resolvePaths(cfg *Config, base string) {
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(base, p)
	}
	cfg.Policy.Dir = abs(cfg.Policy.Dir)
	cfg.Policy.Tests = abs(cfg.Policy.Tests)
	if !IsURL(cfg.Policy.Shadow) {
		cfg.Policy.Shadow = abs(cfg.Policy.Shadow)
	}
	if !IsURL(cfg.Policy.Bundle) {
		cfg.Policy.Bundle = abs(cfg.Policy.Bundle)
	}
	if cfg.Policy.Signing != nil {
		for id, k := range cfg.Policy.Signing.Keys {
			k.KeyFile = abs(k.KeyFile)
			cfg.Policy.Signing.Keys[id] = k
		}
	}
	if cfg.Audit.Driver == "sqlite" && cfg.Audit.DSN != sqliteMemory {
		cfg.Audit.DSN = abs(cfg.Audit.DSN)
	}
	// The checkpoint key: beside the SQLite database by default, else in
	// var/ beside the config.
	switch {
	case cfg.Audit.SigningKeyFile != "":
		cfg.Audit.SigningKeyFile = abs(cfg.Audit.SigningKeyFile)
	case cfg.Audit.Driver == "sqlite" && cfg.Audit.DSN != sqliteMemory && cfg.Audit.DSN != "":
		cfg.Audit.SigningKeyFile = filepath.Join(filepath.Dir(cfg.Audit.DSN), DefaultSigningKeyName)
	default:
		cfg.Audit.SigningKeyFile = abs(filepath.Join("var", DefaultSigningKeyName))
	}
	// The MCP requestState key: beside the checkpoint key by default, the
	// other key replicas share.
	if cfg.MCP.RequestStateKeyFile == "" {
		cfg.MCP.RequestStateKeyFile = filepath.Join(filepath.Dir(cfg.Audit.SigningKeyFile), DefaultRequestStateKeyName)
	}
	cfg.MCP.RequestStateKeyFile = abs(cfg.MCP.RequestStateKeyFile)
	for i, f := range cfg.MCP.RequestStatePreviousKeyFiles {
		cfg.MCP.RequestStatePreviousKeyFiles[i] = abs(f)
	}
	cfg.Audit.CheckpointFile = abs(cfg.Audit.CheckpointFile)
	cfg.Auth.JWT.HS256SecretFile = abs(cfg.Auth.JWT.HS256SecretFile)
	cfg.Auth.JWT.JWKSFile = abs(cfg.Auth.JWT.JWKSFile)
	cfg.Console.ClientSecretFile = abs(cfg.Console.ClientSecretFile)
	cfg.Auth.Assertion.SigningKeyFile = abs(cfg.Auth.Assertion.SigningKeyFile)
	for i, f := range cfg.Auth.Assertion.PublishedKeyFiles {
		cfg.Auth.Assertion.PublishedKeyFiles[i] = abs(f)
	}
	cfg.Sandbox.Helper = abs(cfg.Sandbox.Helper)
	for name, t := range cfg.Tenants {
		t.Workspace = abs(t.Workspace)
		t.Seed = abs(t.Seed)
		t.Skills = abs(t.Skills)
		cfg.Tenants[name] = t
	}
}

// sqliteMemory is SQLite's in-memory database name; it is not a path.
const sqliteMemory = ":memory:"

// IsURL reports whether a policy bundle location is an http(s) URL rather
// than a file.
func IsURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}
