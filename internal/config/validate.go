package config

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/quota"
	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/internal/tools"
)

var (
	tenantName = regexp.MustCompile(`^[a-z0-9-]{1,64}$`)
	chainID    = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	sha256Hex  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	keywordDSN = regexp.MustCompile(`^[a-z_]+\s*=`)
)

// validator checks a decoded, path-resolved Config. lines maps key paths to
// the line they were found on so that messages point into the file.
type validator struct {
	p     *problems
	lines map[string]int
}

func (v *validator) add(key, format string, args ...any) {
	v.p.add(v.line(key), key, format, args...)
}

// line returns the line of key, or of its nearest ancestor present in the
// file when the key itself is missing.
func (v *validator) line(key string) int {
	for key != "" {
		if l, ok := v.lines[key]; ok {
			return l
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			break
		}
		key = key[:i]
	}
	return v.lines[""]
}

func (v *validator) config(c *Config) {
	v.listen(c.Listen)
	v.policy(c.Policy)
	v.audit(c.Audit)
	v.tenants(c.Tenants)
	v.skills(c.Tenants)
	v.auth(c.Auth, c.Tenants)
	v.upstreams(c, v.tools(c.Tools))
	v.mcpUpstreams(c)
	v.limits(c.Limits)
	v.sandbox(c.Sandbox)
	v.log(c.Log)
	v.approvals(c.Approvals)
	v.debug(c.Debug)
	v.telemetry(c.Telemetry)
	v.mcpServer(c.MCP)
	v.console(c)
}

// telemetry checks the tracing settings. The endpoint is a collector's
// base URL: credentials belong in OTEL_EXPORTER_OTLP_HEADERS, never in a
// URL that ends up in logs.
func (v *validator) telemetry(t Telemetry) {
	if t.OTLPEndpoint != "" {
		if problem := telemetry.CheckEndpoint(t.OTLPEndpoint); problem != "" {
			v.add("telemetry.otlp_endpoint", "%s", problem)
		}
	}
	if strings.IndexFunc(t.ServiceName, func(r rune) bool { return r < ' ' || r == 0x7f }) >= 0 || len(t.ServiceName) > 255 {
		v.add("telemetry.service_name", "must be at most 255 characters without control characters")
	}
	if !(t.SampleRatio >= 0 && t.SampleRatio <= 1) {
		v.add("telemetry.sample_ratio", "must be from 0 to 1, got %g", t.SampleRatio)
	}
}

// bundleAlgorithms are the signature algorithms OPA verifies bundles with.
var bundleAlgorithms = map[string]bool{
	"RS256": true, "RS384": true, "RS512": true, "PS256": true, "PS384": true, "PS512": true,
	"ES256": true, "ES384": true, "ES512": true, "HS256": true, "HS384": true, "HS512": true,
}

func (v *validator) bundle(p Policy) {
	if IsURL(p.Bundle) {
		if u, err := url.Parse(p.Bundle); err != nil || u.Host == "" || u.User != nil {
			v.add("policy.bundle", "must be an http(s) URL with a host and no credentials, or a bundle file")
		}
	} else if fi, err := os.Stat(p.Bundle); err != nil || fi.IsDir() {
		v.add("policy.bundle", "bundle file %s does not exist or is a directory", p.Bundle)
	}
	if p.PollInterval < 100*time.Millisecond && IsURL(p.Bundle) {
		v.add("policy.poll_interval", "must be at least 100ms, got %s", p.PollInterval)
	}
	if p.PollMaxBackoff < p.PollInterval {
		v.add("policy.poll_max_backoff", "must not be shorter than policy.poll_interval")
	}
	if p.Signing == nil {
		return
	}
	if len(p.Signing.Keys) == 0 {
		v.add("policy.signing.keys", "at least one key is required")
	}
	for _, id := range sortedKeys(p.Signing.Keys) {
		k := p.Signing.Keys[id]
		key := "policy.signing.keys." + id
		if k.Algorithm != "" && !bundleAlgorithms[k.Algorithm] {
			v.add(key+".algorithm", "unsupported algorithm %q", k.Algorithm)
		}
		if k.KeyFile == "" {
			v.add(key+".key_file", "required")
		} else if fi, err := os.Stat(k.KeyFile); err != nil || fi.IsDir() {
			v.add(key+".key_file", "key file %s does not exist or is a directory", k.KeyFile)
		}
	}
}

func (v *validator) approvals(a Approvals) {
	if a.TTL <= 0 {
		v.add("approvals.ttl", "must be positive, got %s", a.TTL)
	}
	if a.QuestionTTL <= 0 {
		v.add("approvals.question_ttl", "must be positive, got %s", a.QuestionTTL)
	}
	if a.MaxPending <= 0 {
		v.add("approvals.max_pending", "must be positive, got %d", a.MaxPending)
	}
}

func (v *validator) listen(addr string) {
	v.address("listen", addr)
}

// address checks a host:port listen address under key and returns its host
// ("" when malformed).
func (v *validator) address(key, addr string) (string, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.add(key, "must be host:port, e.g. \"127.0.0.1:8080\", got %q", addr)
		return "", false
	}
	ok := true
	if strings.ContainsAny(host, " \t") {
		v.add(key, "invalid host %q", host)
		ok = false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		v.add(key, "port must be a number from 0 to 65535, got %q", port)
		ok = false
	}
	return host, ok
}

// debug checks the diagnostics settings: pprof exposes heap contents, so it
// may listen only on loopback.
func (v *validator) debug(d Debug) {
	if d.PprofListen == "" {
		return
	}
	host, ok := v.address("debug.pprof_listen", d.PprofListen)
	if !ok {
		return
	}
	if host == "localhost" {
		return
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		v.add("debug.pprof_listen", "must be a loopback address (127.0.0.1, ::1 or localhost), got %q", host)
	}
}

func (v *validator) policy(p Policy) {
	switch {
	case p.Dir != "" && p.Bundle != "":
		v.add("policy.bundle", "set either policy.dir or policy.bundle, not both")
	case p.Bundle != "":
		v.bundle(p)
	case p.Dir == "":
		v.add("policy.dir", "required (or policy.bundle)")
	default:
		v.dir("policy.dir", p.Dir)
	}
	if p.Signing != nil && p.Bundle == "" {
		v.add("policy.signing", "only applies to policy.bundle")
	}
	if p.Tests != "" {
		if p.Dir == "" {
			v.add("policy.tests", "only applies to policy.dir (a bundle's tests run where it is built)")
		} else {
			v.dir("policy.tests", p.Tests)
		}
	}
	if p.DecisionCache < 0 {
		v.add("policy.decision_cache", "must be 0 (off) or a positive number of entries, got %d", p.DecisionCache)
	}
	if p.ReloadDebounce < 0 {
		v.add("policy.reload_debounce", "must not be negative")
	}
	switch fi, err := os.Stat(p.Shadow); {
	case p.Shadow == "":
	case IsURL(p.Shadow):
		if u, err := url.Parse(p.Shadow); err != nil || u.Host == "" || u.User != nil {
			v.add("policy.shadow", "must be a folder, a bundle file, or an http(s) bundle URL with a host and no credentials")
		}
	case err == nil && !fi.IsDir():
		// A bundle file.
	default:
		v.dir("policy.shadow", p.Shadow)
	}
}

// MaxBatchCalls is the largest limits.max_batch_calls: a batch is one
// model turn's parallel calls, not a bulk interface.
const MaxBatchCalls = 1024

// Bounds of audit.checkpoint_interval: a checkpoint (a signature and a
// row write per tenant) at most every 10 ms, and one at least every hour.
const (
	MinCheckpointInterval = 10 * time.Millisecond
	MaxCheckpointInterval = time.Hour
)

// MinRetention is the shortest audit.retention: shorter ones are more
// likely a unit slip ("30m" for "30d") than a wish to delete audit
// evidence within minutes.
const MinRetention = time.Hour

func (v *validator) audit(a Audit) {
	switch a.Driver {
	case "sqlite":
		if a.DSN == "" {
			v.add("audit.dsn", "required")
		} else if fi, err := os.Stat(a.DSN); err == nil && fi.IsDir() {
			v.add("audit.dsn", "%s is a directory; the sqlite dsn is a database file path", a.DSN)
		}
	case "postgres":
		switch {
		case a.DSN == "":
			v.add("audit.dsn", "required for the postgres driver")
		case !looksLikePostgresDSN(a.DSN):
			v.add("audit.dsn", "must be a postgres URL (postgres://user@host/db) or a keyword DSN (host=... dbname=...)")
		}
	default:
		v.add("audit.driver", "must be sqlite or postgres, got %q", a.Driver)
	}
	if a.QueueSize <= 0 {
		v.add("audit.queue_size", "must be positive, got %d", a.QueueSize)
	}
	if a.MaxBatch <= 0 {
		v.add("audit.max_batch", "must be positive, got %d", a.MaxBatch)
	}
	if a.Chain != "" && !chainID.MatchString(a.Chain) { // deprecated and ignored, but not garbage
		v.add("audit.chain", "must be 1 to 64 letters, digits, '.', '_' or '-', got %q", a.Chain)
	}
	if a.CheckpointInterval < MinCheckpointInterval || a.CheckpointInterval > MaxCheckpointInterval {
		v.add("audit.checkpoint_interval", "must be from %s to %s, got %s", MinCheckpointInterval, MaxCheckpointInterval, a.CheckpointInterval)
	}
	if fi, err := os.Stat(a.SigningKeyFile); err == nil && fi.IsDir() {
		v.add("audit.signing_key_file", "%s is a directory; the signing key is a file", a.SigningKeyFile)
	}
	if a.CheckpointFile != "" {
		if fi, err := os.Stat(a.CheckpointFile); err == nil && fi.IsDir() {
			v.add("audit.checkpoint_file", "%s is a directory; checkpoints are appended to a file", a.CheckpointFile)
		}
	}
	switch {
	case a.Retention < 0:
		v.add("audit.retention", "must not be negative")
	case a.Retention > 0 && a.Retention < MinRetention:
		v.add("audit.retention", "must be 0 (keep forever) or at least %s, got %s", MinRetention, a.Retention)
	}
}

func looksLikePostgresDSN(dsn string) bool {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		return err == nil && (u.Host != "" || u.Query().Get("host") != "")
	}
	return keywordDSN.MatchString(dsn)
}

func (v *validator) tenants(ts map[string]Tenant) {
	if len(ts) == 0 {
		v.add("tenants", "at least one tenant is required")
		return
	}
	names := sortedKeys(ts)
	for _, name := range names {
		t := ts[name]
		key := joinKey("tenants", name)
		if !tenantName.MatchString(name) {
			v.add(key, "invalid tenant name: use 1 to 64 lower-case letters, digits or '-'")
		}
		switch {
		case t.Workspace == "":
			v.add(key+".workspace", "required")
		case t.Seed != "":
			// The workspace is created from the seed on start, so it
			// may be missing; if present it must be a folder.
			if fi, err := os.Stat(t.Workspace); err == nil && !fi.IsDir() {
				v.add(key+".workspace", "%s is not a directory", t.Workspace)
			}
			v.dir(key+".seed", t.Seed)
		case quota.CanCreateSubvolume(t.Workspace):
			// Created at start as a btrfs subvolume
			// (docs/security-model.md "Workspace quotas").
		default:
			if _, err := os.Stat(t.Workspace); os.IsNotExist(err) {
				v.add(key+".workspace", "directory %s does not exist (a missing workspace is created at start only from a seed, or as a btrfs subvolume when its parent folder is on btrfs)", t.Workspace)
			} else {
				v.dir(key+".workspace", t.Workspace)
			}
		}
		if n := t.Limits.WorkspaceBytes; n != nil && *n <= 0 {
			v.add(key+".limits.workspace_bytes", "must be a positive number of bytes, got %d", *n)
		}
		if n := t.Limits.CPUWeight; n != nil && (*n < 1 || *n > 10000) {
			v.add(key+".limits.cpu_weight", "must be between 1 and 10000, got %d", *n)
		}
	}
	// Overlapping workspaces would let one tenant reach another's files.
	for i, a := range names {
		for _, b := range names[i+1:] {
			wa, wb := ts[a].Workspace, ts[b].Workspace
			if wa != "" && wb != "" && (within(wa, wb) || within(wb, wa)) {
				v.add(joinKey("tenants", b)+".workspace", "overlaps the workspace of tenant %q", a)
			}
		}
	}
}

// skills checks the tenants' skill libraries: existing folders outside
// every workspace, since a skill's text becomes a model's instructions.
func (v *validator) skills(ts map[string]Tenant) {
	for _, name := range sortedKeys(ts) {
		dir := ts[name].Skills
		if dir == "" {
			continue
		}
		key := joinKey("tenants", name) + ".skills"
		v.dir(key, dir)
		for _, other := range sortedKeys(ts) {
			ws := ts[other].Workspace
			if ws != "" && (within(dir, ws) || within(ws, dir)) {
				v.add(key, "overlaps the workspace of tenant %q: agents could rewrite their own skills", other)
			}
		}
	}
}

// within reports whether path is dir or inside it (lexically).
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func (v *validator) auth(a Auth, tenants map[string]Tenant) {
	j := a.JWT
	if j.HS256SecretFile == "" && j.JWKSFile == "" && j.JWKSURL == "" && j.OIDCIssuer == "" && len(a.APIKeys) == 0 {
		v.add("auth", "no credentials configured: set auth.jwt.hs256_secret_file, auth.jwt.jwks_file, auth.jwt.jwks_url, auth.jwt.oidc_issuer or auth.api_keys")
	}
	v.identityProvider(j)
	if j.HS256SecretFile != "" {
		// Missing is fine: the gateway creates a dev secret on first start.
		if fi, err := os.Stat(j.HS256SecretFile); err == nil && !fi.Mode().IsRegular() {
			v.add("auth.jwt.hs256_secret_file", "%s is not a regular file", j.HS256SecretFile)
		}
	}
	if j.JWKSFile != "" {
		fi, err := os.Stat(j.JWKSFile)
		switch {
		case err != nil:
			v.add("auth.jwt.jwks_file", "%s: %s", j.JWKSFile, pathErrReason(err))
		case !fi.Mode().IsRegular():
			v.add("auth.jwt.jwks_file", "%s is not a regular file", j.JWKSFile)
		}
	}
	for _, c := range []struct{ key, val string }{
		{"auth.jwt.tenant_claim", j.TenantClaim},
		{"auth.jwt.roles_claim", j.RolesClaim},
		{"auth.jwt.groups_claim", j.GroupsClaim},
	} {
		if c.val == "" {
			v.add(c.key, "must not be empty")
		}
	}
	if j.Leeway < 0 {
		v.add("auth.jwt.leeway", "must not be negative")
	}

	ids := map[string]int{}
	digests := map[string]int{}
	for i, k := range a.APIKeys {
		key := fmt.Sprintf("auth.api_keys[%d]", i)
		switch {
		case k.ID == "":
			v.add(key+".id", "required")
		case strings.IndexFunc(k.ID, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0:
			v.add(key+".id", "must not contain spaces or control characters")
		default:
			if first, dup := ids[k.ID]; dup {
				v.add(key+".id", "duplicate id %q (also auth.api_keys[%d])", k.ID, first)
			} else {
				ids[k.ID] = i
			}
		}
		switch {
		case k.SHA256 == "":
			v.add(key+".sha256", "required")
		case !sha256Hex.MatchString(k.SHA256):
			v.add(key+".sha256", "must be exactly 64 lower-case hex digits (the SHA-256 of the key)")
		default:
			if first, dup := digests[k.SHA256]; dup {
				v.add(key+".sha256", "same digest as auth.api_keys[%d]", first)
			} else {
				digests[k.SHA256] = i
			}
		}
		if k.Tenant == "" {
			v.add(key+".tenant", "required")
		} else if _, ok := tenants[k.Tenant]; !ok {
			v.add(key+".tenant", "unknown tenant %q (not under tenants)", k.Tenant)
		}
		v.nonEmptyStrings(key+".roles", k.Roles)
		v.nonEmptyStrings(key+".groups", k.Groups)
	}
}

func (v *validator) nonEmptyStrings(key string, list []string) {
	for i, s := range list {
		if strings.TrimSpace(s) == "" {
			v.add(fmt.Sprintf("%s[%d]", key, i), "must not be empty")
		}
	}
}

// tools checks the built-in list and returns the names it declares, by
// key, for the upstream checks.
func (v *validator) tools(t Tools) map[string]string {
	seen := map[string]int{}
	names := map[string]string{}
	for i, name := range t.Builtin {
		key := fmt.Sprintf("tools.builtin[%d]", i)
		if !tools.ValidName(name) {
			v.add(key, "invalid tool name %q: use %s", name, tools.NameRule)
			continue
		}
		if first, dup := seen[name]; dup {
			v.add(key, "duplicate tool %q (also tools.builtin[%d])", name, first)
			continue
		}
		seen[name] = i
		names[name] = fmt.Sprintf("tools.builtin[%d]", i)
	}
	return names
}

func (v *validator) limits(l Limits) {
	positive := func(key string, n int64) {
		if n <= 0 {
			v.add(key, "must be positive, got %d", n)
		}
	}
	positive("limits.max_body_bytes", l.MaxBodyBytes)
	positive("limits.max_arg_depth", int64(l.MaxArgDepth))
	positive("limits.max_output_bytes", int64(l.MaxOutputBytes))
	positive("limits.tenant_concurrency", int64(l.TenantConcurrency))
	positive("limits.tenant_commands", int64(l.TenantCommands))
	switch {
	case l.MaxBatchCalls <= 0:
		v.add("limits.max_batch_calls", "must be positive, got %d", l.MaxBatchCalls)
	case l.MaxBatchCalls > MaxBatchCalls:
		v.add("limits.max_batch_calls", "must be at most %d, got %d", MaxBatchCalls, l.MaxBatchCalls)
	}
	if l.DefaultTimeout <= 0 {
		v.add("limits.default_timeout", "must be positive, got %s", l.DefaultTimeout)
	}
	// A key must outlive the retries of a network error: shorter than a
	// minute, a retry after a timeout could run the call again.
	if l.IdempotencyTTL < time.Minute {
		v.add("limits.idempotency_ttl", "must be at least 1m, got %s", l.IdempotencyTTL)
	}
	positive("limits.tenant_long_polls", int64(l.TenantLongPolls))
	if l.WorkspaceBytes <= 0 {
		v.add("limits.workspace_bytes", "must be a positive number of bytes, got %d", l.WorkspaceBytes)
	}
	if l.CPUWeight < 1 || l.CPUWeight > 10000 {
		v.add("limits.cpu_weight", "must be between 1 and 10000, got %d", l.CPUWeight)
	}
	switch {
	case l.TenantRate < 0 || l.TenantRate > ratelimitMax:
		v.add("limits.tenant_rate", "must be from 0 (off) to %g requests per second, got %g", float64(ratelimitMax), l.TenantRate)
	case l.TenantBurst < 0 || l.TenantBurst > ratelimitMax:
		v.add("limits.tenant_burst", "must be from 0 (the rate, rounded up) to %d, got %d", ratelimitMax, l.TenantBurst)
	case l.TenantBurst > 0 && l.TenantRate == 0:
		v.add("limits.tenant_burst", "needs limits.tenant_rate (0 turns the limit off)")
	}
}

// ratelimitMax bounds limits.tenant_rate and tenant_burst (as
// ratelimit.MaxRate and MaxBurst bound policy's limits).
const ratelimitMax = 1_000_000

func (v *validator) sandbox(s Sandbox) {
	switch s.Mode {
	case "jail", "landlock-only":
	default:
		v.add("sandbox.mode", `must be "jail" or "landlock-only", got %q`, s.Mode)
	}
	if s.Helper != "" {
		if fi, err := os.Stat(s.Helper); err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			v.add("sandbox.helper", "must be an executable file, got %q", s.Helper)
		}
	}
	if s.UID <= 0 {
		v.add("sandbox.uid", "must be a positive id (never root), got %d", s.UID)
	}
	if s.GID <= 0 {
		v.add("sandbox.gid", "must be a positive id (never root), got %d", s.GID)
	}
	for _, l := range []struct {
		key string
		n   int64
	}{
		{"sandbox.memory_bytes", s.MemoryBytes}, {"sandbox.max_processes", s.MaxProcesses},
		{"sandbox.cpu_seconds", s.CPUSeconds}, {"sandbox.file_size_bytes", s.FileSizeBytes},
		{"sandbox.open_files", s.OpenFiles},
	} {
		if l.n <= 0 {
			v.add(l.key, "must be positive, got %d", l.n)
		}
	}
}

func (v *validator) log(l Log) {
	switch l.Level {
	case "debug", "info", "warn", "error":
	default:
		v.add("log.level", "must be debug, info, warn or error, got %q", l.Level)
	}
	switch l.Format {
	case "text", "json":
	default:
		v.add("log.format", "must be text or json, got %q", l.Format)
	}
}

// dir checks that path is an existing directory.
func (v *validator) dir(key, path string) {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		if os.IsNotExist(err) {
			v.add(key, "directory %s does not exist", path)
		} else {
			v.add(key, "%s: %s", path, pathErrReason(err))
		}
	case !fi.IsDir():
		v.add(key, "%s is not a directory", path)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
