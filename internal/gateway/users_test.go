package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/config"
)

// The command jail is attacked both as the gateway a root operator runs
// (jails as sandbox.uid) and as the non-root gateway
// docs/security-model.md recommends (jails as the gateway's own user, in
// user namespaces of its own, without capabilities). As root,
// asGatewayUsers runs a test in both forms: the second by running this
// very test again in a child process of this test binary as nonRootUID.

// httpClient is the client of tests that talk to a gateway in another
// process.
var httpClient = http.Client{Timeout: 60 * time.Second}

// nonRootUID is the user of a non-root gateway in the tests: a user no
// other part of the tests runs as (the jails of a root gateway run as
// 65534).
const nonRootUID = 65533

// envChild marks the child process that runs a test as nonRootUID.
const envChild = "TOOLGATE_TEST_NONROOT_CHILD"

// envServe turns the test binary into a gateway serving the config file
// it names (the lifeline test kills it).
const envServe = "TOOLGATE_TEST_SERVE"

// envHelperBin names the dedicated helper a child (as nonRootUID) uses.
const envHelperBin = "TOOLGATE_TEST_HELPER_BIN"

var (
	helperOnce sync.Once
	helperPath string
	helperErr  error
)

// testHelper returns cmd/toolgate-sandbox built once for this test binary,
// executable by every user (the non-root child gets its path from
// envHelperBin).
func testHelper(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(envHelperBin); p != "" {
		return p
	}
	helperOnce.Do(func() {
		dir, err := os.MkdirTemp("", "toolgate-test-helper-")
		if err != nil {
			helperErr = err
			return
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			helperErr = err
			return
		}
		p := filepath.Join(dir, HelperName)
		if out, err := exec.Command("go", "build", "-o", p, "../../cmd/toolgate-sandbox").CombinedOutput(); err != nil {
			helperErr = fmt.Errorf("building the helper: %v\n%s", err, out)
			return
		}
		helperPath = p
	})
	if helperErr != nil {
		t.Fatal(helperErr)
	}
	return helperPath
}

// asGatewayUsers runs f as a root gateway and as a non-root one (as root),
// or only as the user the test runs as otherwise.
func asGatewayUsers(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	if os.Getenv(envChild) != "" || os.Geteuid() != 0 {
		t.Run("non-root", f)
		return
	}
	t.Run("root", f)
	t.Run("non-root", func(t *testing.T) { runAsNonRoot(t) })
}

var (
	childOnce sync.Once
	childDir  string
	childErr  error
)

// childTree prepares, once per test binary, what a child running as
// nonRootUID needs: a copy of this binary it may execute, the policy pack
// and the OpenAPI document at the relative paths the harness reads them
// from, and a temporary folder of its own.
func childTree() (string, error) {
	childOnce.Do(func() {
		dir, err := os.MkdirTemp("", "toolgate-nonroot-")
		if err != nil {
			childErr = err
			return
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			childErr = err
			return
		}
		self, err := os.Executable()
		if err != nil {
			childErr = err
			return
		}
		for _, d := range []string{"bin", "root/internal/gateway", "root/api", "tmp"} {
			if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
				childErr = err
				return
			}
		}
		if err := copyFile(self, filepath.Join(dir, "bin/gateway.test"), 0o755); err != nil {
			childErr = err
			return
		}
		if err := os.CopyFS(filepath.Join(dir, "root/policies"), os.DirFS("../../policies")); err != nil {
			childErr = err
			return
		}
		if err := copyFile("../../api/openapi.yaml", filepath.Join(dir, "root/api/openapi.yaml"), 0o644); err != nil {
			childErr = err
			return
		}
		if err := filepath.Walk(filepath.Join(dir, "root"), func(p string, fi os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			mode := os.FileMode(0o644)
			if fi.IsDir() {
				mode = 0o755
			}
			return os.Chmod(p, mode)
		}); err != nil {
			childErr = err
			return
		}
		if err := os.Chown(filepath.Join(dir, "tmp"), nonRootUID, nonRootUID); err != nil {
			childErr = err
			return
		}
		childDir = dir
	})
	return childDir, childErr
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// nonRootCommand is cmd run as nonRootUID in the child tree.
func nonRootCommand(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	dir, err := childTree()
	if err != nil {
		t.Fatalf("preparing the non-root child: %v", err)
	}
	cmd := exec.Command(filepath.Join(dir, "bin/gateway.test"), args...)
	cmd.Dir = filepath.Join(dir, "root/internal/gateway")
	tmp := filepath.Join(dir, "tmp")
	cmd.Env = []string{envChild + "=1", "TMPDIR=" + tmp, "HOME=" + tmp, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8",
		envHelperBin + "=" + testHelper(t)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nonRootUID, Gid: nonRootUID}}
	return cmd
}

// runAsNonRoot runs the current test (t.Name(), a "non-root" subtest) in a
// child as nonRootUID and fails with its output if it fails.
func runAsNonRoot(t *testing.T) {
	t.Helper()
	parts := strings.Split(t.Name(), "/")
	pattern := make([]string, len(parts))
	for i, p := range parts {
		pattern[i] = "^" + regexpQuote(p) + "$"
	}
	cmd := nonRootCommand(t, "-test.run="+strings.Join(pattern, "/"), "-test.count=1", "-test.v")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+parts[0]) {
		t.Fatalf("as a non-root gateway (uid %d): %v\n%s", nonRootUID, err, out)
	}
	if testing.Verbose() {
		t.Logf("as a non-root gateway (uid %d):\n%s", nonRootUID, out)
	}
}

// regexpQuote quotes a test name for -test.run (its spaces are
// underscores already).
func regexpQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\.+*?()|[]{}^$`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// serveForTest is this test binary as a gateway serving cfgFile on a
// loopback port, as `gateway serve` does: it prints the address and
// serves until it is killed.
func serveForTest(cfgFile string) int {
	cfg, err := config.Load(cfgFile)
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	g, err := New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("listening http://" + ln.Addr().String())
	if err := g.Serve(context.Background(), ln); err != nil {
		fmt.Println("error", err)
		return 1
	}
	return 0
}

// servingGateway starts cmd (the test binary with envServe set) and
// returns the base URL it serves.
func servingGateway(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	cmd.Stderr = os.Stderr
	must(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	base, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		t.Fatalf("the gateway did not start: %q %v", line, err)
	}
	return base
}

// jailOf returns the host pids of every process of the jails the gateway
// process pid started (their stage 1 names it as owner).
func jailsOf(t *testing.T, pid int) []int {
	t.Helper()
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	must(t, err)
	i := strings.LastIndexByte(string(stat), ')')
	owner := strconv.Itoa(pid) + "." + strings.Fields(string(stat[i+1:]))[19]
	ents, err := os.ReadDir("/proc")
	must(t, err)
	children := map[int][]int{}
	var roots []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.Contains(string(b), "\x00--owner="+owner+"\x00") {
			roots = append(roots, p)
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		j := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[j+1:]))
		if len(f) > 1 {
			pp, _ := strconv.Atoi(f[1])
			children[pp] = append(children[pp], p)
		}
	}
	out := roots
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}
