// Command maintenance-window is an example upstream tool service for
// Toolgate: it answers "when is the next maintenance window of service
// X?" for the tool declared as maintenance-window in the repository's
// gateway.yaml. docs/upstream-tools.md "Your own tools (upstream)" walks
// through running both.
//
//	go run ./examples/maintenance-window -listen 127.0.0.1:8081 \
//	    -jwks http://127.0.0.1:8080/.well-known/jwks.json
//
// The gateway authenticates the caller, validates the arguments against
// the declared schema, lets policy decide on the service resource, audits,
// and only then POSTs the canonical arguments here with a signed assertion.
// The SDK verifies that assertion against the gateway's published keys and
// decodes the arguments strictly; the handler only holds business logic.
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/sdk/upstream"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8081", "address to serve on")
	jwks := flag.String("jwks", "http://127.0.0.1:8080/.well-known/jwks.json", "the gateway's JWKS URL")
	tool := flag.String("tool", "maintenance-window", "the tool's name in the gateway's config (the assertion audience)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	v, err := upstream.NewVerifier(upstream.Options{JWKSURL: *jwks, Audience: *tool})
	if err != nil {
		log.Error("verifier", "err", err)
		os.Exit(2)
	}
	defer v.Close()
	mux := http.NewServeMux()
	mux.Handle("POST /maintenance-window", newHandler(v, defaultWindows(), log))
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	log.Info("maintenance-window service listening", "addr", *listen, "jwks", *jwks)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("serve", "err", err)
		os.Exit(1)
	}
}
