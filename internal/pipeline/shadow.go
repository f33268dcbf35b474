package pipeline

import (
	"context"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/prometheus/client_golang/prometheus"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/decision"
)

// Shadow is a second policy evaluated beside the enforced one on every
// authorization. It never changes an outcome: its verdict goes into the
// decision event's "shadow" member and its divergences into a metric.
type Shadow struct {
	engine    *decision.Engine
	decisions *prometheus.CounterVec // result: agree, allow_to_deny, deny_to_allow, error
}

// Shadow decision results (the metric's "result" label).
const (
	ShadowAgree       = "agree"
	ShadowAllowToDeny = "allow_to_deny" // enforced allows, shadow denies
	ShadowDenyToAllow = "deny_to_allow" // enforced denies, shadow allows
	ShadowError       = "error"
)

// NewShadow wraps the shadow policy's engine; its metric is registered on
// reg (nil: unregistered).
func NewShadow(engine *decision.Engine, reg prometheus.Registerer) *Shadow {
	s := &Shadow{
		engine: engine,
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_shadow_decisions_total",
			Help: "Authorizations also decided by the shadow policy, by how the shadow compared with the enforced decision.",
		}, []string{"result"}),
	}
	for _, r := range []string{ShadowAgree, ShadowAllowToDeny, ShadowDenyToAllow, ShadowError} {
		s.decisions.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(s.decisions)
	}
	return s
}

// Engine is the shadow policy's engine.
func (s *Shadow) Engine() *decision.Engine { return s.engine }

// shadowVerdict is a shadow decision waiting to be compared.
type shadowVerdict struct {
	revision string
	dec      decision.Decision
	err      error
}

// start evaluates the shadow policy on input (built once, shared with the
// enforced decision) in its own goroutine, so that it runs beside the
// enforced decision rather than after it. The result is
// read with compare.
func (s *Shadow) start(ctx context.Context, input func() (ast.Value, error)) <-chan shadowVerdict {
	if s == nil {
		return nil
	}
	ch := make(chan shadowVerdict, 1)
	go func() {
		rev, err := s.engine.Current()
		if err != nil {
			ch <- shadowVerdict{err: err}
			return
		}
		d, err := rev.Decide(ctx, nil, decision.WithInputFunc(input))
		ch <- shadowVerdict{revision: rev.ID(), dec: d, err: err}
	}()
	return ch
}

// compare waits for the shadow verdict and counts how it compares with the
// enforced decision.
func (s *Shadow) compare(ch <-chan shadowVerdict, enforced decision.Decision) *audit.ShadowInfo {
	if ch == nil {
		return nil
	}
	v := <-ch
	info := &audit.ShadowInfo{Revision: v.revision}
	result := ShadowAgree
	switch {
	case v.err != nil:
		info.Outcome, result = ShadowError, ShadowError
	default:
		info.Outcome = string(verdict(v.dec))
		switch {
		case enforced.Allow && !v.dec.Allow:
			result = ShadowAllowToDeny
		case !enforced.Allow && v.dec.Allow:
			result = ShadowDenyToAllow
		}
		info.Diverged = result != ShadowAgree
	}
	s.decisions.WithLabelValues(result).Inc()
	return info
}

func verdict(d decision.Decision) apiv1.Outcome {
	switch {
	case !d.Allow:
		return apiv1.OutcomeDenied
	case d.ApprovalRequired:
		return apiv1.OutcomeApprovalRequired
	}
	return apiv1.OutcomeAllow
}

// ShadowEngine is the shadow policy's engine, nil without one.
func (p *Pipeline) ShadowEngine() *decision.Engine {
	if p.o.Shadow == nil {
		return nil
	}
	return p.o.Shadow.engine
}
