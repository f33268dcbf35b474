package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const digestA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
const digestB = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"

// goodYAML is a complete, valid config; tests derive bad ones from it.
const goodYAML = `listen: "127.0.0.1:9090"
policy:
  dir: policies
audit:
  driver: sqlite
  dsn: var/audit.db
auth:
  jwt:
    hs256_secret_file: var/dev-jwt-secret
  api_keys:
    - id: ci-bot
      sha256: "` + digestA + `"
      tenant: acme
      roles: [agent]
tenants:
  acme:
    workspace: var/workspaces/acme
tools:
  builtin: [read-file, write-file]
`

// fixture creates a config folder with the directories goodYAML names and
// writes content as gateway.yaml. It returns the folder and the file path.
func fixture(t *testing.T, content string) (dir, file string) {
	t.Helper()
	dir = t.TempDir()
	for _, d := range []string{"policies", "var/workspaces/acme", "seeds/demo"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	file = filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

// configErrors flattens the (possibly joined) error Load returns.
func configErrors(t *testing.T, err error) []*Error {
	t.Helper()
	var out []*Error
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var ce *Error
		if !errors.As(err, &ce) {
			t.Fatalf("error %v (%T) is not a *config.Error", err, err)
		}
		out = append(out, ce)
	}
	walk(err)
	return out
}

func TestLoadRejectsBadConfig(t *testing.T) {
	replace := func(old, new string) string {
		if !strings.Contains(goodYAML, old) {
			panic("fixture text not found: " + old)
		}
		return strings.Replace(goodYAML, old, new, 1)
	}
	tests := []struct {
		name    string
		yaml    string
		line    int // 0: not checked
		key     string
		problem string
	}{
		{"unknown key at depth names the full path and a suggestion",
			replace("    workspace: var/workspaces/acme", "    workspsce: var/workspaces/acme"),
			17, "tenants.acme.workspsce", `unknown key (did you mean "workspace"?)`},
		{"unknown top-level key", goodYAML + "extra: 1\n", 20, "extra", "unknown key"},
		{"unknown key inside a list item",
			replace("      roles: [agent]", "      roles: [agent]\n      role: admin"),
			15, "auth.api_keys[0].role", "unknown key"},
		{"string where a list is expected",
			replace("  builtin: [read-file, write-file]", "  builtin: read-file"),
			19, "tools.builtin", `expected a list, got the string "read-file"`},
		{"list where a map is expected",
			replace("tenants:\n  acme:\n    workspace: var/workspaces/acme\n", "tenants:\n  - acme\n"),
			16, "tenants", "expected a mapping, got a list"},
		{"bad duration", goodYAML + "limits:\n  default_timeout: 5 minutes\n", 21,
			"limits.default_timeout", `invalid duration "5 minutes"`},
		{"integer where a duration is expected",
			replace("    hs256_secret_file: var/dev-jwt-secret", "    hs256_secret_file: var/dev-jwt-secret\n    leeway: 30"),
			10, "auth.jwt.leeway", "expected a duration"},
		{"text where an integer is expected",
			replace("  dsn: var/audit.db", "  dsn: var/audit.db\n  queue_size: lots"),
			7, "audit.queue_size", `expected an integer, got the string "lots"`},
		{"integer where a string is expected asks for quotes",
			replace("  dsn: var/audit.db", "  dsn: var/audit.db\n  chain: 5"),
			7, "audit.chain", "expected a string, got the integer 5 (quote it to use it as text)"},
		{"missing policy dir",
			replace("  dir: policies", "  dir: nope"), 3, "policy.dir", "does not exist"},
		{"missing shadow policy dir",
			replace("  dir: policies", "  dir: policies\n  shadow: nope"), 4, "policy.shadow", "does not exist"},
		{"approval ttl that is not positive", goodYAML + "approvals:\n  ttl: 0s\n", 21, "approvals.ttl", "must be positive"},
		{"question ttl that is not positive", goodYAML + "approvals:\n  question_ttl: -1s\n", 21, "approvals.question_ttl", "must be positive"},
		{"policy dir and bundle together",
			replace("  dir: policies", "  dir: policies\n  bundle: https://bundles.example/b.tar.gz"), 4, "policy.bundle", "not both"},
		{"missing bundle file",
			replace("  dir: policies", "  bundle: nope.tar.gz"), 3, "policy.bundle", "does not exist"},
		{"bundle URL with credentials",
			replace("  dir: policies", "  bundle: https://u:p@bundles.example/b.tar.gz"), 3, "policy.bundle", "no credentials"},
		{"signing without a bundle",
			replace("  dir: policies", "  dir: policies\n  signing:\n    keys:\n      k: {key_file: nope.pem}"), 4, "policy.signing", "only applies to policy.bundle"},
		{"policy tests folder missing",
			replace("  dir: policies", "  dir: policies\n  tests: nope"), 4, "policy.tests", "does not exist"},
		{"policy tests with a bundle",
			replace("  dir: policies", "  bundle: https://bundles.example/b.tar.gz\n  tests: policies"), 4, "policy.tests", "only applies to policy.dir"},
		{"signing key file missing",
			replace("  dir: policies", "  bundle: https://bundles.example/b.tar.gz\n  signing:\n    keys:\n      k: {key_file: nope.pem, algorithm: RS256}"), 6, "policy.signing.keys.k.key_file", "does not exist"},
		{"policy dir left out", replace("policy:\n  dir: policies\n", ""), 0, "policy.dir", "required"},
		{"missing workspace",
			replace("    workspace: var/workspaces/acme", "    workspace: var/workspaces/gone"),
			17, "tenants.acme.workspace", "does not exist"},
		{"missing seed",
			replace("    workspace: var/workspaces/acme", "    workspace: var/workspaces/new\n    seed: seeds/gone"),
			18, "tenants.acme.seed", "does not exist"},
		{"bad sha256 (upper case)",
			replace(digestA, strings.ToUpper(digestA)), 12, "auth.api_keys[0].sha256", "64 lower-case hex"},
		{"bad sha256 in the second key names its index",
			replace("      roles: [agent]", "      roles: [agent]\n    - id: other\n      sha256: abc\n      tenant: acme"),
			16, "auth.api_keys[1].sha256", "64 lower-case hex"},
		{"duplicate api key id",
			replace("      roles: [agent]", "      roles: [agent]\n    - id: ci-bot\n      sha256: \""+digestB+"\"\n      tenant: acme"),
			15, "auth.api_keys[1].id", `duplicate id "ci-bot"`},
		{"duplicate api key digest",
			replace("      roles: [agent]", "      roles: [agent]\n    - id: other\n      sha256: \""+digestA+"\"\n      tenant: acme"),
			16, "auth.api_keys[1].sha256", "same digest as auth.api_keys[0]"},
		{"unknown api key tenant",
			replace("      tenant: acme", "      tenant: globex"), 13, "auth.api_keys[0].tenant", `unknown tenant "globex"`},
		{"empty file", "", 0, "", "file is empty"},
		{"comments only", "# nothing here\n", 0, "", "file is empty"},
		{"several documents", goodYAML + "---\nlisten: x\n", 0, "", "several YAML documents"},
		{"root is not a mapping", "- a\n- b\n", 1, "", "expected a mapping at the top level, got a list"},
		{"yaml syntax error", "policy:\n  dir: [\n", 0, "", "invalid YAML"},
		{"no auth configured",
			replace("auth:\n  jwt:\n    hs256_secret_file: var/dev-jwt-secret\n  api_keys:\n    - id: ci-bot\n      sha256: \""+digestA+"\"\n      tenant: acme\n      roles: [agent]\n", ""),
			0, "auth", "no credentials configured"},
		{"no tenants", replace("tenants:\n  acme:\n    workspace: var/workspaces/acme\n", "tenants: {}\n"), 15, "tenants", "at least one tenant"},
		{"bad tenant name", replace("  acme:\n", "  Acme_Corp:\n"), 16, "tenants.Acme_Corp", "invalid tenant name"},
		{"workspace required", replace("    workspace: var/workspaces/acme", "    workspace: \"\""), 17, "tenants.acme.workspace", "required"},
		{"overlapping workspaces",
			replace("    workspace: var/workspaces/acme", "    workspace: var/workspaces/acme\n  beta:\n    workspace: var/workspaces/acme/inner\n    seed: seeds/demo"),
			19, "tenants.beta.workspace", `overlaps the workspace of tenant "acme"`},
		{"invalid tool name", replace("[read-file, write-file]", "[Read_File]"), 19, "tools.builtin[0]", "invalid tool name"},
		{"doubled hyphen in a tool name", replace("[read-file, write-file]", "[read--file]"), 19, "tools.builtin[0]", "invalid tool name"},
		{"tool name too long", replace("[read-file, write-file]", "["+strings.Repeat("r", 65)+"]"), 19, "tools.builtin[0]", "invalid tool name"},
		{"duplicate tool", replace("[read-file, write-file]", "[read-file, read-file]"), 19, "tools.builtin[1]", `duplicate tool "read-file"`},
		{"bad driver", replace("  driver: sqlite", "  driver: mysql"), 5, "audit.driver", `must be sqlite or postgres, got "mysql"`},
		{"postgres without dsn", replace("  driver: sqlite\n  dsn: var/audit.db", "  driver: postgres"), 4, "audit.dsn", "required for the postgres driver"},
		{"postgres with a file path", replace("  driver: sqlite", "  driver: postgres"), 6, "audit.dsn", "must be a postgres URL"},
		{"negative audit retention", replace("  dsn: var/audit.db", "  dsn: var/audit.db\n  retention: -1h"), 7, "audit.retention", "must not be negative"},
		{"audit retention under an hour", replace("  dsn: var/audit.db", "  dsn: var/audit.db\n  retention: 30m"), 7, "audit.retention", "at least 1h0m0s, got 30m0s"},
		{"audit retention is a duration", replace("  dsn: var/audit.db", "  dsn: var/audit.db\n  retention: 30"), 7, "audit.retention", "expected a duration"},
		{"checkpoint interval too short", replace("  dsn: var/audit.db", "  dsn: var/audit.db\n  checkpoint_interval: 1ms"), 7, "audit.checkpoint_interval", "must be from 10ms to 1h0m0s, got 1ms"},
		{"checkpoint interval too long", replace("  dsn: var/audit.db", "  dsn: var/audit.db\n  checkpoint_interval: 2h"), 7, "audit.checkpoint_interval", "must be from 10ms to 1h0m0s"},
		{"zero limit", goodYAML + "limits:\n  max_arg_depth: 0\n", 21, "limits.max_arg_depth", "must be positive"},
		{"negative timeout", goodYAML + "limits:\n  default_timeout: -1s\n", 21, "limits.default_timeout", "must be positive"},
		{"listen without port", replace(`listen: "127.0.0.1:9090"`, "listen: localhost"), 1, "listen", "must be host:port"},
		{"duplicate yaml key", replace("listen: \"127.0.0.1:9090\"\n", "listen: \"127.0.0.1:9090\"\nlisten: \":1\"\n"), 2, "listen", "duplicate key (first defined on line 1)"},
		{"aliases rejected", replace("  builtin: [read-file, write-file]", "  builtin: &x [read-file]\nlog:\n  level: *x"), 21, "log.level", "aliases are not supported"},
		{"jwks file missing",
			replace("    hs256_secret_file: var/dev-jwt-secret", "    jwks_file: keys.json"), 9, "auth.jwt.jwks_file", "no such file"},
		{"negative decision cache", replace("  dir: policies", "  dir: policies\n  decision_cache: -1"), 4, "policy.decision_cache", "must be 0 (off)"},
		{"zero batch size", goodYAML + "limits:\n  max_batch_calls: 0\n", 21, "limits.max_batch_calls", "must be positive"},
		{"huge batch size", goodYAML + "limits:\n  max_batch_calls: 5000\n", 21, "limits.max_batch_calls", "must be at most 1024, got 5000"},
		{"zero tenant concurrency", goodYAML + "limits:\n  tenant_concurrency: 0\n", 21, "limits.tenant_concurrency", "must be positive"},
		{"negative tenant commands", goodYAML + "limits:\n  tenant_commands: -1\n", 21, "limits.tenant_commands", "must be positive"},
		{"idempotency ttl under a minute", goodYAML + "limits:\n  idempotency_ttl: 30s\n", 21, "limits.idempotency_ttl", "must be at least 1m, got 30s"},
		{"negative idempotency ttl", goodYAML + "limits:\n  idempotency_ttl: -24h\n", 21, "limits.idempotency_ttl", "must be at least 1m, got -24h0m0s"},
		{"idempotency ttl is a duration", goodYAML + "limits:\n  idempotency_ttl: 24\n", 21, "limits.idempotency_ttl", "expected a duration"},
		{"negative tenant rate", goodYAML + "limits:\n  tenant_rate: -0.5\n", 21, "limits.tenant_rate", "must be from 0 (off)"},
		{"tenant rate is a number", goodYAML + "limits:\n  tenant_rate: fast\n", 21, "limits.tenant_rate", `expected a number, got the string "fast"`},
		{"tenant rate is finite", goodYAML + "limits:\n  tenant_rate: .inf\n", 21, "limits.tenant_rate", "not a finite number"},
		{"tenant burst without a rate", goodYAML + "limits:\n  tenant_burst: 10\n", 21, "limits.tenant_burst", "needs limits.tenant_rate"},
		{"negative tenant burst", goodYAML + "limits:\n  tenant_rate: 5\n  tenant_burst: -1\n", 22, "limits.tenant_burst", "must be from 0"},
		{"zero long polls", goodYAML + "limits:\n  tenant_long_polls: 0\n", 21, "limits.tenant_long_polls", "must be positive"},
		{"zero max pending", goodYAML + "approvals:\n  max_pending: 0\n", 21, "approvals.max_pending", "must be positive"},
		{"missing skills folder", replace("    workspace: var/workspaces/acme", "    workspace: var/workspaces/acme\n    skills: skills/gone"),
			18, "tenants.acme.skills", "does not exist"},
		{"skills inside a workspace", replace("    workspace: var/workspaces/acme", "    workspace: var/workspaces/acme\n    skills: var/workspaces/acme"),
			18, "tenants.acme.skills", `overlaps the workspace of tenant "acme"`},
		{"bad log level", goodYAML + "log:\n  level: loud\n", 21, "log.level", `got "loud"`},
		{"pprof on a public address", goodYAML + "debug:\n  pprof_listen: \"0.0.0.0:6060\"\n", 21, "debug.pprof_listen", "must be a loopback address"},
		{"pprof without port", goodYAML + "debug:\n  pprof_listen: localhost\n", 21, "debug.pprof_listen", "must be host:port"},
		{"otlp endpoint without a scheme", goodYAML + "telemetry:\n  otlp_endpoint: collector:4318\n", 21, "telemetry.otlp_endpoint", "must be an http(s) URL with a host"},
		{"otlp endpoint without a host", goodYAML + "telemetry:\n  otlp_endpoint: \"http://:4318\"\n", 21, "telemetry.otlp_endpoint", "must be an http(s) URL with a host"},
		{"otlp endpoint of another scheme", goodYAML + "telemetry:\n  otlp_endpoint: grpc://collector:4317\n", 21, "telemetry.otlp_endpoint", "must be an http(s) URL"},
		{"otlp endpoint with credentials", goodYAML + "telemetry:\n  otlp_endpoint: http://user:secret@collector:4318\n", 21, "telemetry.otlp_endpoint", "must not carry credentials"},
		{"otlp endpoint with a query", goodYAML + "telemetry:\n  otlp_endpoint: http://collector:4318/?token=x\n", 21, "telemetry.otlp_endpoint", "must not have a query"},
		{"otlp endpoint with a bad port", goodYAML + "telemetry:\n  otlp_endpoint: http://collector:99999\n", 21, "telemetry.otlp_endpoint", "port must be a number from 1 to 65535"},
		{"sample ratio above 1", goodYAML + "telemetry:\n  sample_ratio: 1.5\n", 21, "telemetry.sample_ratio", "must be from 0 to 1, got 1.5"},
		{"negative sample ratio", goodYAML + "telemetry:\n  sample_ratio: -0.1\n", 21, "telemetry.sample_ratio", "must be from 0 to 1"},
		{"sample ratio not a number", goodYAML + "telemetry:\n  sample_ratio: half\n", 21, "telemetry.sample_ratio", "expected a number, got"},
		{"sample ratio NaN", goodYAML + "telemetry:\n  sample_ratio: .nan\n", 21, "telemetry.sample_ratio", "not a finite number"},
		{"service name with a control character", goodYAML + "telemetry:\n  service_name: \"tool\\x01gate\"\n", 21, "telemetry.service_name", "without control characters"},
		{"unknown telemetry key", goodYAML + "telemetry:\n  otlp_endpoit: http://c:4318\n", 21, "telemetry.otlp_endpoit", "unknown key"},
		{"null list item", replace("[read-file, write-file]", "[read-file, ~]"), 19, "tools.builtin[1]", "empty list item"},
		{"boolean expected", replace("  dir: policies", "  dir: policies\n  watch: sometimes"), 4, "policy.watch", "expected true or false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, file := fixture(t, tt.yaml)
			cfg, err := Load(file)
			if err == nil {
				t.Fatalf("Load succeeded: %+v", cfg)
			}
			if cfg != nil {
				t.Errorf("Load returned a config along with an error")
			}
			for _, ce := range configErrors(t, err) {
				if ce.File != file {
					t.Errorf("error names file %q, want %q", ce.File, file)
				}
				if ce.Key == tt.key && strings.Contains(ce.Problem, tt.problem) {
					if tt.line != 0 && ce.Line != tt.line {
						t.Errorf("line = %d, want %d (%v)", ce.Line, tt.line, ce)
					}
					if !strings.HasPrefix(ce.Error(), file+":") {
						t.Errorf("message %q does not start with the file", ce.Error())
					}
					return
				}
			}
			t.Errorf("no error with key %q and problem containing %q; got:\n%v", tt.key, tt.problem, err)
		})
	}
}

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		err  Error
		want string
	}{
		{Error{File: "gateway.yaml", Line: 12, Key: "tenants.acme.workspsce", Problem: "unknown key"},
			"gateway.yaml:12: tenants.acme.workspsce: unknown key"},
		{Error{File: "gateway.yaml", Key: "auth", Problem: "no credentials configured"},
			"gateway.yaml: auth: no credentials configured"},
		{Error{File: "gateway.yaml", Problem: "file is empty"}, "gateway.yaml: file is empty"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestLoadReportsAllProblemsInFileOrder(t *testing.T) {
	y := strings.Replace(goodYAML, "  dir: policies", "  dir: nope", 1)
	y = strings.Replace(y, "[read-file, write-file]", "[BAD]", 1)
	y = strings.Replace(y, "  driver: sqlite", "  driver: mysql", 1)
	_, file := fixture(t, y)
	_, err := Load(file)
	errs := configErrors(t, err)
	var keys []string
	for _, e := range errs {
		keys = append(keys, e.Key)
	}
	want := []string{"policy.dir", "audit.driver", "tools.builtin[0]"}
	if strings.Join(keys, ",") != strings.Join(want, ",") {
		t.Errorf("keys = %v, want %v", keys, want)
	}
}

func TestLoadMissingFileIsConfigError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "absent.yaml")
	_, err := Load(file)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is not a *config.Error", err)
	}
	if ce.File != file || !strings.Contains(ce.Problem, "no such file") {
		t.Errorf("got %+v", ce)
	}
}

func TestLoadAppliesDefaults(t *testing.T) {
	dir, file := fixture(t, `policy:
  dir: policies
auth:
  jwt:
    hs256_secret_file: var/dev-jwt-secret
tenants:
  acme:
    workspace: var/workspaces/acme
audit:    # null section keeps its defaults
`)
	cfg, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"listen", cfg.Listen, "127.0.0.1:8080"},
		{"policy.watch", cfg.Policy.WatchEnabled(), true},
		{"policy.reload_debounce", cfg.Policy.ReloadDebounce, 250 * time.Millisecond},
		{"audit.driver", cfg.Audit.Driver, "sqlite"},
		{"audit.dsn", cfg.Audit.DSN, filepath.Join(dir, "var", "audit.db")},
		{"audit.queue_size", cfg.Audit.QueueSize, 4096},
		{"audit.max_batch", cfg.Audit.MaxBatch, 256},
		{"audit.chain (deprecated, ignored)", cfg.Audit.Chain, ""},
		{"audit.signing_key_file", cfg.Audit.SigningKeyFile, filepath.Join(dir, "var", "audit-signing.key")},
		{"audit.checkpoint_interval", cfg.Audit.CheckpointInterval, time.Second},
		{"audit.checkpoint_file", cfg.Audit.CheckpointFile, ""},
		{"audit.retention", cfg.Audit.Retention, time.Duration(0)},
		{"auth.jwt.tenant_claim", cfg.Auth.JWT.TenantClaim, "tenant"},
		{"auth.jwt.roles_claim", cfg.Auth.JWT.RolesClaim, "roles"},
		{"auth.jwt.groups_claim", cfg.Auth.JWT.GroupsClaim, "groups"},
		{"auth.jwt.leeway", cfg.Auth.JWT.Leeway, 30 * time.Second},
		{"limits.max_body_bytes", cfg.Limits.MaxBodyBytes, int64(1048576)},
		{"limits.max_arg_depth", cfg.Limits.MaxArgDepth, 32},
		{"limits.default_timeout", cfg.Limits.DefaultTimeout, 30 * time.Second},
		{"limits.max_output_bytes", cfg.Limits.MaxOutputBytes, 65536},
		{"policy.decision_cache", cfg.Policy.DecisionCache, 4096},
		{"limits.max_batch_calls", cfg.Limits.MaxBatchCalls, 32},
		{"limits.tenant_concurrency", cfg.Limits.TenantConcurrency, 8},
		{"limits.tenant_commands", cfg.Limits.TenantCommands, 8},
		{"limits.idempotency_ttl", cfg.Limits.IdempotencyTTL, 24 * time.Hour},
		{"limits.tenant_rate (off)", cfg.Limits.TenantRate, 0.0},
		{"limits.tenant_burst", cfg.Limits.TenantBurst, 0},
		{"limits.tenant_long_polls", cfg.Limits.TenantLongPolls, 100},
		{"approvals.max_pending", cfg.Approvals.MaxPending, 1000},
		{"tenants.acme.skills", cfg.Tenants["acme"].Skills, ""},
		{"log.level", cfg.Log.Level, "info"},
		{"log.format", cfg.Log.Format, "text"},
		{"telemetry.otlp_endpoint", cfg.Telemetry.OTLPEndpoint, ""},
		{"telemetry.service_name", cfg.Telemetry.ServiceName, ""},
		{"telemetry.sample_ratio", cfg.Telemetry.SampleRatio, 1.0},
		{"file", cfg.File, file},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if cfg.Policy.Watch == nil {
		t.Error("policy.watch is nil after Load")
	}
}

func TestLoadTelemetry(t *testing.T) {
	_, file := fixture(t, goodYAML+`telemetry:
  otlp_endpoint: https://otel-collector.observability:4318/otlp
  service_name: toolgate-eu
  sample_ratio: 0
`)
	cfg, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	want := Telemetry{OTLPEndpoint: "https://otel-collector.observability:4318/otlp", ServiceName: "toolgate-eu", SampleRatio: 0}
	if cfg.Telemetry != want {
		t.Fatalf("telemetry = %+v, want %+v", cfg.Telemetry, want)
	}
	// An integer is a number too.
	_, file = fixture(t, goodYAML+"telemetry:\n  sample_ratio: 1\n")
	if cfg, err = Load(file); err != nil || cfg.Telemetry.SampleRatio != 1 {
		t.Fatalf("sample_ratio: 1 gives %+v, %v", cfg, err)
	}
}

func TestLoadKeepsExplicitValues(t *testing.T) {
	_, file := fixture(t, goodYAML+`limits:
  max_body_bytes: 0x1000
  default_timeout: 1m30s
  idempotency_ttl: 168h
  tenant_rate: 2.5
  tenant_burst: 7
log:
  level: debug
  format: json
`)
	y, _ := os.ReadFile(file)
	y = []byte(strings.Replace(string(y), "    hs256_secret_file: var/dev-jwt-secret",
		"    hs256_secret_file: var/dev-jwt-secret\n    leeway: 0s\n    issuer: https://issuer.example\n    audience: toolgate", 1))
	y = []byte(strings.Replace(string(y), "  dir: policies", "  dir: policies\n  watch: false\n  reload_debounce: 1s", 1))
	y = []byte(strings.Replace(string(y), "  dsn: var/audit.db", "  dsn: var/audit.db\n  retention: 720h", 1))
	if err := os.WriteFile(file, y, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:9090" {
		t.Errorf("listen = %q", cfg.Listen)
	}
	if cfg.Policy.WatchEnabled() || cfg.Policy.ReloadDebounce != time.Second {
		t.Errorf("policy = %+v", cfg.Policy)
	}
	if cfg.Limits.TenantRate != 2.5 || cfg.Limits.TenantBurst != 7 {
		t.Errorf("limits.tenant_rate, tenant_burst = %v, %v; want 2.5, 7", cfg.Limits.TenantRate, cfg.Limits.TenantBurst)
	}
	if cfg.Audit.Retention != 720*time.Hour {
		t.Errorf("audit.retention = %v, want 720h", cfg.Audit.Retention)
	}
	if cfg.Auth.JWT.Leeway != 0 {
		t.Errorf("explicit zero leeway replaced by %v", cfg.Auth.JWT.Leeway)
	}
	if cfg.Auth.JWT.Issuer != "https://issuer.example" || cfg.Auth.JWT.Audience != "toolgate" {
		t.Errorf("jwt = %+v", cfg.Auth.JWT)
	}
	if cfg.Limits.MaxBodyBytes != 4096 || cfg.Limits.DefaultTimeout != 90*time.Second || cfg.Limits.IdempotencyTTL != 168*time.Hour {
		t.Errorf("limits = %+v", cfg.Limits)
	}
	if cfg.Log != (Log{Level: "debug", Format: "json"}) {
		t.Errorf("log = %+v", cfg.Log)
	}
	k := cfg.Auth.APIKeys
	if len(k) != 1 || k[0].ID != "ci-bot" || k[0].SHA256 != digestA || k[0].Tenant != "acme" ||
		len(k[0].Roles) != 1 || k[0].Roles[0] != "agent" {
		t.Errorf("api_keys = %+v", k)
	}
	if got := cfg.Tools.Builtin; len(got) != 2 || got[0] != "read-file" || got[1] != "write-file" {
		t.Errorf("tools.builtin = %v", got)
	}
}

func TestLoadResolvesRelativePathsAgainstConfigFolder(t *testing.T) {
	dir, _ := fixture(t, goodYAML)
	// Move the config one folder down and refer to it relatively from
	// elsewhere: paths must follow the file, not the working directory.
	conf := filepath.Join(dir, "conf")
	if err := os.Mkdir(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	y := strings.NewReplacer(
		"  dir: policies", "  dir: ../policies",
		"  dsn: var/audit.db", "  dsn: ../var/audit.db",
		"var/dev-jwt-secret", "../var/dev-jwt-secret",
		"    workspace: var/workspaces/acme", "    workspace: ../var/workspaces/acme\n    seed: ../seeds/demo\n    skills: ../seeds/demo",
	).Replace(goodYAML)
	if err := os.WriteFile(filepath.Join(conf, "gateway.yaml"), []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	cfg, err := Load(filepath.Join("conf", "gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"file":                   filepath.Join(conf, "gateway.yaml"),
		"policy.dir":             filepath.Join(dir, "policies"),
		"audit.dsn":              filepath.Join(dir, "var", "audit.db"),
		"hs256_secret_file":      filepath.Join(dir, "var", "dev-jwt-secret"),
		"tenants.acme.workspace": filepath.Join(dir, "var", "workspaces", "acme"),
		"tenants.acme.seed":      filepath.Join(dir, "seeds", "demo"),
		"tenants.acme.skills":    filepath.Join(dir, "seeds", "demo"),
	}
	got := map[string]string{
		"file":                   cfg.File,
		"policy.dir":             cfg.Policy.Dir,
		"audit.dsn":              cfg.Audit.DSN,
		"hs256_secret_file":      cfg.Auth.JWT.HS256SecretFile,
		"tenants.acme.workspace": cfg.Tenants["acme"].Workspace,
		"tenants.acme.seed":      cfg.Tenants["acme"].Seed,
		"tenants.acme.skills":    cfg.Tenants["acme"].Skills,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %q, want %q", k, got[k], w)
		}
	}
}

func TestLoadAcceptsOtherValidShapes(t *testing.T) {
	tests := []struct {
		name string
		yaml string
	}{
		{"seeded workspace that does not exist yet",
			strings.Replace(goodYAML, "    workspace: var/workspaces/acme", "    workspace: var/workspaces/new\n    seed: seeds/demo", 1)},
		{"postgres URL", strings.Replace(goodYAML, "  driver: sqlite\n  dsn: var/audit.db",
			"  driver: postgres\n  dsn: postgres://toolgate@db.internal:5432/audit?sslmode=verify-full", 1)},
		{"postgres keyword DSN", strings.Replace(goodYAML, "  driver: sqlite\n  dsn: var/audit.db",
			"  driver: postgres\n  dsn: host=db.internal dbname=audit user=toolgate", 1)},
		{"api keys only", strings.Replace(goodYAML, "  jwt:\n    hs256_secret_file: var/dev-jwt-secret\n", "", 1)},
		{"listen on all interfaces, any port", strings.Replace(goodYAML, `listen: "127.0.0.1:9090"`, `listen: ":0"`, 1)},
		{"skill library beside the workspace", strings.Replace(goodYAML, "    workspace: var/workspaces/acme", "    workspace: var/workspaces/acme\n    skills: seeds/demo", 1)},
		{"empty tool list", strings.Replace(goodYAML, "[read-file, write-file]", "[]", 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, file := fixture(t, tt.yaml)
			if _, err := Load(file); err != nil {
				t.Fatalf("Load: %v", err)
			}
		})
	}
}
