package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("../../policies")
	body = strings.ReplaceAll(body, "POLICIES", abs)
	f := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

const goodConfig = `listen: "127.0.0.1:0"
policy: {dir: POLICIES}
audit: {dsn: audit.db}
auth: {jwt: {hs256_secret_file: secret}}
tenants: {acme: {workspace: ws}}
tools: {builtin: [read-file]}
`

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestCommandLine(t *testing.T) {
	good := writeConfig(t, goodConfig)
	apiKeyOnly := writeConfig(t, strings.Replace(goodConfig, "auth: {jwt: {hs256_secret_file: secret}}",
		`auth: {api_keys: [{id: bot, sha256: "`+strings.Repeat("ab", 32)+`", tenant: acme}]}`, 1))
	badKey := writeConfig(t, goodConfig+"extra: 1\n")
	unknownTool := writeConfig(t, strings.Replace(goodConfig, "[read-file]", "[read-file, teleport]", 1))

	cases := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
		env    map[string]string
	}{
		{"unknown command", []string{"frobnicate"}, 2, "", `unknown command "frobnicate"`, nil},
		{"audit verify needs its files", []string{"audit", "verify", "x.ndjson"}, 2, "", "usage: gateway audit verify", nil},
		{"audit verify with a missing checkpoint", []string{"audit", "verify", "--checkpoint", "/nonexistent/cp", "--key", good, good}, 1, "", "audit verify: checkpoint:", nil},
		{"audit verify with a key that is not a key", []string{"audit", "verify", "--checkpoint", good, "--key", good, good}, 1, "", "audit verify: key:", nil},
		{"audit without a sub-command", []string{"audit"}, 2, "", "gateway audit verify --checkpoint FILE", nil},
		{"help", []string{"help"}, 0, "gateway policy test", "", nil},
		{"token needs tenant and sub", []string{"token", "--config", good}, 2, "", "--tenant and --sub are required", nil},
		{"token for an unconfigured tenant", []string{"token", "--config", good, "--tenant", "globex", "--sub", "a"}, 2, "", `tenant "globex" is not configured`, nil},
		{"token without an HS256 secret", []string{"token", "--config", apiKeyOnly, "--tenant", "acme", "--sub", "a"}, 2, "", "no auth.jwt.hs256_secret_file", nil},
		{"token", []string{"token", "--config", good, "--tenant", "acme", "--sub", "alice", "--roles", "developer,auditor"}, 0, "eyJ", "", nil},
		{"token flags from the environment", []string{"token"}, 0, "eyJ", "", map[string]string{"TOOLGATE_CONFIG": good, "TOOLGATE_TENANT": "acme", "TOOLGATE_SUB": "bob"}},
		{"bad ttl", []string{"token", "--config", good, "--tenant", "acme", "--sub", "a", "--ttl", "-1h"}, 2, "", "--ttl", nil},
		{"config error names file and key", []string{"serve", "--config", badKey}, 2, "", "gateway.yaml:7: extra: unknown key", nil},
		{"missing config", []string{"serve", "--config", "/nonexistent/gateway.yaml"}, 2, "", "/nonexistent/gateway.yaml", nil},
		{"unknown built-in tool", []string{"serve", "--config", unknownTool}, 2, "", `tools.builtin[1]: unknown built-in tool "teleport"`, nil},
		{"policy test", []string{"policy", "test", "../../policies", "../../policies_test"}, 0, "PASS", "", nil},
		{"policy check", []string{"policy", "check", "../../policies"}, 0, "ok", "", nil},
		{"policy check of a missing folder", []string{"policy", "check", "/nonexistent"}, 2, "", "", nil},
		{"policy without sub-command", []string{"policy"}, 2, "", "usage", nil},
		{"audit migrate (sqlite)", []string{"audit", "migrate", "--config", good}, 0, "database (sqlite) is at the current schema version", "", nil},
		{"policy replay needs a candidate", []string{"policy", "replay", "--config", good}, 2, "", "usage: gateway policy replay", nil},
		{"policy replay with a bad time", []string{"policy", "replay", "--config", good, "--policy", "../../policies", "--from", "yesterday"}, 2, "", "--from must be an RFC 3339 time", nil},
		{"policy replay of an unconfigured tenant", []string{"policy", "replay", "--config", good, "--policy", "../../policies", "--tenant", "globex"}, 2, "", `tenant "globex" is not configured`, nil},
		{"policy replay of a broken candidate", []string{"policy", "replay", "--config", good, "--policy", "/nonexistent"}, 1, "", "candidate policy", nil},
		{"policy replay", []string{"policy", "replay", "--config", good, "--policy", "../../policies", "--tenant", "acme"}, 0, "decision events 0", "", nil},
		{"policy replay as JSON", []string{"policy", "replay", "--config", good, "--policy", "../../policies", "--json"}, 0, `"not_replayable"`, "", nil},
		{"audit without sub-command", []string{"audit"}, 2, "", "usage: gateway audit migrate", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			code, out, errs := runCLI(t, tc.args...)
			if code != tc.code || !strings.Contains(out, tc.stdout) || !strings.Contains(errs, tc.stderr) {
				t.Fatalf("exit %d (want %d)\nstdout: %s\nstderr: %s", code, tc.code, out, errs)
			}
		})
	}
}

func TestPolicyCheckReportsContractProblems(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.rego"), []byte("package toolgate.availability\n\nallow if input.args.path == \"x\"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "b.rego"), []byte("package toolgate.authz\n\ndecision := {\"allow\": false}\n"), 0o644)
	code, out, _ := runCLI(t, "policy", "check", dir)
	if code != 1 || !strings.Contains(out, "a.rego:3") || !strings.Contains(out, "input.args") {
		t.Fatalf("exit %d: %s", code, out)
	}
}

func TestPolicyCheckReportsToolsNoRuleOffersAndRulesNoTestFires(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pack")
	os.MkdirAll(dir+"_test", 0o755)
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir+"_test", "a_test.rego"), []byte("package t\n\ntest_a if data.toolgate.availability.allow with input as {\"tool\": {\"name\": \"read-file\"}}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "a.rego"), []byte("package toolgate.availability\n\nallow if input.tool.name == \"read-file\"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "b.rego"), []byte("package toolgate.authz\n\ndecision := {\"allow\": false}\n"), 0o644)
	cfg := writeConfig(t, strings.Replace(goodConfig, "[read-file]", "[read-file, write-file]", 1))
	code, out, errs := runCLI(t, "policy", "check", "--config", cfg, dir)
	if code != 1 || !strings.Contains(out, `tool "write-file" is enabled`) || !strings.Contains(out, "b.rego:3: rule data.toolgate.authz.decision never produced a value") ||
		strings.Contains(out, "a.rego:3: rule") {
		t.Fatalf("exit %d:\n%s%s", code, out, errs)
	}
}

// A pack whose own tests fail or error is not ok, with --tests or its
// DIR_test sibling, and the report names the failing test.
func TestPolicyCheckFailsWhenThePacksTestsFail(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pack")
	os.MkdirAll(dir, 0o755)
	os.MkdirAll(dir+"_test", 0o755)
	os.WriteFile(filepath.Join(dir, "a.rego"), []byte("package toolgate.availability\n\nallow if input.tool.name == \"read-file\"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "b.rego"), []byte("package toolgate.authz\n\ndecision := {\"allow\": input.tool.name == \"read-file\"}\n"), 0o644)
	pass := "package t\n\ntest_offered if data.toolgate.availability.allow with input as {\"tool\": {\"name\": \"read-file\"}}\n\n" +
		"test_allowed if data.toolgate.authz.decision.allow with input as {\"tool\": {\"name\": \"read-file\"}}\n\n" +
		"test_denied if not data.toolgate.authz.decision.allow with input as {\"tool\": {\"name\": \"x\"}}\n"
	os.WriteFile(filepath.Join(dir+"_test", "a_test.rego"), []byte(pass), 0o644)
	if code, out, errs := runCLI(t, "policy", "check", dir); code != 0 || !strings.Contains(out, ": ok") {
		t.Fatalf("passing tests: exit %d:\n%s%s", code, out, errs)
	}
	os.WriteFile(filepath.Join(dir+"_test", "b_test.rego"), []byte("package t\n\ntest_wrong if data.toolgate.authz.decision.allow with input as {\"tool\": {\"name\": \"x\"}}\n"), 0o644)
	for _, args := range [][]string{{"policy", "check", dir}, {"policy", "check", "--tests", dir + "_test", dir}} {
		code, out, errs := runCLI(t, args...)
		if code != 1 || !strings.Contains(out, "data.t.test_wrong: FAIL") || !strings.Contains(out, "1 problem(s)") || strings.Contains(out, ": ok") {
			t.Fatalf("%v with a failing test: exit %d:\n%s%s", args, code, out, errs)
		}
	}
}

// serve raises the GC target unless the operator set GOGC.
func TestTuneGCRespectsGOGC(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)

	t.Setenv("GOGC", "150") // registers the restore; GOGC is set now
	tuneGC(log)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("with GOGC set, tuneGC changed the target to %d", got)
	}
	os.Unsetenv("GOGC")
	tuneGC(log)
	if got := debug.SetGCPercent(100); got != serveGCPercent {
		t.Fatalf("without GOGC the target is %d, want %d", got, serveGCPercent)
	}
}
