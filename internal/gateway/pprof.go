package gateway

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/toolgate/toolgate/internal/lifecycle"
)

// pprofRunner serves net/http/pprof on addr (config debug.pprof_listen,
// loopback only) on its own listener, outside the API's router and
// authentication, so profiling the gateway under load needs no token and
// can never be reached through the public listener. The listener is bound
// here (a busy address is a start error); the runner serves until its
// context ends.
func (g *Gateway) pprofRunner(addr string) (lifecycle.Runner, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return lifecycle.Runner{}, fmt.Errorf("debug.pprof_listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	g.log.Warn("pprof listening (debug.pprof_listen; unauthenticated, loopback only)", "addr", ln.Addr().String())
	return lifecycle.Runner{Name: "pprof listener", Run: func(ctx context.Context) error {
		errc := make(chan error, 1)
		go func() { errc <- srv.Serve(ln) }()
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-errc
		return nil
	}}, nil
}
