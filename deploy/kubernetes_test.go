package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kjson "sigs.k8s.io/json"
	k8syaml "sigs.k8s.io/yaml"

	"github.com/toolgate/toolgate/internal/config"
)

// k8sDir holds the Kubernetes manifests.
const k8sDir = "kubernetes"

// manifests is every object of deploy/kubernetes, each decoded strictly
// into its Kubernetes API type: an unknown or misspelt field, a duplicate
// field or a value of the wrong type fails, as `kubectl apply
// --validate=strict` would.
type manifests struct {
	namespaces  []*corev1.Namespace
	configMaps  map[string]*corev1.ConfigMap
	secrets     map[string]*corev1.Secret
	pvcs        map[string]*corev1.PersistentVolumeClaim
	services    []*corev1.Service
	pdbs        []*policyv1.PodDisruptionBudget
	deployments []*appsv1.Deployment
	all         []metav1.Object
}

// decodeStrict decodes one YAML document into obj as the API server's
// strict field validation does: duplicate keys, unknown fields and field
// names in the wrong case are errors (encoding/json alone would match
// "targetport" to targetPort case-insensitively).
func decodeStrict(doc []byte, obj any) error {
	js, err := k8syaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(js, obj)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

func loadManifests(t *testing.T) manifests {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(k8sDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/%s: %v", k8sDir, err)
	}
	m := manifests{configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}, pvcs: map[string]*corev1.PersistentVolumeClaim{}}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range splitYAML(data) {
			if err := m.add(doc); err != nil {
				t.Errorf("%s (document %d): %v", f, i+1, err)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return m
}

// splitYAML splits a multi-document YAML stream, dropping empty documents.
func splitYAML(data []byte) [][]byte {
	var out [][]byte
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			out = append(out, doc)
		}
	}
	return out
}

func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			b.Write(l)
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

func (m *manifests) add(doc []byte) error {
	var tm metav1.TypeMeta
	if err := k8syaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	var obj interface {
		metav1.Object
	}
	switch gvk := tm.APIVersion + " " + tm.Kind; gvk {
	case "v1 Namespace":
		o := &corev1.Namespace{}
		obj, m.namespaces = o, append(m.namespaces, o)
	case "v1 ConfigMap":
		o := &corev1.ConfigMap{}
		obj = o
		defer func() { m.configMaps[o.Name] = o }()
	case "v1 Secret":
		o := &corev1.Secret{}
		obj = o
		defer func() { m.secrets[o.Name] = o }()
	case "v1 PersistentVolumeClaim":
		o := &corev1.PersistentVolumeClaim{}
		obj = o
		defer func() { m.pvcs[o.Name] = o }()
	case "v1 Service":
		o := &corev1.Service{}
		obj, m.services = o, append(m.services, o)
	case "policy/v1 PodDisruptionBudget":
		o := &policyv1.PodDisruptionBudget{}
		obj, m.pdbs = o, append(m.pdbs, o)
	case "apps/v1 Deployment":
		o := &appsv1.Deployment{}
		obj, m.deployments = o, append(m.deployments, o)
	default:
		return fmt.Errorf("unexpected object %q: teach this test its API type", gvk)
	}
	if err := decodeStrict(doc, obj); err != nil {
		return err
	}
	m.all = append(m.all, obj)
	return nil
}

// A typo in a manifest fails: strict decoding refuses unknown, duplicate
// and mistyped fields.
func TestStrictDecodingRefusesTypos(t *testing.T) {
	for name, doc := range map[string]string{
		"misspelt field":  "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replica: 3\n",
		"nested typo":     "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  ports: [{port: 80, targetport: http}]\n",
		"duplicate field": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: b}\ndata: {c: d}\n",
		"wrong type":      "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: x}\nspec: {maxUnavailable: {a: 1}}\n",
		"probe typo":      "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      containers: [{name: g, readinessProbe: {httpget: {path: /readyz}}}]\n",
	} {
		var m manifests
		m.configMaps, m.secrets, m.pvcs = map[string]*corev1.ConfigMap{}, map[string]*corev1.Secret{}, map[string]*corev1.PersistentVolumeClaim{}
		if err := m.add([]byte(doc)); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

// The same holds for the shipped files: a typo slipped into any of them
// fails to decode.
func TestATypoInAShippedManifestFails(t *testing.T) {
	for file, typo := range map[string][2]string{
		"deployment.yaml":      {"readinessProbe:", "readinesProbe:"},
		"service.yaml":         {"targetPort:", "targetport:"},
		"service-console.yaml": {"sessionAffinity:", "sessionAfinity:"},
		"pdb.yaml":             {"maxUnavailable:", "maxUnavailble:"},
		"configmap.yaml":       {"data:", "dat:"},
		"pvc.yaml":             {"accessModes:", "accesModes:"},
		"secret.example.yaml":  {"stringData:", "stringdata:"},
	} {
		data, err := os.ReadFile(filepath.Join(k8sDir, file))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(data, []byte(typo[0])) {
			t.Fatalf("%s has no %s", file, typo[0])
		}
		bad := bytes.Replace(data, []byte(typo[0]), []byte(typo[1]), 1)
		m := manifests{configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}, pvcs: map[string]*corev1.PersistentVolumeClaim{}}
		failed := false
		for _, doc := range splitYAML(bad) {
			failed = failed || m.add(doc) != nil
		}
		if !failed {
			t.Errorf("%s with %s misspelt %s decoded", file, typo[0], typo[1])
		}
	}
}

func TestKubernetesManifestsDecodeStrictlyAndAreComplete(t *testing.T) {
	m := loadManifests(t)
	if len(m.deployments) != 1 || len(m.services) != 2 || len(m.pdbs) != 1 || len(m.namespaces) != 1 {
		t.Fatalf("want one Namespace, Deployment and PodDisruptionBudget and two Services (API, console); have %d, %d, %d, %d",
			len(m.namespaces), len(m.deployments), len(m.services), len(m.pdbs))
	}
	ns := m.namespaces[0].Name
	for _, o := range m.all {
		if _, isNS := o.(*corev1.Namespace); !isNS && o.GetNamespace() != ns {
			t.Errorf("%s is in namespace %q, not %q", o.GetName(), o.GetNamespace(), ns)
		}
	}
}

// gatewayPod is the Deployment's pod template and its gateway container.
func gatewayPod(t *testing.T, m manifests) (*appsv1.Deployment, *corev1.PodSpec, *corev1.Container) {
	t.Helper()
	d := m.deployments[0]
	spec := &d.Spec.Template.Spec
	for i := range spec.Containers {
		if spec.Containers[i].Name == "gateway" {
			return d, spec, &spec.Containers[i]
		}
	}
	t.Fatal("the Deployment has no container named gateway")
	return nil, nil, nil
}

func TestKubernetesReplicasAreIdenticalAndProbed(t *testing.T) {
	m := loadManifests(t)
	d, spec, gw := gatewayPod(t, m)
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		t.Fatalf("replicas %v: want several", d.Spec.Replicas)
	}
	// No per-pod configuration: nothing from the downward API, no
	// StatefulSet ordinal, every config and secret shared by all pods.
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		for _, e := range c.Env {
			if e.ValueFrom != nil && (e.ValueFrom.FieldRef != nil || e.ValueFrom.ResourceFieldRef != nil) {
				t.Errorf("container %s: env %s comes from the pod itself: replicas would differ", c.Name, e.Name)
			}
		}
		if len(c.EnvFrom) > 0 {
			t.Errorf("container %s: envFrom hides what configures it", c.Name)
		}
	}
	for _, v := range spec.Volumes {
		if v.DownwardAPI != nil || v.HostPath != nil {
			t.Errorf("volume %s is per pod or per node", v.Name)
		}
	}
	port := containerPort(t, gw, "http")
	for name, c := range map[string]struct {
		probe *corev1.Probe
		path  string
	}{"readiness": {gw.ReadinessProbe, "/readyz"}, "liveness": {gw.LivenessProbe, "/healthz"}} {
		p := c.probe
		if p == nil || p.HTTPGet == nil {
			t.Fatalf("%s probe: want an httpGet probe on %s", name, c.path)
		}
		if p.HTTPGet.Path != c.path || p.HTTPGet.Port != intstr.FromString("http") {
			t.Errorf("%s probe: %s on %v, want %s on the http port", name, p.HTTPGet.Path, p.HTTPGet.Port.String(), c.path)
		}
	}
	// The Service and the PodDisruptionBudget select exactly these pods.
	labels := d.Spec.Template.Labels
	sel, err := metav1.LabelSelectorAsMap(d.Spec.Selector)
	if err != nil || !subset(sel, labels) {
		t.Fatalf("the Deployment's selector %v does not match its pods %v", sel, labels)
	}
	affinity := map[string]corev1.ServiceAffinity{}
	for _, svc := range m.services {
		if len(svc.Spec.Selector) == 0 || !subset(svc.Spec.Selector, labels) {
			t.Errorf("Service %s selector %v does not select the pods %v", svc.Name, svc.Spec.Selector, labels)
		}
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort != intstr.FromString("http") {
			t.Errorf("Service %s ports %v: want one, to the http port (%d)", svc.Name, svc.Spec.Ports, port)
		}
		affinity[svc.Name] = svc.Spec.SessionAffinity
	}
	// Calls are balanced per request; console browsers keep to the replica
	// that holds their session (sessions live in its memory).
	if a, ok := affinity["toolgate"]; !ok || (a != "" && a != corev1.ServiceAffinityNone) {
		t.Errorf("Service toolgate: affinity %q, want none", a)
	}
	if a := affinity["toolgate-console"]; a != corev1.ServiceAffinityClientIP {
		t.Errorf("Service toolgate-console: affinity %q, want ClientIP", a)
	}
	pdb := m.pdbs[0]
	psel, err := metav1.LabelSelectorAsMap(pdb.Spec.Selector)
	if err != nil || len(psel) == 0 || !subset(psel, labels) {
		t.Errorf("PodDisruptionBudget selector %v does not select the pods %v", psel, labels)
	}
	switch {
	case pdb.Spec.MaxUnavailable != nil:
		if n := pdb.Spec.MaxUnavailable.IntValue(); n < 1 || n >= int(*d.Spec.Replicas) {
			t.Errorf("maxUnavailable %v: want 1 to replicas-1", pdb.Spec.MaxUnavailable)
		}
	case pdb.Spec.MinAvailable != nil:
		if n := pdb.Spec.MinAvailable.IntValue(); n < 1 || n >= int(*d.Spec.Replicas) {
			t.Errorf("minAvailable %v: want 1 to replicas-1, or drains block", pdb.Spec.MinAvailable)
		}
	default:
		t.Error("the PodDisruptionBudget bounds nothing")
	}
	if d.Spec.Strategy.RollingUpdate == nil || d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue() != 0 {
		t.Error("a rolling update may take a replica down before its successor is ready")
	}
}

func containerPort(t *testing.T, c *corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port %q", c.Name, name)
	return 0
}

func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// Every container runs unprivileged: non-root, read-only root filesystem,
// no capabilities, no privilege escalation, the runtime's seccomp profile.
func TestKubernetesPodsAreUnprivileged(t *testing.T) {
	m := loadManifests(t)
	_, spec, _ := gatewayPod(t, m)
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Fatalf("pod securityContext %+v: want runAsNonRoot, a non-zero runAsUser and the RuntimeDefault seccomp profile", psc)
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Error("the pod shares a host namespace")
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("the gateway needs no Kubernetes API token")
	}
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.Privileged != nil && *sc.Privileged || sc.Capabilities == nil ||
			!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 ||
			sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			t.Errorf("container %s securityContext %+v: want no escalation, read-only root, all capabilities dropped, non-root", c.Name, sc)
		}
		if c.Resources.Limits.Memory().IsZero() {
			t.Errorf("container %s has no memory limit", c.Name)
		}
	}
}

// The ConfigMap's gateway.yaml loads with the gateway's own loader, as the
// container sees it: the image's files (Dockerfile COPY), the ConfigMap,
// the Secret's items and the volumes at their mount paths. Its secrets
// come from the Secret, never from the ConfigMap.
func TestKubernetesConfigLoadsAsThePodSeesIt(t *testing.T) {
	m := loadManifests(t)
	_, spec, gw := gatewayPod(t, m)
	c := containerFS{t: t, root: t.TempDir()}

	// The image.
	for _, args := range readDockerfile(t)[len(readDockerfile(t))-1].all("COPY") {
		cp := parseCopy(args)
		if cp.from != "" {
			continue
		}
		for _, src := range cp.src {
			hostSrc := filepath.Join(repoRoot(t), filepath.FromSlash(src))
			fi, err := os.Stat(hostSrc)
			if err != nil {
				t.Fatal(err)
			}
			dst := cp.dst
			if strings.HasSuffix(dst, "/") && !fi.IsDir() {
				dst = path.Join(dst, path.Base(src))
			}
			c.bind(path.Clean(dst), hostSrc)
		}
	}
	// The volumes, as mounted into the gateway container.
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	secretKeys := map[string]string{ // stand-ins of the documented shapes
		"jwt-hs256": strings.Repeat("5e", 32) + "\n", "pg-password": "s3cret",
	}
	for _, vm := range gw.VolumeMounts {
		v, ok := volumes[vm.Name]
		if !ok {
			t.Fatalf("mount %s names no volume", vm.Name)
		}
		switch {
		case v.ConfigMap != nil:
			cm, ok := m.configMaps[v.ConfigMap.Name]
			if !ok {
				t.Fatalf("volume %s: no ConfigMap %s in the manifests", v.Name, v.ConfigMap.Name)
			}
			c.empty(vm.MountPath)
			for k, val := range cm.Data {
				must(t, os.WriteFile(filepath.Join(c.host(vm.MountPath), k), []byte(val), 0o644))
			}
		case v.Secret != nil:
			sec, ok := m.secrets[v.Secret.SecretName]
			if !ok {
				t.Fatalf("volume %s: no Secret %s in the manifests", v.Name, v.Secret.SecretName)
			}
			c.empty(vm.MountPath)
			for _, it := range v.Secret.Items {
				if _, ok := sec.StringData[it.Key]; !ok {
					t.Fatalf("volume %s: Secret %s has no key %s", v.Name, sec.Name, it.Key)
				}
				must(t, os.WriteFile(filepath.Join(c.host(vm.MountPath), it.Path), []byte(secretKeys[it.Key]), 0o440))
			}
		case v.EmptyDir != nil || v.PersistentVolumeClaim != nil:
			if v.PersistentVolumeClaim != nil {
				if _, ok := m.pvcs[v.PersistentVolumeClaim.ClaimName]; !ok {
					t.Fatalf("volume %s: no PersistentVolumeClaim %s", v.Name, v.PersistentVolumeClaim.ClaimName)
				}
			}
			c.empty(vm.MountPath)
		default:
			t.Fatalf("volume %s: the mirror does not model its type", v.Name)
		}
	}
	// What the signing-key init container leaves in the shared folder.
	keyDir := ""
	for _, vm := range gw.VolumeMounts {
		if volumes[vm.Name].EmptyDir != nil && volumes[vm.Name].EmptyDir.Medium == corev1.StorageMediumMemory {
			keyDir = vm.MountPath
		}
	}

	// The config the container's args name.
	i := slices.Index(gw.Args, "--config")
	if i < 0 || i+1 >= len(gw.Args) || gw.Args[0] != "serve" {
		t.Fatalf("args %v: want serve --config FILE", gw.Args)
	}
	served := gw.Args[i+1]
	data, err := os.ReadFile(c.host(served))
	if err != nil {
		t.Fatalf("the pod has no %s (the config its args name): %v", served, err)
	}
	var raw struct {
		Audit struct {
			DSN            string `yaml:"dsn"`
			SigningKeyFile string `yaml:"signing_key_file"`
		} `yaml:"audit"`
		MCP struct {
			RequestStateKeyFile string `yaml:"request_state_key_file"`
		} `yaml:"mcp"`
	}
	must(t, yaml.Unmarshal(data, &raw))
	if keyDir == "" || path.Dir(raw.Audit.SigningKeyFile) != keyDir {
		t.Fatalf("audit.signing_key_file %s is not in the key folder the init container fills (%s)", raw.Audit.SigningKeyFile, keyDir)
	}
	// Every replica must hold the same requestState key: from the Secret,
	// not created per pod (the key folder is read-only to the gateway).
	if path.Dir(raw.MCP.RequestStateKeyFile) != keyDir {
		t.Fatalf("mcp.request_state_key_file %q is not in the key folder the init container fills (%s)", raw.MCP.RequestStateKeyFile, keyDir)
	}
	var copied string               // what the init containers run
	fromSecret := map[string]bool{} // the Secret items they mount
	for _, ic := range spec.InitContainers {
		copied += strings.Join(append(append([]string{}, ic.Command...), ic.Args...), " ")
		for _, vm := range ic.VolumeMounts {
			if v := volumes[vm.Name]; v.Secret != nil {
				for _, it := range v.Secret.Items {
					fromSecret[it.Path] = true
				}
			}
		}
	}
	for _, f := range []string{raw.Audit.SigningKeyFile, raw.MCP.RequestStateKeyFile} {
		if !fromSecret[path.Base(f)] || !strings.Contains(copied, "/"+path.Base(f)) {
			t.Errorf("no init container copies %s from the Secret into the key folder", path.Base(f))
		}
	}
	// A signing key as `gateway serve` creates it, so that Load sees a key
	// file (Load checks paths; the gateway opens the key at start), and a
	// requestState key as `openssl rand -hex 32` makes it.
	must(t, os.WriteFile(c.host(raw.Audit.SigningKeyFile), []byte("stand-in\n"), 0o600))
	must(t, os.WriteFile(c.host(raw.MCP.RequestStateKeyFile), []byte(strings.Repeat("5e", 32)+"\n"), 0o600))

	var doc yaml.Node
	must(t, yaml.Unmarshal(data, &doc))
	moveAbsolutePaths(&doc, c.root)
	out, err := yaml.Marshal(&doc)
	must(t, err)
	file := filepath.Join(t.TempDir(), "gateway.yaml")
	must(t, os.WriteFile(file, out, 0o644))
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatalf("%s does not load as the pod sees it:\n%v", served, err)
	}
	if cfg.Audit.Driver != "postgres" {
		t.Errorf("audit.driver %q: replicas share PostgreSQL", cfg.Audit.Driver)
	}
	if _, port, _ := strings.Cut(cfg.Listen, ":"); port != fmt.Sprint(containerPort(t, gw, "http")) {
		t.Errorf("listen %s is not the container's http port", cfg.Listen)
	}
	if got := c.inside(cfg.Auth.JWT.HS256SecretFile); !strings.HasPrefix(got, "/var/run/secrets/toolgate/") {
		t.Errorf("hs256_secret_file %s is not from the Secret", got)
	}
	for name, ws := range cfg.Tenants {
		if !strings.HasPrefix(c.inside(ws.Workspace), "/var/lib/toolgate/workspaces/") {
			t.Errorf("tenant %s workspace %s is not on the shared volume", name, c.inside(ws.Workspace))
		}
	}

	// The password is not in the ConfigMap; the driver takes it from
	// PGPASSWORD, which comes from the Secret.
	u, err := url.Parse(raw.Audit.DSN)
	if err != nil {
		t.Fatal(err)
	}
	if _, has := u.User.Password(); has || strings.Contains(raw.Audit.DSN, "password") {
		t.Fatalf("audit.dsn carries a password: it belongs in the Secret")
	}
	var pg *corev1.EnvVar
	for i := range gw.Env {
		if gw.Env[i].Name == "PGPASSWORD" {
			pg = &gw.Env[i]
		}
	}
	if pg == nil || pg.ValueFrom == nil || pg.ValueFrom.SecretKeyRef == nil {
		t.Fatal("PGPASSWORD is not set from a Secret")
	}
	if sec, ok := m.secrets[pg.ValueFrom.SecretKeyRef.Name]; !ok || sec.StringData[pg.ValueFrom.SecretKeyRef.Key] == "" {
		t.Fatalf("PGPASSWORD names %s/%s, which the Secret does not have", pg.ValueFrom.SecretKeyRef.Name, pg.ValueFrom.SecretKeyRef.Key)
	}
	t.Setenv("PGPASSWORD", secretKeys["pg-password"])
	pcfg, err := pgxpool.ParseConfig(raw.Audit.DSN)
	if err != nil || pcfg.ConnConfig.Password != secretKeys["pg-password"] {
		t.Fatalf("the driver does not take the password from PGPASSWORD: %v", err)
	}
	// Nothing secret in the ConfigMap.
	for _, cm := range m.configMaps {
		for k, v := range cm.Data {
			for _, s := range []string{"hs256_secret:", "PRIVATE+KEY", "postgres://toolgate:"} {
				if strings.Contains(v, s) {
					t.Errorf("ConfigMap %s key %s holds %q", cm.Name, k, s)
				}
			}
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
