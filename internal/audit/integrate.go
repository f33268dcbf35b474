package audit

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json"
	"golang.org/x/mod/sumdb/note"

	"github.com/toolgate/toolgate/internal/tlog"
)

// The integrator is the second half of the write path. The hot path only
// commits events into the store's append table; the integrator, one per
// tenant at a time (Store.Integrate owns the tenant's tree: an in-process
// lock on SQLite, a PostgreSQL advisory lock per tenant across replicas),
// takes them in commit order in large batches and, in one transaction per
// batch:
//
//  1. gives each event the next log index and moves it into the
//     queryable events table (with its indexes);
//  2. integrates the events' hashes into the tenant's RFC 6962 tree
//     (tlog.Integrate), inserting the nodes that became complete;
//  3. stores the new compact tree state;
//  4. when the latest checkpoint is checkpoint_interval old, signs a new
//     one for the new tree, but only if the stored tree is an append-only
//     extension of the latest stored checkpoint and of every checkpoint
//     this process signed or verified (a consistency proof from the
//     stored nodes): the key never signs a tree someone shortened or
//     rewrote in the database.
//
// Events of the hash-chain era (written before the tree) are integrated
// first, in (chain, seq) order, so that an upgraded database's whole log
// is in the tree.

// Integration defaults.
const (
	// DefaultCheckpointInterval is how soon a signed checkpoint covers a
	// new event unless configured.
	DefaultCheckpointInterval = time.Second
	defaultIntegrateInterval  = 200 * time.Millisecond
	defaultIntegrateBatch     = 1024
	// closeIntegrateTimeout bounds the last integration pass of Close.
	closeIntegrateTimeout = 5 * time.Second
	// warnEvery rate-limits the log line of a tenant whose checkpoints
	// cannot be signed.
	warnEvery = time.Minute
)

// batchSizer is a Store that prefers its own integration batch size.
type batchSizer interface{ IntegrateBatch() int }

// vacuumer is a Store whose append table wants cleaning after rows were
// moved out of it (PostgreSQL: dead tuples).
type vacuumer interface {
	Moved(ctx context.Context, n int)
}

// yielder is a Store whose integration shares one write lock with the
// hot path (SQLite): between two full batches the integrator pauses
// this long, so that the writer's commits get their turn and the
// latency of a durable append stays bounded by one batch.
type yielder interface{ IntegrateYield() time.Duration }

type integrator struct {
	l        *Log
	store    Store
	signer   *tlog.Signer
	interval time.Duration // checkpoint interval
	every    time.Duration // integration interval
	batch    int
	file     string
	fileMu   sync.Mutex

	yield    time.Duration // pause between full batches (yielder)
	kick     chan struct{}
	quit     chan struct{}
	stopped  chan struct{}
	stopOnce sync.Once
	since    atomic.Int64 // events committed by this Log since the last pass

	// lastFull is when pass last asked the store for all the work
	// (writer-only); between such passes it integrates the tenants in
	// work: those this Log committed events of, those left with more
	// to do, and those whose checkpoint is not yet due.
	lastFull time.Time

	mu     sync.Mutex
	work   map[string]bool
	seen   map[string]tlog.Checkpoint // largest checkpoint signed or verified here, by tenant
	warned map[string]time.Time
}

func newIntegrator(l *Log, opts LogOptions) (*integrator, error) {
	in := &integrator{
		l: l, store: l.store, signer: opts.Signer,
		interval: opts.CheckpointInterval, every: opts.IntegrateInterval, batch: opts.IntegrateBatch,
		file: opts.CheckpointFile,
		kick: make(chan struct{}, 1), quit: make(chan struct{}), stopped: make(chan struct{}),
		seen: map[string]tlog.Checkpoint{}, warned: map[string]time.Time{}, work: map[string]bool{},
	}
	if in.interval <= 0 {
		in.interval = DefaultCheckpointInterval
	}
	if in.every <= 0 {
		in.every = defaultIntegrateInterval
	}
	if in.batch <= 0 {
		in.batch = defaultIntegrateBatch
		if bs, ok := l.store.(batchSizer); ok && bs.IntegrateBatch() > 0 {
			in.batch = bs.IntegrateBatch()
		}
	}
	if y, ok := l.store.(yielder); ok {
		in.yield = y.IntegrateYield()
	}
	if in.signer == nil {
		skey, _, err := note.GenerateKey(rand.Reader, tlog.KeyName)
		if err != nil {
			return nil, err
		}
		if in.signer, err = tlog.NewSigner(skey); err != nil {
			return nil, err
		}
	}
	return in, nil
}

// run integrates every interval, and sooner once a batch's worth of
// events was committed here, until stop.
func (in *integrator) run() {
	defer close(in.stopped)
	t := time.NewTimer(in.every)
	defer t.Stop()
	for {
		select {
		case <-in.quit:
			ctx, cancel := context.WithTimeout(context.Background(), closeIntegrateTimeout)
			in.pass(ctx)
			cancel()
			return
		case <-t.C:
		case <-in.kick:
		}
		in.pass(context.Background())
		t.Reset(in.every)
	}
}

// committed notes events this Log committed, of the tenants in batch; a
// full batch's worth wakes the integrator before its interval.
func (in *integrator) committed(batch []*pending) {
	in.mu.Lock()
	for _, p := range batch {
		in.work[p.ev.Tenant] = true
	}
	in.mu.Unlock()
	if in.since.Add(int64(len(batch))) >= int64(in.batch) {
		select {
		case in.kick <- struct{}{}:
		default:
		}
	}
}

func (in *integrator) stop() {
	in.stopOnce.Do(func() { close(in.quit) })
	<-in.stopped
}

// fullWorkEvery is how often pass asks the store for all the work (other
// replicas' events, events left by a gateway that stopped): a full scan
// of the append table on SQLite, so not on every pass.
const fullWorkEvery = 2 * time.Second

// pass integrates every tenant that has work, skipping those another
// integrator holds.
func (in *integrator) pass(ctx context.Context) {
	in.since.Store(0)
	in.mu.Lock()
	work := in.work
	in.work = map[string]bool{}
	in.mu.Unlock()
	if time.Since(in.lastFull) >= fullWorkEvery {
		all, err := in.store.IntegrationWork(ctx)
		if err != nil {
			in.l.m.integrateFailures.Inc()
			in.warn("", "audit integration: listing work failed", err)
		}
		for _, t := range all {
			work[t] = true
		}
		if err == nil {
			in.lastFull = time.Now()
		}
	}
	for _, tenant := range slices.Sorted(maps.Keys(work)) {
		if ctx.Err() != nil {
			in.again(tenant)
			continue
		}
		if err := in.tenant(ctx, tenant, false); err != nil {
			in.again(tenant) // failures are logged and counted; retry next pass
		}
	}
}

// again keeps tenant in the work of the next pass.
func (in *integrator) again(tenant string) {
	in.mu.Lock()
	in.work[tenant] = true
	in.mu.Unlock()
}

// tenant integrates the tenant's committed events, batch by batch, until
// none is left or (wait false) another integrator holds the tree.
func (in *integrator) tenant(ctx context.Context, tenant string, wait bool) error {
	for {
		var res chunkResult
		start := time.Now()
		ran, err := in.store.Integrate(ctx, tenant, wait, func(ctx context.Context, tx TreeTx) error {
			var err error
			res, err = in.chunk(ctx, tx, tenant)
			return err
		})
		if err != nil {
			in.l.m.integrateFailures.Inc()
			in.warn(tenant, "audit integration failed; the events wait in the append table", err)
			return err
		}
		if !ran {
			in.again(tenant) // another integrator has it; look again
			return nil
		}
		if res.events > 0 {
			if res.oldestMS > 0 {
				in.l.m.integrationLag.Observe(max(0, time.Since(time.UnixMilli(res.oldestMS)).Seconds()))
			}
			in.l.m.integrated.Add(float64(res.events))
			in.l.m.integrateSeconds.Observe(time.Since(start).Seconds())
			if v, ok := in.store.(vacuumer); ok {
				v.Moved(ctx, res.events)
			}
		}
		if res.note != nil {
			in.published(tenant, res.cp, res.note)
		}
		if res.unsigned {
			in.again(tenant) // its checkpoint is due later
		}
		if res.events < in.batch || ctx.Err() != nil {
			if res.events == in.batch {
				in.again(tenant)
			}
			return nil
		}
		if in.yield > 0 {
			select {
			case <-time.After(in.yield):
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// chunkResult is what one integration transaction did.
type chunkResult struct {
	events   int
	note     []byte // a checkpoint signed in the transaction
	cp       tlog.Checkpoint
	unsigned bool  // the tree is ahead of its checkpoint, which is not yet due
	oldestMS int64 // time of the batch's first event (0 for legacy events)
}

// chunk integrates one batch of the tenant and signs a checkpoint when one
// is due, inside the store's transaction.
func (in *integrator) chunk(ctx context.Context, tx TreeTx, tenant string) (chunkResult, error) {
	var res chunkResult
	head, err := tx.Tree(ctx)
	if err != nil {
		return res, err
	}
	state, err := headState(head)
	if err != nil {
		return res, err
	}
	app := TreeAppend{From: head.Size}
	var leaves [][]byte
	legacy, err := tx.Legacy(ctx, in.batch)
	if err != nil {
		return res, err
	}
	if len(legacy) > 0 {
		for i, r := range legacy {
			leaves = append(leaves, in.leafOf(tenant, r.ID, r.Hash))
			app.Legacy = append(app.Legacy, LegacyIndex{ID: r.ID, LogIndex: head.Size + int64(i)})
		}
	} else {
		rows, err := tx.Pending(ctx, in.batch)
		if err != nil {
			return res, err
		}
		for i, r := range rows {
			c := decodeColumns(r.Raw)
			if i == 0 {
				res.oldestMS = c.timeMS
			}
			app.Events = append(app.Events, IntegratedEvent{
				Seq: r.Seq, LogIndex: head.Size + int64(i), ID: r.ID, Hash: c.Hash, TimeMS: c.timeMS,
				Tool: c.Tool, Principal: c.Principal, Outcome: c.Outcome, Phase: c.Phase,
				SessionID: c.SessionID, CallID: c.CallID, DecisionID: c.DecisionID,
			})
			leaves = append(leaves, in.leafOf(tenant, r.ID, c.Hash))
		}
	}
	size, root := head.Size, head.Root
	if len(leaves) > 0 {
		integ, err := tlog.Integrate(state, leaves)
		if err != nil {
			return res, err
		}
		b, err := integ.State.MarshalBinary()
		if err != nil {
			return res, err
		}
		app.Nodes, app.Size, app.State, app.Root = integ.Nodes, int64(integ.State.Size), b, integ.Root
		if err := tx.Append(ctx, app); err != nil {
			return res, err
		}
		size, root = app.Size, integ.Root
	}
	res.events = len(leaves)

	now := time.Now()
	due := head.Checkpoint == nil || now.Sub(time.UnixMilli(head.CheckpointMS)) >= in.interval
	if size <= head.CheckpointSize {
		return res, nil
	}
	if !due {
		res.unsigned = true
		return res, nil
	}
	cp := tlog.Checkpoint{Origin: tlog.Origin(tenant), Size: uint64(size), Root: root}
	if err := in.canSign(ctx, tx, tenant, head, cp); err != nil {
		in.l.m.checkpointRefused.Inc()
		in.warn(tenant, "audit checkpoint not signed", err)
		return res, nil // the events are integrated all the same
	}
	n, err := in.signer.Sign(cp)
	if err != nil {
		return res, err
	}
	if err := tx.PutCheckpoint(ctx, n, size, now.UnixMilli()); err != nil {
		return res, err
	}
	res.note, res.cp = n, cp
	return res, nil
}

// canSign checks that the tree cp describes extends the tenant's latest
// stored checkpoint and the largest one this process has seen.
func (in *integrator) canSign(ctx context.Context, tx TreeTx, tenant string, head TreeHead, cp tlog.Checkpoint) error {
	nodes := txNodes{tx}
	if head.Checkpoint != nil {
		prev, err := in.signer.Verifier().Open(head.Checkpoint, cp.Origin)
		if err != nil {
			return fmt.Errorf("the stored latest checkpoint is not signed by this gateway's key (every replica must share audit.signing_key_file): %w", err)
		}
		if err := tlog.VerifyExtension(ctx, nodes, prev, cp); err != nil {
			return fmt.Errorf("the stored tree does not extend its latest checkpoint (size %d): %w", prev.Size, err)
		}
	}
	if seen, ok := in.seenOf(tenant); ok {
		if err := tlog.VerifyExtension(ctx, nodes, seen, cp); err != nil {
			return fmt.Errorf("the stored tree does not extend the checkpoint of size %d this gateway signed or verified: %w", seen.Size, err)
		}
	}
	return nil
}

// published records a committed checkpoint: it is the largest seen, and
// goes to the witness file.
func (in *integrator) published(tenant string, cp tlog.Checkpoint, n []byte) {
	in.observe(tenant, cp)
	in.l.m.checkpoints.Inc()
	if in.file == "" {
		return
	}
	in.fileMu.Lock()
	defer in.fileMu.Unlock()
	f, err := os.OpenFile(in.file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err == nil {
		_, err = f.Write(append(append([]byte(nil), n...), '\n')) // one write: one record
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		in.l.logger.Error("audit checkpoint not appended to audit.checkpoint_file", "file", in.file, "err", err)
	}
}

// observe remembers cp as the tenant's largest known checkpoint.
func (in *integrator) observe(tenant string, cp tlog.Checkpoint) {
	in.mu.Lock()
	if cp.Size >= in.seen[tenant].Size {
		in.seen[tenant] = cp
	}
	in.mu.Unlock()
}

func (in *integrator) seenOf(tenant string) (tlog.Checkpoint, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	cp, ok := in.seen[tenant]
	return cp, ok
}

// warn logs a tenant's problem ("" for one of no tenant) at most once a
// warnEvery: the integrator retries every pass, and an outage would
// otherwise log five lines a second.
func (in *integrator) warn(tenant, msg string, err error) {
	in.mu.Lock()
	last := in.warned[tenant]
	now := time.Now()
	if now.Sub(last) < warnEvery {
		in.mu.Unlock()
		return
	}
	in.warned[tenant] = now
	in.mu.Unlock()
	in.l.logger.Error(msg, "tenant", tenant, "err", err)
}

// leafOf is the tree entry of an event: the 32 bytes of its hash column.
// A hash column that is not one (a tampered row of the hash-chain era)
// must not stop the log: it gets 32 zero bytes, and Verify reports the
// event.
func (in *integrator) leafOf(tenant, id, hash string) []byte {
	b, err := HashBytes(hash)
	if err != nil {
		in.warn(tenant, "audit event with an invalid hash integrated as zeros", fmt.Errorf("event %s: %w", id, err))
		return make([]byte, tlog.HashSize)
	}
	return b
}

// headState decodes the stored compact state.
func headState(h TreeHead) (tlog.State, error) {
	var st tlog.State
	if h.Size == 0 && len(h.State) == 0 {
		return st, nil
	}
	if err := st.UnmarshalBinary(h.State); err != nil {
		return st, err
	}
	if int64(st.Size) != h.Size {
		return st, fmt.Errorf("%w: state of size %d, tree of size %d", tlog.ErrBadState, st.Size, h.Size)
	}
	return st, nil
}

// columns are the indexed members of an event and its hash, decoded from
// its raw JSON to fill the events table's columns.
type columns struct {
	Hash       string `json:"hash"`
	Time       string `json:"time"`
	Tool       string `json:"tool"`
	Principal  string `json:"principal"`
	Outcome    string `json:"outcome"`
	Phase      string `json:"phase"`
	SessionID  string `json:"session_id"`
	CallID     string `json:"call_id"`
	DecisionID string `json:"decision_id"`
	timeMS     int64
}

// decodeColumns reads the indexed members of a committed event. The Log
// wrote raw, so it decodes; if it did not (a row edited in the append
// table), the columns stay empty and Verify reports the event.
func decodeColumns(raw []byte) columns {
	var c columns
	if err := json.Unmarshal(raw, &c); err != nil {
		return columns{}
	}
	c.timeMS, _ = parseTimeMS(c.Time)
	return c
}

// txNodes reads nodes through an integration transaction.
type txNodes struct{ tx TreeTx }

func (n txNodes) Nodes(ctx context.Context, ids []tlog.NodeID) ([][]byte, error) {
	return n.tx.Nodes(ctx, ids)
}

// storeNodes reads a tenant's nodes from the store.
type storeNodes struct {
	s      Store
	tenant string
}

func (n storeNodes) Nodes(ctx context.Context, ids []tlog.NodeID) ([][]byte, error) {
	return n.s.Nodes(ctx, n.tenant, ids)
}

// Sync integrates the tenant's committed events into its tree now,
// waiting for another integrator that holds it, and returns once every
// event committed before the call is integrated and queryable. The
// integrator does this on its own within about IntegrateInterval; Verify
// calls Sync first, tests and tools may too.
func (l *Log) Sync(ctx context.Context, tenant string) error {
	if err := l.tree.tenant(ctx, tenant, true); err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return storeErr(err)
	}
	return nil
}
