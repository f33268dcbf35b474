package gateway

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/service/backend"
	"github.com/toolgate/toolgate/internal/tlog"
)

// prover serves the audit log's checkpoints and proofs to the audit
// service, translating the log's errors into the service's.
type prover struct{ log *audit.Log }

var _ backend.Prover = prover{}

func (p prover) Checkpoint(ctx context.Context, tenant string) ([]byte, error) {
	n, err := p.log.Checkpoint(ctx, tenant)
	return n, proverErr(err)
}

func (p prover) VerifierKey() string { return p.log.VerifierKey() }

func (p prover) VerifierKeys() []string { return p.log.Verifier().Keys() }

func (p prover) InclusionProof(ctx context.Context, tenant, id string, size uint64) (tlog.InclusionProof, error) {
	if size > math.MaxInt64 {
		return tlog.InclusionProof{}, backend.ErrProofRange
	}
	pr, err := p.log.InclusionProof(ctx, tenant, id, int64(size))
	return pr, proverErr(err)
}

func (p prover) ConsistencyProof(ctx context.Context, tenant string, from, to uint64) (tlog.ConsistencyProof, error) {
	if to > math.MaxInt64 {
		return tlog.ConsistencyProof{}, backend.ErrProofRange
	}
	pr, err := p.log.ConsistencyProof(ctx, tenant, int64(from), int64(to))
	return pr, proverErr(err)
}

func (p prover) VerifyCheckpoint(ctx context.Context, tenant string, note []byte) (any, error) {
	res, err := p.log.VerifyCheckpoint(ctx, tenant, note)
	if err != nil {
		return nil, proverErr(err)
	}
	return res, nil
}

// proverErr maps the log's caller errors to the API's; anything else is
// the server's (503).
func proverErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, audit.ErrNotFound): // ErrNotIntegrated included
		return errors.Join(backend.ErrProofNotFound, err)
	case errors.Is(err, audit.ErrProofRange):
		return errors.Join(backend.ErrProofRange, err)
	case errors.Is(err, audit.ErrBadCheckpoint):
		return fmt.Errorf("%w: %s", backend.ErrBadCheckpoint, strings.TrimPrefix(err.Error(), "audit: "))
	}
	return err
}
