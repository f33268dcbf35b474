package pipeline

import (
	"context"
	"errors"
	"testing"
	"time"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/idempotency"
)

// lostReply is a key store whose first Reserve commits and then reports
// a broken connection, as a database that goes away between the commit
// and its reply does.
type lostReply struct {
	idempotency.Store
	lost bool
}

func (s *lostReply) Reserve(ctx context.Context, k *idempotency.Key, now time.Time) (*idempotency.Key, error) {
	cur, err := s.Store.Reserve(ctx, k, now)
	if err == nil && !s.lost {
		s.lost = true
		return nil, errors.New("unexpected EOF")
	}
	return cur, err
}

// A reservation whose reply was lost fails the call closed, and its
// retry with the same call_id is decided at once: it does not wait for
// the lease of a key no request holds.
func TestRetryAfterALostReservationReplyDoesNotWait(t *testing.T) {
	tt := &targetTool{}
	f := newFixture(t, map[string]string{"a.rego": allowAll, "b.rego": authzAllow}, tt)
	o := f.pl.o
	o.Keys = &lostReply{Store: f.db.Idempotency()}
	o.KeyLease = time.Hour
	f.pl = New(o)
	t.Cleanup(f.pl.Close)
	req := Request{Identity: alice, Tool: "target", Arguments: []byte(`{"name":"x","path":"x","access":"read"}`), CallID: "c-lost"}
	if _, err := f.pl.Call(context.Background(), req); !errors.Is(err, ErrAudit) {
		t.Fatalf("call whose reservation reply was lost: %v, want ErrAudit", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := f.pl.Call(ctx, req)
	if err != nil || resp.Outcome != apiv1.OutcomeOK {
		t.Fatalf("retry: %+v %v, want it decided and run", resp, err)
	}
}
