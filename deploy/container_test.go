package deploy

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/internal/config"
)

// containerFS mirrors the gateway container's filesystem under a temp dir,
// assembled the way the image and compose assemble it: the final stage's
// COPYs from the build context, then compose's bind mounts (symlinks to
// the host paths), named volumes and tmpfs (empty folders), and secrets
// (a stand-in development secret). Paths that only exist in the container
// then exist here too, under root, and nothing outside root is written.
type containerFS struct {
	t    *testing.T
	root string
}

// host maps a container path into the mirror.
func (c containerFS) host(p string) string {
	return filepath.Join(c.root, filepath.FromSlash(p))
}

// inside maps a mirror path back to the container path ("" stays "").
func (c containerFS) inside(p string) string {
	if p == "" {
		return ""
	}
	rel, err := filepath.Rel(c.root, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		c.t.Fatalf("%s is not a container path", p)
	}
	return "/" + filepath.ToSlash(rel)
}

// safeTarget returns where target lives in the mirror after checking that
// no folder on the way is a link out of it: a later mount must never
// write through an earlier bind into the repository.
func (c containerFS) safeTarget(target string) string {
	c.t.Helper()
	if !path.IsAbs(target) {
		c.t.Fatalf("container path %q is not absolute", target)
	}
	dst := c.host(target)
	parent := filepath.Dir(dst)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		c.t.Fatalf("%s: %v", target, err)
	}
	real, err := filepath.EvalSymlinks(parent)
	if err != nil {
		c.t.Fatal(err)
	}
	realRoot, _ := filepath.EvalSymlinks(c.root)
	if !within(real, realRoot) {
		c.t.Fatalf("%s would be placed inside a bind mount (%s); the mirror cannot model nested mounts", target, real)
	}
	if fi, err := os.Lstat(dst); err == nil {
		if fi.Mode()&os.ModeSymlink != 0 {
			err = os.Remove(dst) // the link only, never what it points to
		} else {
			err = os.RemoveAll(dst)
		}
		if err != nil {
			c.t.Fatal(err)
		}
	}
	return dst
}

// bind makes target show hostPath.
func (c containerFS) bind(target, hostPath string) {
	c.t.Helper()
	if err := os.Symlink(hostPath, c.safeTarget(target)); err != nil {
		c.t.Fatal(err)
	}
}

// empty makes target an empty, writable folder.
func (c containerFS) empty(target string) {
	c.t.Helper()
	if err := os.Mkdir(c.safeTarget(target), 0o755); err != nil {
		c.t.Fatal(err)
	}
}

// assembleGateway builds the mirror of the gateway service's container.
func assembleGateway(t *testing.T, p *types.Project) containerFS {
	t.Helper()
	c := containerFS{t: t, root: t.TempDir()}
	buildContext := repoRoot(t)

	stages := readDockerfile(t)
	for _, args := range stages[len(stages)-1].all("COPY") {
		cp := parseCopy(args)
		if cp.from != "" {
			continue // build outputs (the binary, empty state folders)
		}
		for _, src := range cp.src {
			hostSrc := filepath.Join(buildContext, filepath.FromSlash(src))
			fi, err := os.Stat(hostSrc)
			if err != nil {
				t.Fatalf("Dockerfile COPY %s: %v", args, err)
			}
			dst := cp.dst
			if strings.HasSuffix(dst, "/") && !fi.IsDir() {
				dst = path.Join(dst, path.Base(src))
			}
			c.bind(path.Clean(dst), hostSrc)
		}
	}

	gw := composeService(t, p, "gateway")
	for _, v := range gw.Volumes {
		switch v.Type {
		case types.VolumeTypeBind:
			c.bind(v.Target, v.Source)
		case types.VolumeTypeVolume, types.VolumeTypeTmpfs:
			c.empty(v.Target)
		default:
			t.Fatalf("gateway volume %s of type %s: the mirror does not model it", v.Target, v.Type)
		}
	}
	for _, tmp := range gw.Tmpfs {
		c.empty(strings.SplitN(tmp, ":", 2)[0])
	}
	for _, s := range gw.Secrets {
		// The real secret is made by hand and never committed; stand in a
		// development secret of the documented shape (openssl rand -hex 32).
		f := filepath.Join(t.TempDir(), "secret")
		if err := os.WriteFile(f, []byte(strings.Repeat("5e", 32)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		c.bind(secretTarget(s), f)
	}
	return c
}

// deployConfig is the config the gateway container serves, loaded by the
// real loader against the mirror.
type deployConfig struct {
	*config.Config
	containerFS
}

// containerConfig loads the config the image's CMD serves, as the gateway
// container of project sees it: every absolute path in it is moved into
// the mirror, then internal/config.Load checks it like `gateway serve`
// does. A non-empty dsn replaces audit.dsn.
func containerConfig(t *testing.T, p *types.Project, dsn string) deployConfig {
	t.Helper()
	c := assembleGateway(t, p)
	served := servedConfigPath(t)
	data, err := os.ReadFile(c.host(served))
	if err != nil {
		t.Fatalf("the gateway container has no %s (the config its CMD serves): %v", served, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", served, err)
	}
	moveAbsolutePaths(&doc, c.root)
	if dsn != "" {
		setKey(t, &doc, dsn, "audit", "dsn")
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(file, out, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatalf("%s does not load as the gateway container sees it:\n%v", served, err)
	}
	return deployConfig{Config: cfg, containerFS: c}
}

// moveAbsolutePaths prefixes every absolute-path value (mapping values and
// sequence items) with root.
func moveAbsolutePaths(n *yaml.Node, root string) {
	move := func(v *yaml.Node) {
		if v.Kind == yaml.ScalarNode && v.Tag == "!!str" && path.IsAbs(v.Value) {
			v.Value = filepath.Join(root, filepath.FromSlash(v.Value))
		}
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			moveAbsolutePaths(c, root)
		}
	case yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			move(n.Content[i])
			moveAbsolutePaths(n.Content[i], root)
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			move(c)
			moveAbsolutePaths(c, root)
		}
	}
}

// setKey sets the scalar at the key path (which must exist) to value.
func setKey(t *testing.T, doc *yaml.Node, value string, keys ...string) {
	t.Helper()
	n := doc
	if n.Kind == yaml.DocumentNode {
		n = n.Content[0]
	}
	for _, k := range keys {
		var next *yaml.Node
		for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			t.Fatalf("config has no %s", strings.Join(keys, "."))
		}
		n = next
	}
	n.Kind, n.Tag, n.Value = yaml.ScalarNode, "!!str", value
}

func TestDeployConfigLoadsAsTheContainerSeesIt(t *testing.T) {
	cfg := containerConfig(t, loadCompose(t), "")
	// Load already checked every folder exists where the image and compose
	// put it; these are the values compose relies on.
	for _, c := range []struct{ what, got, want string }{
		{"policy.dir", cfg.inside(cfg.Policy.Dir), "/etc/toolgate/policies"},
		{"audit.driver", cfg.Audit.Driver, "postgres"},
		{"listen", cfg.Listen, "0.0.0.0:8080"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q; want %q", c.what, c.got, c.want)
		}
	}
	if len(cfg.Tools.Builtin) == 0 {
		t.Error("tools.builtin is empty: the gateway would offer nothing")
	}
}

func TestMoveAbsolutePathsMovesOnlyPathValues(t *testing.T) {
	var doc yaml.Node
	src := "a: /x/y\nb: rel/z\nc: [/p, q]\nd: {e: /f}\n/g: h\nn: 5\nu: postgres://h/db\n"
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	moveAbsolutePaths(&doc, "/root")
	var got map[string]any
	if err := doc.Decode(&got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"a": "/root/x/y", "b": "rel/z", "c": []any{"/root/p", "q"},
		"d": map[string]any{"e": "/root/f"}, "/g": "h", "n": 5, "u": "postgres://h/db",
	}
	for k, w := range want {
		if g := got[k]; !equalYAML(g, w) {
			t.Errorf("%s = %#v; want %#v", k, g, w)
		}
	}
}

func equalYAML(a, b any) bool {
	ma, _ := yaml.Marshal(a)
	mb, _ := yaml.Marshal(b)
	return string(ma) == string(mb)
}
