package config

import "path/filepath"

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
	if cfg.Audit.Driver == "sqlite" && cfg.Audit.DSN != sqliteMemory {
		cfg.Audit.DSN = abs(cfg.Audit.DSN)
	}
	cfg.Auth.JWT.HS256SecretFile = abs(cfg.Auth.JWT.HS256SecretFile)
	cfg.Auth.JWT.JWKSFile = abs(cfg.Auth.JWT.JWKSFile)
	for name, t := range cfg.Tenants {
		t.Workspace = abs(t.Workspace)
		t.Seed = abs(t.Seed)
		t.Skills = abs(t.Skills)
		cfg.Tenants[name] = t
	}
}

// sqliteMemory is SQLite's in-memory database name; it is not a path.
const sqliteMemory = ":memory:"
