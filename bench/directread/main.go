// Command directread is the "same read, done directly" baseline of the
// side-by-side harness (bench/compare.sh, target D): an HTTP server on
// loopback whose one endpoint reads a fixed file with os.ReadFile and
// returns it as JSON, with no authentication, policy or audit. The gateway's
// call path (target C) minus this, at the same concurrency and through the
// same load generator, is the overhead Toolgate adds to a read.
//
// Usage:
//
//	go run ./bench/directread -listen 127.0.0.1:8099 -file docs/guide.md
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "loopback address to listen on")
	file := flag.String("file", "", "the file every request reads (required)")
	flag.Parse()
	if *file == "" {
		fmt.Fprintln(os.Stderr, "directread: -file is required")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "directread:", err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String())
	srv := &http.Server{Handler: handler(*file), ReadHeaderTimeout: 10 * time.Second}
	if err := srv.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, "directread:", err)
		os.Exit(1)
	}
}

// handler reads file on every request, like the read-file tool's effect,
// and answers {"content": "..."}; GET /health answers 200 for readiness.
func handler(file string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {})
	mux.HandleFunc("POST /read", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // the same request body the gateway gets
		b, err := os.ReadFile(file)
		if err != nil {
			http.Error(w, "read failed", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"content": string(b)})
	})
	return mux
}
