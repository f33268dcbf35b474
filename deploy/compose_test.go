// Package deploy holds no code: its tests check that docker-compose.yaml,
// the Dockerfile, deploy/gateway.yaml and deploy/prometheus.yml agree with
// each other and with the gateway's configuration loader. No Docker engine
// is needed; the compose file is loaded with the compose-spec Go loader,
// the same one `docker compose` uses.
package deploy

import (
	"context"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"
)

// gatewayPort is the port the gateway listens on inside its container.
const gatewayPort = 8080

// repoRoot is the repository root: the compose project's folder and the
// image's build context.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// loadCompose loads docker-compose.yaml as `docker compose` would, paths
// resolved against the repository root. The process environment is left
// out on purpose: nothing in the file may depend on it.
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	root := repoRoot(t)
	opts, err := cli.NewProjectOptions(
		[]string{filepath.Join(root, "docker-compose.yaml")},
		cli.WithWorkingDirectory(root),
		cli.WithResolvedPaths(true),
	)
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("docker-compose.yaml does not load: %v", err)
	}
	return p
}

func composeService(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, ok := p.Services[name]
	if !ok {
		t.Fatalf("docker-compose.yaml has no service %q", name)
	}
	return s
}

// mountAt returns the service's volume mounted at target.
func mountAt(s types.ServiceConfig, target string) (types.ServiceVolumeConfig, bool) {
	for _, v := range s.Volumes {
		if filepath.Clean(v.Target) == filepath.Clean(target) {
			return v, true
		}
	}
	return types.ServiceVolumeConfig{}, false
}

// secretTarget is where a service secret appears in the container.
func secretTarget(s types.ServiceSecretConfig) string {
	switch {
	case s.Target == "":
		return "/run/secrets/" + s.Source
	case filepath.IsAbs(s.Target):
		return s.Target
	}
	return "/run/secrets/" + s.Target
}

// servedConfigPath is the config file the image's CMD serves.
func servedConfigPath(t *testing.T) string {
	t.Helper()
	stages := readDockerfile(t)
	cmd, _ := stages[len(stages)-1].last("CMD")
	argv, err := execForm(cmd)
	if err != nil {
		t.Fatalf("CMD: %v", err)
	}
	path, ok := configFlag(argv)
	if !ok {
		t.Fatalf("CMD %v has no --config", argv)
	}
	return path
}

func TestComposeGatewayIsBuiltFromThisRepository(t *testing.T) {
	gw := composeService(t, loadCompose(t), "gateway")
	if gw.Image != "toolgate/gateway:dev" {
		t.Errorf("gateway image = %q; want toolgate/gateway:dev", gw.Image)
	}
	if gw.Build == nil {
		t.Fatal("gateway has no build section: `docker compose up --build` would pull instead of building")
	}
	if filepath.Clean(gw.Build.Context) != repoRoot(t) {
		t.Errorf("build context = %s; want the repository root", gw.Build.Context)
	}
	if df := gw.Build.Dockerfile; df != "" && df != "Dockerfile" {
		t.Errorf("build dockerfile = %s; want the repository's Dockerfile", df)
	}
}

func TestComposePublishesTheGatewayPort(t *testing.T) {
	gw := composeService(t, loadCompose(t), "gateway")
	for _, p := range gw.Ports {
		if p.Target == gatewayPort && p.Published == strconv.Itoa(gatewayPort) && (p.Protocol == "" || p.Protocol == "tcp") {
			return
		}
	}
	t.Fatalf("gateway ports %+v; want %d:%d/tcp", gw.Ports, gatewayPort, gatewayPort)
}

func TestComposeMountsConfigAndPoliciesReadOnlyWhereTheGatewayReadsThem(t *testing.T) {
	p := loadCompose(t)
	gw := composeService(t, p, "gateway")
	root := repoRoot(t)
	cfgPath := servedConfigPath(t)
	cfg := containerConfig(t, p, "")

	for _, tc := range []struct {
		what, target, source string
	}{
		{"the config the image's CMD serves", cfgPath, filepath.Join(root, "deploy", "gateway.yaml")},
		{"the config's policy.dir", cfg.inside(cfg.Policy.Dir), filepath.Join(root, "policies")},
	} {
		t.Run(tc.what, func(t *testing.T) {
			m, ok := mountAt(gw, tc.target)
			if !ok {
				t.Fatalf("nothing mounted at %s", tc.target)
			}
			if m.Type != types.VolumeTypeBind || filepath.Clean(m.Source) != tc.source {
				t.Errorf("%s mounts %s %s; want a bind of %s", tc.target, m.Type, m.Source, tc.source)
			}
			if !m.ReadOnly {
				t.Errorf("%s is mounted read-write; the gateway must not be able to change it", tc.target)
			}
		})
	}
}

func TestComposeGatewayWaitsForHealthyPostgres(t *testing.T) {
	gw := composeService(t, loadCompose(t), "gateway")
	dep, ok := gw.DependsOn["postgres"]
	if !ok {
		t.Fatal("gateway does not depend on postgres")
	}
	if dep.Condition != types.ServiceConditionHealthy {
		t.Errorf("gateway depends on postgres with condition %q; want %s (migrations run at start)", dep.Condition, types.ServiceConditionHealthy)
	}
}

func TestComposeServicesHaveHealthChecks(t *testing.T) {
	p := loadCompose(t)
	for _, tc := range []struct {
		service, image, probe string
	}{
		{"postgres", "postgres:", "pg_isready"},
		{"prometheus", "prom/prometheus", "/-/healthy"},
	} {
		t.Run(tc.service, func(t *testing.T) {
			s := composeService(t, p, tc.service)
			if !strings.HasPrefix(s.Image, tc.image) {
				t.Errorf("%s image = %q; want %s…", tc.service, s.Image, tc.image)
			}
			hc := s.HealthCheck
			if hc == nil || hc.Disable || len(hc.Test) < 2 {
				t.Fatalf("%s has no health check", tc.service)
			}
			if kind := hc.Test[0]; kind != "CMD" && kind != "CMD-SHELL" {
				t.Errorf("%s health check %v does not run a command", tc.service, hc.Test)
			}
			if !strings.Contains(strings.Join(hc.Test[1:], " "), tc.probe) {
				t.Errorf("%s health check %v does not use %s", tc.service, hc.Test, tc.probe)
			}
		})
	}
}

func TestComposeGatewayConfigPointsAtThePostgresService(t *testing.T) {
	p := loadCompose(t)
	pg := composeService(t, p, "postgres")
	cfg := containerConfig(t, p, "")

	if cfg.Audit.Driver != "postgres" {
		t.Fatalf("audit.driver = %q; want postgres", cfg.Audit.Driver)
	}
	u, err := url.Parse(cfg.Audit.DSN)
	if err != nil {
		t.Fatalf("audit.dsn does not parse as a URL")
	}
	env := func(k string) string {
		if v := pg.Environment[k]; v != nil {
			return *v
		}
		return ""
	}
	pass, _ := u.User.Password()
	for _, c := range []struct{ what, got, want string }{
		{"host (the compose service)", u.Hostname(), "postgres"},
		{"port", u.Port(), "5432"},
		{"user (POSTGRES_USER)", u.User.Username(), env("POSTGRES_USER")},
		{"password (POSTGRES_PASSWORD)", pass, env("POSTGRES_PASSWORD")},
		{"database (POSTGRES_DB)", strings.TrimPrefix(u.Path, "/"), env("POSTGRES_DB")},
	} {
		if c.got != c.want || c.want == "" {
			t.Errorf("audit.dsn %s = %q; want %q", c.what, c.got, c.want)
		}
	}

	_, port, err := net.SplitHostPort(cfg.Listen)
	if err != nil || port != strconv.Itoa(gatewayPort) {
		t.Errorf("listen = %q; want port %d, the one compose publishes", cfg.Listen, gatewayPort)
	}
	if host, _, _ := net.SplitHostPort(cfg.Listen); host == "127.0.0.1" || host == "localhost" || host == "::1" {
		t.Errorf("listen = %q: loopback inside a container is unreachable from the published port", cfg.Listen)
	}
}

func TestComposeWorkspacesPersistOnANamedVolume(t *testing.T) {
	p := loadCompose(t)
	gw := composeService(t, p, "gateway")
	cfg := containerConfig(t, p, "")
	for name, tn := range cfg.Tenants {
		ws := cfg.inside(tn.Workspace)
		ok := slices.ContainsFunc(gw.Volumes, func(v types.ServiceVolumeConfig) bool {
			return v.Type == types.VolumeTypeVolume && !v.ReadOnly && within(ws, v.Target)
		})
		if !ok {
			t.Errorf("tenant %s workspace %s is not on a writable named volume: it would be lost with the container (or be read-only)", name, ws)
		}
	}
}

func TestComposeHS256SecretIsAComposeSecretKeptOutOfTheImage(t *testing.T) {
	p := loadCompose(t)
	gw := composeService(t, p, "gateway")
	cfg := containerConfig(t, p, "")
	want := cfg.inside(cfg.Auth.JWT.HS256SecretFile)
	if want == "" {
		t.Skip("deploy/gateway.yaml uses no HS256 secret")
	}
	var src string
	for _, s := range gw.Secrets {
		if secretTarget(s) == want {
			src = p.Secrets[s.Source].File
		}
	}
	if src == "" {
		t.Fatalf("auth.jwt.hs256_secret_file %s is not where a gateway secret is mounted", want)
	}
	secrets := filepath.Join(repoRoot(t), "deploy", "secrets")
	if !within(filepath.Clean(src), secrets) {
		t.Errorf("secret file %s is outside deploy/secrets", src)
	}
	// The build context must never carry it.
	ignore, err := os.ReadFile(filepath.Join(repoRoot(t), ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	excluded := false
	for _, line := range strings.Split(string(ignore), "\n") {
		if strings.Trim(strings.TrimSpace(line), "/") == "deploy/secrets" {
			excluded = true
		}
	}
	if !excluded {
		t.Error(".dockerignore does not exclude deploy/secrets: a dev secret would be sent to the image build")
	}
}

// promConfig is the part of prometheus.yml the test reads.
type promConfig struct {
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		MetricsPath   string `yaml:"metrics_path"`
		Scheme        string `yaml:"scheme"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

func TestComposePrometheusScrapesTheGatewayMetrics(t *testing.T) {
	p := loadCompose(t)
	prom := composeService(t, p, "prometheus")

	// The file Prometheus reads: --config.file, else the image's default.
	path := "/etc/prometheus/prometheus.yml"
	for i, a := range prom.Command {
		if v, ok := strings.CutPrefix(a, "--config.file="); ok {
			path = v
		} else if a == "--config.file" && i+1 < len(prom.Command) {
			path = prom.Command[i+1]
		}
	}
	m, ok := mountAt(prom, path)
	if !ok {
		t.Fatalf("prometheus reads %s but nothing is mounted there", path)
	}
	if filepath.Clean(m.Source) != filepath.Join(repoRoot(t), "deploy", "prometheus.yml") || !m.ReadOnly {
		t.Errorf("%s mounts %s (read-only %v); want ./deploy/prometheus.yml read-only", path, m.Source, m.ReadOnly)
	}

	data, err := os.ReadFile(m.Source)
	if err != nil {
		t.Fatal(err)
	}
	var pc promConfig
	if err := yaml.Unmarshal(data, &pc); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	target := net.JoinHostPort("gateway", strconv.Itoa(gatewayPort))
	for _, sc := range pc.ScrapeConfigs {
		mp := sc.MetricsPath
		if mp == "" {
			mp = "/metrics" // Prometheus's default
		}
		if mp != "/metrics" || (sc.Scheme != "" && sc.Scheme != "http") {
			continue
		}
		for _, st := range sc.StaticConfigs {
			if slices.Contains(st.Targets, target) {
				return
			}
		}
	}
	t.Fatalf("prometheus.yml has no job scraping http://%s/metrics", target)
}

// within reports whether path is dir or lies inside it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
