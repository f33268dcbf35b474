package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper-case: FROM, COPY, RUN, ...
	args string
	line int
}

// stage is one build stage: its FROM and what follows it.
type stage struct {
	from, name string
	ins        []instruction
}

// parseDockerfile splits a Dockerfile into stages. It is deliberately
// simple: comments, blank lines and backslash continuations are handled;
// heredocs and parser directives other than the leading comment are not
// used by this repository's Dockerfile.
func parseDockerfile(text string) ([]stage, error) {
	var (
		stages  []stage
		pending strings.Builder
		start   int
	)
	lines := strings.Split(text, "\n")
	for i, raw := range lines {
		line := strings.TrimSpace(raw)
		if pending.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if pending.Len() > 0 && strings.HasPrefix(line, "#") {
			continue // a comment inside a continued instruction
		}
		if pending.Len() == 0 {
			start = i + 1
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			pending.WriteString(cont + " ")
			continue
		}
		pending.WriteString(line)
		full := pending.String()
		pending.Reset()

		cmd, args, _ := strings.Cut(full, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start}
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			s := stage{}
			for _, w := range f {
				if !strings.HasPrefix(w, "--") { // --platform=...
					s.from = w
					break
				}
			}
			if n := len(f); n >= 3 && strings.EqualFold(f[n-2], "AS") {
				s.name = f[n-1]
			}
			stages = append(stages, s)
			continue
		}
		if len(stages) == 0 {
			return nil, fmt.Errorf("line %d: %s before the first FROM", in.line, in.cmd)
		}
		stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
	}
	if pending.Len() > 0 {
		return nil, fmt.Errorf("line %d: the file ends inside a continued instruction", start)
	}
	if len(stages) == 0 {
		return nil, fmt.Errorf("no FROM")
	}
	return stages, nil
}

// last returns the arguments of the stage's last cmd instruction.
func (s stage) last(cmd string) (string, bool) {
	for i := len(s.ins) - 1; i >= 0; i-- {
		if s.ins[i].cmd == cmd {
			return s.ins[i].args, true
		}
	}
	return "", false
}

// all returns the arguments of every cmd instruction of the stage.
func (s stage) all(cmd string) []string {
	var out []string
	for _, in := range s.ins {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

// execForm decodes an exec-form (JSON array) ENTRYPOINT or CMD. The shell
// form would need /bin/sh, which the distroless image does not have.
func execForm(args string) ([]string, error) {
	var argv []string
	if err := json.Unmarshal([]byte(args), &argv); err != nil {
		return nil, fmt.Errorf("not exec form (a JSON array): %s", args)
	}
	return argv, nil
}

// nonRootUser reports why the final stage would run as root, or nil. The
// stage runs as its last USER; without one it inherits the base image's,
// which is non-root only for distroless ":nonroot" bases.
func nonRootUser(s stage) error {
	user, ok := s.last("USER")
	if !ok {
		if strings.HasPrefix(s.from, "gcr.io/distroless/") && strings.HasSuffix(s.from, ":nonroot") {
			return nil
		}
		return fmt.Errorf("no USER and base %s does not default to a non-root user", s.from)
	}
	name, _, _ := strings.Cut(user, ":")
	switch name {
	case "", "root", "0":
		return fmt.Errorf("USER %s is root", user)
	case "nonroot":
		if !strings.HasPrefix(s.from, "gcr.io/distroless/") {
			// Only distroless defines the name; elsewhere it must be numeric.
			return fmt.Errorf("USER nonroot is not defined in base %s; use 65532", s.from)
		}
		return nil
	}
	if !regexp.MustCompile(`^[1-9][0-9]*$`).MatchString(name) {
		return fmt.Errorf("USER %s: use nonroot (distroless) or a numeric id", user)
	}
	return nil
}

// configFlag returns the value of --config in argv ("--config X" or
// "--config=X").
func configFlag(argv []string) (string, bool) {
	for i, a := range argv {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			return v, true
		}
		if a == "--config" && i+1 < len(argv) {
			return argv[i+1], true
		}
	}
	return "", false
}

// copyInstr is a COPY from the build context or from another stage.
type copyInstr struct {
	from     string // --from stage, "" for the build context
	chown    string
	src      []string
	dst      string
	instrArg string
}

func parseCopy(args string) copyInstr {
	c := copyInstr{instrArg: args}
	var rest []string
	for _, f := range strings.Fields(args) {
		switch {
		case strings.HasPrefix(f, "--from="):
			c.from = strings.TrimPrefix(f, "--from=")
		case strings.HasPrefix(f, "--chown="):
			c.chown = strings.TrimPrefix(f, "--chown=")
		case strings.HasPrefix(f, "--"):
		default:
			rest = append(rest, f)
		}
	}
	if len(rest) > 0 {
		c.src, c.dst = rest[:len(rest)-1], rest[len(rest)-1]
	}
	return c
}

// readDockerfile parses the repository's Dockerfile.
func readDockerfile(t *testing.T) []stage {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	stages, err := parseDockerfile(string(data))
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stage(s); want a build stage and a final stage", len(stages))
	}
	return stages
}

func TestNonRootUserRefusesRootFinalStages(t *testing.T) {
	for _, tc := range []struct {
		name, dockerfile string
		ok               bool
	}{
		{"distroless nonroot tag", "FROM gcr.io/distroless/static-debian12:nonroot\n", true},
		{"distroless nonroot user", "FROM gcr.io/distroless/static-debian12\nUSER nonroot\n", true},
		{"scratch numeric user", "FROM scratch\nUSER 65532:65532\n", true},
		{"distroless root tag", "FROM gcr.io/distroless/static-debian12\n", false},
		{"scratch without user", "FROM scratch\n", false},
		{"explicit root", "FROM gcr.io/distroless/static-debian12:nonroot\nUSER root\n", false},
		{"uid 0", "FROM scratch\nUSER 0:0\n", false},
		{"last user wins", "FROM scratch\nUSER 65532\nUSER root\n", false},
		{"nonroot name on scratch", "FROM scratch\nUSER nonroot\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stages, err := parseDockerfile(tc.dockerfile)
			if err != nil {
				t.Fatal(err)
			}
			err = nonRootUser(stages[len(stages)-1])
			if (err == nil) != tc.ok {
				t.Fatalf("nonRootUser = %v; want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestParseDockerfileJoinsContinuationsAndNamesStages(t *testing.T) {
	stages, err := parseDockerfile("# c\nFROM --platform=$B golang:1.26 AS build\nRUN a \\\n  # inner comment\n  b\nFROM scratch\nCMD [\"x\"]\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(stages) != 2 || stages[0].from != "golang:1.26" || stages[0].name != "build" || stages[1].from != "scratch" {
		t.Fatalf("stages = %+v", stages)
	}
	if run, _ := stages[0].last("RUN"); strings.Join(strings.Fields(run), " ") != "a b" {
		t.Fatalf("RUN = %q; want a b", run)
	}
	if _, err := parseDockerfile("RUN x\n"); err == nil {
		t.Fatal("an instruction before FROM parsed")
	}
}

func TestDockerfileFinalStageIsDistrolessAndNonRoot(t *testing.T) {
	stages := readDockerfile(t)
	final := stages[len(stages)-1]
	if !strings.HasPrefix(final.from, "gcr.io/distroless/static") && final.from != "scratch" {
		t.Errorf("final stage FROM %s; want a static distroless base or scratch (the binary is static)", final.from)
	}
	if err := nonRootUser(final); err != nil {
		t.Error(err)
	}
	if _, ok := final.last("RUN"); ok {
		t.Error("the final stage RUNs a command; distroless has no shell to run it")
	}
	if ports := final.all("EXPOSE"); len(ports) != 1 || ports[0] != fmt.Sprint(gatewayPort) {
		t.Errorf("EXPOSE %v; want exactly %d", ports, gatewayPort)
	}
}

func TestDockerfileBuildsAStaticBinaryWithGoModsGo(t *testing.T) {
	stages := readDockerfile(t)
	build, final := stages[0], stages[len(stages)-1]

	goMod, err := os.ReadFile(filepath.Join(repoRoot(t), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+)\.(\d+)(?:\.\d+)?\s*$`).FindSubmatch(goMod)
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	wantTag := "golang:" + string(m[1]) + "." + string(m[2])
	if build.from != wantTag && !strings.HasPrefix(build.from, wantTag+".") && !strings.HasPrefix(build.from, wantTag+"-") {
		t.Errorf("build stage FROM %s; want %s[.patch] to match go.mod", build.from, wantTag)
	}

	var out string
	for _, run := range build.all("RUN") {
		if !strings.Contains(run, "go build") {
			continue
		}
		for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "./cmd/gateway"} {
			if !strings.Contains(run, want) {
				t.Errorf("go build step lacks %s: %s", want, run)
			}
		}
		if f := regexp.MustCompile(`-o\s+(\S+)`).FindStringSubmatch(run); f != nil {
			out = f[1]
		}
	}
	if out == "" {
		t.Fatal("no `go build -o FILE` step in the build stage")
	}

	// The final stage runs exactly that binary.
	entry, ok := final.last("ENTRYPOINT")
	if !ok {
		t.Fatal("final stage has no ENTRYPOINT")
	}
	argv, err := execForm(entry)
	if err != nil {
		t.Fatalf("ENTRYPOINT: %v", err)
	}
	copied := false
	for _, c := range final.all("COPY") {
		cp := parseCopy(c)
		if cp.from == build.name && len(cp.src) == 1 && cp.src[0] == out && len(argv) > 0 && cp.dst == argv[0] {
			copied = true
		}
	}
	if !copied {
		t.Errorf("ENTRYPOINT %v is not the binary the build stage writes (%s) copied from stage %q", argv, out, build.name)
	}
}

func TestDockerfileCMDServesTheConfigComposeMounts(t *testing.T) {
	stages := readDockerfile(t)
	final := stages[len(stages)-1]
	cmd, ok := final.last("CMD")
	if !ok {
		t.Fatal("final stage has no CMD")
	}
	argv, err := execForm(cmd)
	if err != nil {
		t.Fatalf("CMD: %v", err)
	}
	if len(argv) == 0 || argv[0] != "serve" {
		t.Errorf("CMD %v; want serve", argv)
	}
	path, ok := configFlag(argv)
	if !ok {
		t.Fatalf("CMD %v has no --config", argv)
	}

	gw := composeService(t, loadCompose(t), "gateway")
	m, ok := mountAt(gw, path)
	if !ok {
		t.Fatalf("compose mounts nothing at %s, the config CMD serves", path)
	}
	if !m.ReadOnly || filepath.Clean(m.Source) != filepath.Join(repoRoot(t), "deploy", "gateway.yaml") {
		t.Errorf("mount at %s = %s (read-only %v); want ./deploy/gateway.yaml read-only", path, m.Source, m.ReadOnly)
	}
	if env := gw.Environment["TOOLGATE_CONFIG"]; env == nil || *env != path {
		t.Errorf("gateway TOOLGATE_CONFIG = %v; want %s so `gateway token` finds the same file", env, path)
	}

	// The image bakes the same file in at the same place, so the image
	// alone starts with what compose mounts.
	baked := false
	for _, c := range final.all("COPY") {
		cp := parseCopy(c)
		if cp.from == "" && len(cp.src) == 1 && cp.src[0] == "deploy/gateway.yaml" && cp.dst == path {
			baked = true
		}
	}
	if !baked {
		t.Errorf("the final stage does not COPY deploy/gateway.yaml to %s", path)
	}
}
