package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/internal/auth"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/ratelimit"
	"github.com/toolgate/toolgate/internal/service"
	"github.com/toolgate/toolgate/internal/telemetry"
)

type ctxKey int

const identityKey ctxKey = 0

func caller(r *http.Request) *identity.Identity {
	id, _ := r.Context().Value(identityKey).(*identity.Identity)
	return id
}

// authenticate admits only requests with a verified credential. Failures
// are counted and logged with their reason; the client learns nothing
// beyond 401.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		id, err := s.o.Auth.Authenticate(r)
		took := time.Since(t0)
		s.o.Metrics.StageDuration.WithLabelValues("auth").Observe(took.Seconds())
		telemetry.Stage(s.tracer, trace.SpanFromContext(r.Context()), "auth", t0, t0.Add(took))
		if err != nil || id == nil {
			reason := "invalid"
			var ae *auth.Error
			if errors.As(err, &ae) {
				reason = string(ae.Reason)
			}
			s.o.Metrics.Unauthenticated.WithLabelValues(reason).Inc()
			s.o.Logger.Info("unauthenticated request", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "reason", reason, "err", err)
			w.Header().Set("WWW-Authenticate", `Bearer realm="toolgate"`)
			writeError(w, service.Errorf(service.KindUnauthenticated, "a valid bearer credential is required"))
			return
		}
		if s.tenants != nil {
			// The gateway protects itself before it reads a byte of the
			// body: a refused request costs one map lookup. Counted and
			// logged at debug level, never audited (an audit write per
			// refused request is what a flood would exploit).
			v, _ := s.tenants.Take(r.Context(), id.Tenant, []ratelimit.Limit{s.tenant})
			if !v.OK {
				s.o.Metrics.RateLimited.WithLabelValues(service.LimitTenantRate).Inc()
				s.o.Logger.Debug("tenant rate limited", "tenant", id.Tenant, "path", r.URL.Path, "retry_after", v.RetryAfter)
				writeError(w, &service.Error{Kind: service.KindRateLimited, RetryAfter: v.RetryAfter,
					Message: "too many requests for this tenant (limits.tenant_rate); the request was not read; retry after the Retry-After delay"})
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey, id)))
	})
}

// requireRole answers a management route's 403 before its request is
// read, so that a caller without the role learns nothing of the route's
// syntax. The check is the services' own (service.Authorize), which each
// service method makes again: this is an early answer, not the authority.
func requireRole(role string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := service.Authorize(caller(r), role); err != nil {
				writeError(w, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// recoverer turns a handler panic into a 500 without detail.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.o.Logger.Error("handler panicked", "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				writeError(w, service.Errorf(service.KindInternal, "internal error"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's Flusher
// through the instrumenting middleware's recorder.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// instrument counts requests by route pattern (bounded cardinality) and
// status.
func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		info := &requestInfo{id: requestID(r)}
		w.Header().Set("X-Request-Id", info.id)
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), requestInfoKey, info)))
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
			telemetry.SetRoute(r, route)
		}
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		took := time.Since(start)
		s.o.Metrics.HTTPRequests.WithLabelValues(route, strconv.Itoa(rec.status)).Inc()
		s.o.Metrics.HTTPDuration.WithLabelValues(route).Observe(took.Seconds())
		// One line per request at debug level: the Enabled check keeps the
		// hot path free of formatting when the level is info.
		if s.o.Logger.Enabled(r.Context(), slog.LevelDebug) {
			s.o.Logger.LogAttrs(r.Context(), slog.LevelDebug, "request",
				slog.String("request_id", info.id), slog.String("method", r.Method), slog.String("route", route),
				slog.Int("status", rec.status), slog.Duration("took", took),
				slog.String("call_id", info.callID), slog.String("decision_id", info.decisionID),
				slog.String("trace_id", traceID(r)))
		}
	})
}

// requestInfo travels with a request so that the access log line can name
// the call and decision the handler produced.
type requestInfo struct {
	id, callID, decisionID string
}

type requestInfoKeyType struct{}

var requestInfoKey requestInfoKeyType

// noteCall records the call and decision ids of a request for its log line.
func noteCall(r *http.Request, callID, decisionID string) {
	if info, ok := r.Context().Value(requestInfoKey).(*requestInfo); ok {
		info.callID, info.decisionID = callID, decisionID
	}
}

// requestID is the caller's X-Request-Id when it is a short token of safe
// characters (so it can be logged as is), or a new random id.
func requestID(r *http.Request) string {
	if v := r.Header.Get("X-Request-Id"); v != "" && len(v) <= 128 && isSafeID(v) {
		return v
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func isSafeID(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// traceID is the W3C trace id of r's span ("" when it has none), so that a
// log line leads to the trace.
func traceID(r *http.Request) string {
	if sc := trace.SpanContextFromContext(r.Context()); sc.HasTraceID() {
		return sc.TraceID().String()
	}
	return ""
}
