package decision

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Realistic documents for the shipped pack, built once like the gateway
// builds them (an ast.Value, no JSON per evaluation).
const (
	benchRead  = `[{"type":"file","path":"docs/guide.md","access":"read"}]`
	benchWalk  = `[{"type":"file","path":"src","access":"read","recursive":true}]`
	benchWrite = `[{"type":"file","path":"release/VERSION","access":"write"}]`
)

func BenchmarkAvailable(b *testing.B) {
	rev := current(b, loaded(b, shippedPack, nil))
	input := value(b, availabilityDeveloper)
	ctx := context.Background()
	b.Run("sequential", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if ok, err := rev.Available(ctx, input); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if ok, err := rev.Available(ctx, input); err != nil || !ok {
					b.Error(ok, err)
					return
				}
			}
		})
	})
}

func BenchmarkDecide(b *testing.B) {
	rev := current(b, loaded(b, shippedPack, nil))
	ctx := context.Background()
	cases := []struct{ name, roles, tool, resources string }{
		{"read", `["viewer"]`, "read-file", benchRead},
		{"recursive", `["developer"]`, "grep", benchWalk},
		{"approval", `["developer"]`, "write-file", benchWrite},
	}
	for _, c := range cases {
		input := value(b, requestDoc(c.roles, c.tool, c.resources))
		if d, err := rev.Decide(ctx, input); err != nil || !d.Allow {
			b.Fatalf("%s: %+v, %v", c.name, d, err)
		}
		b.Run(c.name+"/sequential", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rev.Decide(ctx, input); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := rev.Decide(ctx, input); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkDecideTenants shows decision time stays flat as data grows: the
// shipped rules over 1 tenant or 10,000 tenants, each with 100 roles.
func BenchmarkDecideTenants(b *testing.B) {
	ctx := context.Background()
	for _, tenants := range []int{1, 10_000} {
		dir := b.TempDir()
		copyRego(b, shippedPack, dir)
		writeTenants(b, filepath.Join(dir, "data.json"), tenants, 100)
		started := time.Now()
		rev := current(b, loaded(b, dir, nil))
		b.Logf("%d tenants × 100 roles: loaded in %v", tenants, time.Since(started).Round(time.Millisecond))
		// The caller is in the last tenant, with two of its roles.
		input := tenantRequest(b, fmt.Sprintf("t%05d", tenants-1))
		if d, err := rev.Decide(ctx, input); err != nil || !d.Allow {
			b.Fatalf("%+v, %v", d, err)
		}
		b.Run(fmt.Sprintf("tenants=%d", tenants), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rev.Decide(ctx, input); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkLoadShippedPack(b *testing.B) {
	e := NewEngine(Options{Dir: shippedPack})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.build(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func tenantRequest(b *testing.B, tenant string) ast.Value {
	return value(b, `{"version":1,"tenant":"`+tenant+`","principal":{"id":"alice","roles":["r042","r007"],"groups":[],"claims":{}},`+
		`"client":{"id":"platform-a"},"session_id":"s-1","call_id":"c-1",`+
		`"tool":{"name":"read-file","kind":"builtin","effects":["fs.read"],"annotations":{"read_only":true}},`+
		`"action":"fs.read","resources":[{"type":"file","path":"src/main.go","access":"read"}],"args":{"path":"src/main.go"},"digest":"sha256:0000"}`)
}

// writeTenants writes data.json with n tenants of roles roles each, shaped
// like policies/data.yaml.
func writeTenants(b *testing.B, path string, n, roles int) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteString(`{"toolgate":{"tenants":{`)
	for t := range n {
		if t > 0 {
			w.WriteByte(',')
		}
		fmt.Fprintf(w, `"t%05d":{"protected":["secrets/**","**/.env"],"approval_write":["release/**"],"roles":{`, t)
		for r := range roles {
			if r > 0 {
				w.WriteByte(',')
			}
			fmt.Fprintf(w, `"r%03d":{"tools":["read-file","grep"],"read":["src/**","docs/%d/**"],"write":["src/%d/**"]}`, r, r, r)
		}
		w.WriteString(`}}`)
	}
	w.WriteString(`}}}`)
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

// copyRego copies the Rego modules (not the data) of src into dst.
func copyRego(b *testing.B, src, dst string) {
	matches, err := filepath.Glob(filepath.Join(src, "*.rego"))
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range matches {
		raw, err := os.ReadFile(m)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(m)), raw, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}
