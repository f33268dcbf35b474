package pgtest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// noPullEnv makes TestNoPullHelper ask for a database (run by
// TestAnEngineThatCannotPullSkips in a process of its own, since the server
// is chosen once per process).
const noPullEnv = "TOOLGATE_PGTEST_NO_PULL_HELPER"

// A Docker engine that answers but cannot start the container (here: one
// that refuses every image pull, as an engine without a registry does)
// is a machine without PostgreSQL: the test skips and says why, instead of
// failing. Without CI=true, that is; CI sets TOOLGATE_TEST_POSTGRES_DSN.
func TestAnEngineThatCannotPullSkips(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("no unix sockets here: %v", err)
	}
	var (
		mu   sync.Mutex
		seen []string
	)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Api-Version", "1.47")
		w.Header().Set("Ostype", "linux")
		w.Header().Set("Content-Type", "application/json")
		switch path := r.URL.Path; {
		case strings.HasSuffix(path, "/_ping"):
			fmt.Fprint(w, "OK")
		case strings.HasSuffix(path, "/info"):
			fmt.Fprint(w, `{"ID":"fake","Name":"fake-engine","ServerVersion":"27.0.0","OperatingSystem":"fake","OSType":"linux","Architecture":"x86_64","NCPU":1,"MemTotal":1073741824,"Labels":[]}`)
		case strings.HasSuffix(path, "/version"):
			fmt.Fprint(w, `{"Version":"27.0.0","ApiVersion":"1.47","MinAPIVersion":"1.24","Os":"linux","Arch":"amd64"}`)
		case strings.HasSuffix(path, "/networks") && r.Method == http.MethodGet:
			fmt.Fprint(w, `[{"Name":"bridge","Id":"fake","Driver":"bridge","IPAM":{"Config":[{"Subnet":"172.17.0.0/16","Gateway":"172.17.0.1"}]}}]`)
		case strings.HasSuffix(path, "/images/json"):
			fmt.Fprint(w, `[]`)
		case strings.Contains(path, "/images/") && strings.HasSuffix(path, "/json"):
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"message":"No such image"}`)
		default:
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"message":"fake engine: no registry can be reached"}`)
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	cmd := exec.Command(os.Args[0], "-test.run=^TestNoPullHelper$", "-test.v", "-test.count=1")
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == EnvDSN || k == "CI" || k == "HOME" || strings.HasPrefix(k, "DOCKER_") || strings.HasPrefix(k, "TESTCONTAINERS_") {
			continue
		}
		env = append(env, kv)
	}
	cmd.Env = append(env, noPullEnv+"=1", "DOCKER_HOST=unix://"+sock, "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		t.Fatalf("the helper failed (%v); the engine saw %v:\n%s", err, seen, out)
	}
	want := "a Docker engine is reachable but the " + Image + " container did not start"
	if !strings.Contains(string(out), "--- SKIP: TestNoPullHelper") || !strings.Contains(string(out), want) {
		t.Fatalf("want a skip saying %q; the engine saw %v:\n%s", want, seen, out)
	}
	if !strings.Contains(strings.Join(seen, "\n"), "/images/create") {
		t.Errorf("the engine was never asked for an image: %v", seen)
	}
}

func TestNoPullHelper(t *testing.T) {
	if os.Getenv(noPullEnv) != "1" {
		t.Skip("run by TestAnEngineThatCannotPullSkips")
	}
	DSN(t)
	t.Fatal("DSN returned without a server")
}
