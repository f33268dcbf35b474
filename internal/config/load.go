package config

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/internal/api"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/auth"
	"github.com/toolgate/toolgate/internal/decision"
	"github.com/toolgate/toolgate/internal/invoke"
	"github.com/toolgate/toolgate/internal/jwks"
	"github.com/toolgate/toolgate/internal/pipeline"
	"github.com/toolgate/toolgate/internal/prepare"
	"github.com/toolgate/toolgate/internal/sandbox"
	"github.com/toolgate/toolgate/internal/service"
	"github.com/toolgate/toolgate/internal/telemetry"
)

// Defaults applied by Load to keys the file leaves out that no other
// package owns. The others are their owners' exported defaults (auth,
// jwks, audit, decision, prepare, invoke, pipeline, api, sandbox,
// telemetry), which defaults() names.
const (
	DefaultListen      = "127.0.0.1:8080"
	DefaultAuditDriver = "sqlite"
	DefaultAuditDSN    = "var/audit.db" // sqlite only
	// DefaultSigningKeyName is the file name of the default
	// audit.signing_key_file.
	DefaultSigningKeyName = "audit-signing.key"
	DefaultMaxBodyBytes   = service.DefaultMaxBodyBytes
	DefaultLogLevel       = "info"
	DefaultLogFormat      = "text"
	DefaultApprovalTTL    = pipeline.DefaultApprovalTTL
	// DefaultWorkspaceBytes is limits.workspace_bytes's default: 1 GiB.
	DefaultWorkspaceBytes = 1 << 30
)

// Load reads, decodes and validates the YAML configuration in file.
//
// Decoding is strict: unknown keys, values of the wrong type, aliases,
// duplicate keys, several documents, an empty file and a root that is not a
// mapping are errors. Keys that are left out (or null) get their defaults.
// Relative paths are resolved against the file's folder and stored
// absolute; directories the config names are checked to exist. Load reads
// no environment variables and creates nothing.
//
// Every problem is a *Error naming the file, the line when known, the
// dotted key path and what is wrong; when there are several they are
// joined with errors.Join.
func Load(file string) (*Config, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, &Error{File: file, Problem: "cannot resolve path: " + err.Error()}
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return nil, &Error{File: file, Problem: "cannot read: " + pathErrReason(err)}
	}

	p := &problems{file: file}
	root := parseYAML(data, p)
	if root == nil {
		return nil, p.err()
	}

	cfg := defaults()
	d := &decoder{p: p, lines: make(map[string]int)}
	d.decode(root, reflect.ValueOf(cfg).Elem(), "")
	if err := p.err(); err != nil {
		// Validating a half-decoded config would only add noise.
		return nil, err
	}
	cfg.File = abs
	applyAuditDefaults(cfg)
	applyUpstreamDefaults(cfg)
	applyMCPDefaults(cfg, filepath.Dir(abs))
	resolvePaths(cfg, filepath.Dir(abs))
	v := &validator{p: p, lines: d.lines}
	v.config(cfg)
	if err := p.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// defaults returns a Config holding every default; decoding overlays the
// file on top of it.
func defaults() *Config {
	watch := true
	return &Config{
		Listen: DefaultListen,
		Policy: Policy{Watch: &watch, ReloadDebounce: decision.DefaultReloadDebounce, DecisionCache: decision.DefaultCacheSize,
			PollInterval: decision.DefaultPollInterval, PollMaxBackoff: decision.DefaultPollMaxBackoff},
		Audit: Audit{
			Driver:    DefaultAuditDriver,
			QueueSize: audit.DefaultQueueSize,
			MaxBatch:  audit.DefaultMaxBatch,

			CheckpointInterval: audit.DefaultCheckpointInterval,
		},
		Auth: Auth{JWT: JWT{
			TenantClaim: auth.DefaultTenantClaim,
			RolesClaim:  auth.DefaultRolesClaim,
			GroupsClaim: auth.DefaultGroupsClaim,
			Leeway:      auth.DefaultLeeway,

			JWKSRefresh:           jwks.DefaultRefresh,
			JWKSUnknownKIDRefresh: jwks.DefaultUnknownKIDRefresh,
		}, Assertion: Assertion{Issuer: DefaultAssertionIssuer, TTL: DefaultAssertionTTL}},
		Limits: Limits{
			MaxBodyBytes:   DefaultMaxBodyBytes,
			MaxArgDepth:    prepare.DefaultMaxDepth,
			DefaultTimeout: invoke.DefaultTimeout,
			MaxOutputBytes: invoke.DefaultMaxOutputBytes,

			MaxBatchCalls:     api.DefaultMaxBatchCalls,
			TenantConcurrency: pipeline.DefaultTenantConcurrency,
			TenantCommands:    invoke.DefaultTenantCommands,
			IdempotencyTTL:    pipeline.DefaultKeyTTL,
			TenantLongPolls:   pipeline.DefaultMaxTenantPolls,
			WorkspaceBytes:    DefaultWorkspaceBytes,
			CPUWeight:         sandbox.DefaultCPUWeight,
		},
		Log:       Log{Level: DefaultLogLevel, Format: DefaultLogFormat},
		Approvals: Approvals{TTL: DefaultApprovalTTL, QuestionTTL: pipeline.DefaultQuestionTTL, MaxPending: pipeline.DefaultMaxPending},
		Sandbox: Sandbox{Mode: sandbox.ModeJail, UID: sandbox.DefaultUID, GID: sandbox.DefaultGID,
			MemoryBytes: sandbox.DefaultMemoryBytes, MaxProcesses: sandbox.DefaultMaxProcesses, CPUSeconds: sandbox.DefaultCPUSeconds,
			FileSizeBytes: sandbox.DefaultFileSizeBytes, OpenFiles: sandbox.DefaultOpenFiles, MemoryCgroup: true},
		Telemetry: Telemetry{SampleRatio: telemetry.DefaultSampleRatio},
	}
}

// applyAuditDefaults gives the defaults that depend on the driver.
func applyAuditDefaults(cfg *Config) {
	if cfg.Audit.DSN == "" && cfg.Audit.Driver == "sqlite" {
		cfg.Audit.DSN = DefaultAuditDSN
	}
}

var yamlLineErr = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseYAML returns the root mapping of the single document in data, or
// nil after recording why there is none.
func parseYAML(data []byte, p *problems) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.add(0, "", "file is empty")
		} else {
			addSyntaxError(p, err)
		}
		return nil
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		p.add(extra.Line, "", "several YAML documents; the config must be exactly one")
		return nil
	case !errors.Is(err, io.EOF):
		addSyntaxError(p, err)
		return nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		p.add(0, "", "file is empty")
		return nil
	}
	root := doc.Content[0]
	if isNull(root) {
		p.add(root.Line, "", "file is empty")
		return nil
	}
	if root.Kind != yaml.MappingNode {
		p.add(root.Line, "", "expected a mapping at the top level, got %s", describe(root))
		return nil
	}
	return root
}

func addSyntaxError(p *problems, err error) {
	if m := yamlLineErr.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		p.add(line, "", "invalid YAML: %s", m[2])
		return
	}
	p.add(0, "", "invalid YAML: %s", err)
}

// pathErrReason drops the path from an *fs.PathError: the caller already
// names the file.
func pathErrReason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
