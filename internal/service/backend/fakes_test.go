package backend

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/decision"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/pipeline"
	"github.com/toolgate/toolgate/internal/service"
)

// These tests run the services on fakes of the interfaces they declare
// (AuditLog, Pinger, pipeline.Policy): no database, no Rego.

type fakeAuditLog struct {
	err     error
	queried int
}

func (l *fakeAuditLog) Query(context.Context, string, audit.Filter) (audit.Page, error) {
	l.queried++
	return audit.Page{}, l.err
}
func (l *fakeAuditLog) Get(context.Context, string, string) (*audit.Event, error) {
	l.queried++
	return nil, l.err
}
func (l *fakeAuditLog) Verify(context.Context, string) (audit.VerifyResult, error) {
	l.queried++
	return audit.VerifyResult{}, l.err
}

var auditorAcme = &identity.Identity{Tenant: "acme", Principal: "a", Roles: []string{identity.RoleAuditor}}

// The store's failures reach the caller as the service's kinds, with a
// message that says nothing of the cause; the caller's own mistakes are
// invalid or not found.
func TestAuditMapsTheLogsFailures(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		err  error
		call func(service.Audit) error
		kind service.Kind
	}{
		{audit.ErrBadCursor, func(a service.Audit) error { _, err := a.Events(ctx, auditorAcme, service.AuditFilter{}); return err }, service.KindInvalid},
		{fmt.Errorf("%w: from after to", audit.ErrBadFilter), func(a service.Audit) error {
			_, err := a.Events(ctx, auditorAcme, service.AuditFilter{})
			return err
		}, service.KindInvalid},
		{errors.New("dial tcp 10.0.0.7:5432"), func(a service.Audit) error { _, err := a.Events(ctx, auditorAcme, service.AuditFilter{}); return err }, service.KindUnavailable},
		{audit.ErrNotFound, func(a service.Audit) error { _, err := a.Event(ctx, auditorAcme, "e1"); return err }, service.KindNotFound},
		{errors.New("dial tcp 10.0.0.7:5432"), func(a service.Audit) error { _, err := a.Verify(ctx, auditorAcme); return err }, service.KindUnavailable},
	} {
		log := &fakeAuditLog{err: c.err}
		e := service.As(c.call(NewAudit(AuditOptions{Log: log})))
		if e.Kind != c.kind || log.queried != 1 {
			t.Errorf("%v: %s (queried %d), want %s", c.err, e.Kind, log.queried, c.kind)
		}
	}
	// Without the auditor role the log is never read.
	log := &fakeAuditLog{}
	if _, err := NewAudit(AuditOptions{Log: log}).Verify(ctx, &identity.Identity{Tenant: "acme"}); service.KindOf(err) != service.KindForbidden || log.queried != 0 {
		t.Errorf("a non-auditor: %v, queried %d", err, log.queried)
	}
}

type fakePinger struct{ err error }

func (p fakePinger) Ping(context.Context) error { return p.err }

type noPolicy struct{}

func (noPolicy) Current() (pipeline.Revision, error) { return nil, errors.New("no policy loaded") }

// Readiness names what is wrong in a fixed word, never the error.
func TestHealthSaysWhatIsNotReady(t *testing.T) {
	got := NewHealth(noPolicy{}, fakePinger{audit.ErrCommitsFailing}, nil).Check(context.Background())
	if got["policy"] != "not loaded" || got["audit"] != "commits failing" {
		t.Errorf("checks: %v", got)
	}
	got = NewHealth(noPolicy{}, fakePinger{errors.New("connection refused")}, nil).Check(context.Background())
	if got["audit"] != "unreachable" {
		t.Errorf("checks: %v", got)
	}
}

type fakeEngine struct{ read int }

func (e *fakeEngine) Status() decision.Status {
	e.read++
	return decision.Status{LastError: "a.rego:3: rego_parse_error", LastErrorAt: time.Unix(0, 0)}
}
func (e *fakeEngine) Current() (*decision.Revision, error) {
	e.read++
	return nil, errors.New("no policy loaded")
}

// Info says no revision serves and why the last load failed; a caller
// without policy-admin reads nothing of the engine.
func TestPolicyInfoOnAFakeEngine(t *testing.T) {
	eng := &fakeEngine{}
	p := NewPolicy(PolicyOptions{Engine: eng})
	if _, err := p.Info(context.Background(), &identity.Identity{Tenant: "acme", Roles: []string{identity.RoleAuditor}}); service.KindOf(err) != service.KindForbidden || eng.read != 0 {
		t.Fatalf("a non-admin: %v, engine read %d times", err, eng.read)
	}
	info, err := p.Info(context.Background(), &identity.Identity{Tenant: "acme", Roles: []string{identity.RolePolicyAdmin}})
	if err != nil || info.Revision != "" || info.LastError == nil || info.LastError.Message != "a.rego:3: rego_parse_error" || len(info.Modules) != 0 {
		t.Errorf("info: %+v %v", info, err)
	}
}
