package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/internal/tlog"
)

// LogOptions configure a Log. Zero values take the defaults.
type LogOptions struct {
	// QueueSize bounds the events waiting for the writer; beyond it Append
	// fails fast with ErrOverloaded. Default 4096.
	QueueSize int
	// MaxBatch bounds the events committed in one transaction. Default 256.
	MaxBatch int
	// Signer signs the tenants' checkpoints (tlog.LoadOrCreateSigner of
	// audit.signing_key_file). Every replica of one database must use the
	// same key. Default: a new key held in memory only, for tests and
	// tools (its checkpoints cannot be verified after the process ends).
	Signer *tlog.Signer
	// CheckpointInterval is how soon a checkpoint covers a new event:
	// after integrating, a tenant's tree gets a new signed checkpoint when
	// it grew and its latest is at least this old. Default 1s.
	CheckpointInterval time.Duration
	// CheckpointFile, when set, gets every checkpoint this Log signs
	// appended (the note, then an empty line): a witness to ship
	// elsewhere. Created with mode 0600.
	CheckpointFile string
	// IntegrateInterval is how often the integrator looks for committed
	// events to move into the tree (also those of other replicas);
	// default 200ms. It runs sooner when IntegrateBatch events are
	// waiting.
	IntegrateInterval time.Duration
	// IntegrateBatch bounds the events integrated in one transaction.
	// Default 1024 (the SQLite store asks for 256: its integration holds
	// the one write lock the hot path needs too).
	IntegrateBatch int
	// Now is the clock for event times. Default time.Now.
	Now func() time.Time
	// NewID makes event ids. Default: UUID v7 strings.
	NewID func() string
	// Logger receives commit failures. Default: discard.
	Logger *slog.Logger
	// Registerer gets the Log's metrics; nil leaves them unregistered.
	Registerer prometheus.Registerer
}

// Log is the append-only audit log in front of a Store. It is the only
// audit type the rest of the gateway talks to.
//
// Appends are group-committed: the appending goroutine encodes and hashes
// its event; one writer goroutine drains a bounded queue, takes whatever is
// queued when it wakes (up to MaxBatch, it never waits for more), commits
// the batch into the store's append table with one Store.Insert and then
// wakes every waiter with the result. Behind it an integrator goroutine
// moves committed events into the tenants' Merkle trees and signs
// checkpoints (see Sync).
type Log struct {
	store    Store
	maxBatch int
	now      func() time.Time
	newID    func() string
	logger   *slog.Logger
	m        *logMetrics

	// mu orders sends on queue against Close: Append sends under RLock
	// (never blocking), Close closes the queue under Lock.
	mu     sync.RWMutex
	closed bool
	queue  chan *pending
	done   chan struct{} // closed when the writer has drained and exited

	// health is the outcome of the last write (a batch or a probe), for
	// readiness.
	health health

	tree *integrator
}

// health tracks whether the store's writes are failing. gen counts the
// recorded outcomes, so that a probe that raced with a batch does not
// overwrite the batch's more recent verdict.
type health struct {
	mu      sync.Mutex
	gen     uint64
	failing error // nil while writes succeed
}

func (h *health) record(err error) {
	h.mu.Lock()
	h.gen++
	h.failing = err
	h.mu.Unlock()
}

func (h *health) get() (uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gen, h.failing
}

// recordIf records err unless another outcome was recorded since gen.
func (h *health) recordIf(gen uint64, err error) {
	h.mu.Lock()
	if h.gen == gen {
		h.gen++
		h.failing = err
	}
	h.mu.Unlock()
}

// pending is one queued append. ev is the Log's own copy of the event,
// raw its canonical JSON with its hash; rec is the record that commits
// with it (Entry.Record), if any.
type pending struct {
	ev     *Event
	raw    []byte
	rec    any
	result chan error // buffered: the writer never blocks on a waiter
}

// Defaults of LogOptions.
const (
	// DefaultQueueSize is how many appends may wait before Append refuses.
	DefaultQueueSize = 4096
	// DefaultMaxBatch is how many events one transaction writes at most.
	DefaultMaxBatch = 256
)

// NewLog starts a Log on store: its writer and its integrator
// goroutines; Close stops them. Close does not close the store: its
// opener owns it.
func NewLog(store Store, opts LogOptions) (*Log, error) {
	if opts.QueueSize <= 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.NewID == nil {
		opts.NewID = func() string { return uuid.Must(uuid.NewV7()).String() }
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	l := &Log{
		store:    store,
		maxBatch: opts.MaxBatch,
		now:      opts.Now,
		newID:    opts.NewID,
		logger:   opts.Logger,
		queue:    make(chan *pending, opts.QueueSize),
		done:     make(chan struct{}),
	}
	var err error
	l.m, err = newLogMetrics(opts.Registerer, func() int { return len(l.queue) })
	if err != nil {
		return nil, err
	}
	if l.tree, err = newIntegrator(l, opts); err != nil {
		return nil, err
	}
	go l.run()
	go l.tree.run()
	return l, nil
}

// Append commits ev and returns once it is durable. It fills ev.ID (when
// empty), ev.Time (when empty, from the clock) and ev.TraceID (when empty,
// from the span ctx carries: the request's trace) before queueing, and
// ev.Hash once committed (Chain, Seq and PrevHash are "", 0 and "";
// LogIndex stays nil: the event is integrated into the tree after its
// commit).
//
// Errors: ErrOverloaded when the queue is full (nothing was queued),
// ErrUnavailable (wrapped) when the store could not commit the batch,
// ErrInvalidEvent (wrapped) for an event without tenant, with an
// unparsable time or a value with no JSON form, ErrClosed after Close.
//
// If ctx ends while the event waits for its batch, Append returns ctx.Err(),
// but the event stays queued and may still be committed: an abandoned
// append is not a retracted one. ev.Hash is then left unset.
// Append copies ev before queueing; the caller may reuse it on return.
func (l *Log) Append(ctx context.Context, ev *Event) error {
	return l.AppendWith(ctx, ev, nil)
}

// AppendWith is Append for an event that announces a row of another
// repository, rec (see Entry.Record): the approval of a held call, the
// question of an ask-user call. The event and the row commit in one
// transaction, so neither exists without the other. When the store
// refuses the row, AppendWith fails with ErrUnavailable (wrapping a
// *RecordError) and the other events of the batch commit without it. rec
// must not change until AppendWith returns (or, after ctx ends, for as
// long as the event may still be committed).
func (l *Log) AppendWith(ctx context.Context, ev *Event, rec any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if ev.ID == "" {
		ev.ID = l.newID()
	}
	if ev.Time == "" {
		ev.Time = FormatTime(l.now())
	}
	if ev.TraceID == "" {
		if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
			ev.TraceID = sc.TraceID().String()
		}
	}
	ev.LeafVersion = CurrentLeafVersion // the log writes only the current version
	e := *ev
	e.Chain, e.Seq, e.PrevHash, e.Hash, e.LogIndex = "", 0, "", "", nil
	p, err := l.prepare(&e)
	if err != nil {
		l.m.failed.Inc()
		return err
	}
	p.rec = rec

	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		l.m.failed.Inc()
		return ErrClosed
	}
	select {
	case l.queue <- p:
		l.mu.RUnlock()
	default:
		l.mu.RUnlock()
		l.m.overloaded.Inc()
		return ErrOverloaded
	}

	select {
	case err := <-p.result:
		if err != nil {
			return err
		}
		ev.Chain, ev.Seq, ev.PrevHash, ev.Hash, ev.LogIndex = "", 0, "", p.ev.Hash, nil
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// prepare validates e, encodes and hashes it, in the caller's goroutine.
func (l *Log) prepare(e *Event) (*pending, error) {
	if e.Tenant == "" {
		return nil, fmt.Errorf("%w: no tenant", ErrInvalidEvent)
	}
	// PostgreSQL text cannot hold NUL: one such value would fail the whole
	// batch, and with it other callers' events. Refuse it alone, on every
	// store alike.
	for _, f := range []string{e.Tenant, e.ID, e.Tool, e.Principal, e.Outcome, e.Phase, e.SessionID, e.CallID, e.DecisionID} {
		if strings.IndexByte(f, 0) >= 0 {
			return nil, fmt.Errorf("%w: NUL in an indexed field", ErrInvalidEvent)
		}
	}
	if _, err := TimeMS(e); err != nil {
		return nil, err
	}
	buf := templateBufs.Get().(*[]byte)
	t, err := newTemplateInto(*buf, e)
	if err != nil {
		templateBufs.Put(buf)
		return nil, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	raw, hash := t.link(0, "")
	if cap(t.b) <= 64<<10 { // an outsized event's buffer is not kept
		*buf = t.b[:0]
		templateBufs.Put(buf)
	}
	e.Hash = hash
	return &pending{ev: e, raw: raw, result: make(chan error, 1)}, nil
}

// Close stops accepting events, commits everything queued and stops the
// writer, then lets the integrator take in what it can within a few
// seconds and stops it (what is left is integrated by the next Log on the
// database, or by another replica). Append after Close returns ErrClosed.
// Close is idempotent.
func (l *Log) Close() error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.queue)
	}
	l.mu.Unlock()
	<-l.done
	l.tree.stop()
	return nil
}

// run is the writer: it drains the queue in batches until Close.
func (l *Log) run() {
	defer close(l.done)
	batch := make([]*pending, 0, l.maxBatch)
	for p := range l.queue {
		batch = append(batch[:0], p)
	fill:
		for len(batch) < l.maxBatch {
			select {
			case p, ok := <-l.queue:
				if !ok {
					break fill
				}
				batch = append(batch, p)
			default:
				break fill
			}
		}
		l.commit(batch)
		clear(batch)
	}
}

// commit inserts one batch. An entry whose record the store refused is
// failed alone and the rest of the batch is committed again: nothing of
// the refused attempt landed.
func (l *Log) commit(batch []*pending) {
	// The batch belongs to many callers; none of their contexts may cancel it.
	ctx := context.Background()
	l.m.batchSize.Observe(float64(len(batch)))
	entries := make([]Entry, len(batch))
	for i, p := range batch {
		entries[i] = Entry{Event: p.ev, Raw: p.raw, Record: p.rec}
	}
	for len(batch) > 0 {
		start := time.Now()
		err := l.store.Insert(ctx, entries)
		l.m.commit.Observe(time.Since(start).Seconds())
		var re *RecordError
		if errors.As(err, &re) && re.Index >= 0 && re.Index < len(batch) {
			l.fail(batch[re.Index:re.Index+1], err)
			batch = append(batch[:re.Index:re.Index], batch[re.Index+1:]...)
			entries = append(entries[:re.Index:re.Index], entries[re.Index+1:]...)
			continue
		}
		l.health.record(err)
		if err != nil {
			l.fail(batch, err)
			return
		}
		l.m.ok.Add(float64(len(batch)))
		for _, p := range batch {
			p.result <- nil
		}
		l.tree.committed(batch)
		return
	}
}

func (l *Log) fail(batch []*pending, err error) {
	l.logger.Error("audit batch not committed", "events", len(batch), "err", err)
	l.m.failed.Add(float64(len(batch)))
	werr := fmt.Errorf("%w: %w", ErrUnavailable, err)
	for _, p := range batch {
		p.result <- werr
	}
}

// Query returns the tenant's events matching f, newest first. Errors:
// ErrBadFilter, ErrBadCursor (both mean a bad request), ErrUnavailable.
func (l *Log) Query(ctx context.Context, tenant string, f Filter) (Page, error) {
	f, err := f.Normalize()
	if err != nil {
		return Page{}, err
	}
	page, err := l.store.Query(ctx, tenant, f)
	return page, storeErr(err)
}

// Get returns one of the tenant's events, or ErrNotFound (also for another
// tenant's id).
func (l *Log) Get(ctx context.Context, tenant, id string) (*Event, error) {
	ev, err := l.store.Get(ctx, tenant, id)
	return ev, storeErr(err)
}

// Ping reports whether events can be committed (readiness): the store
// answers, and its last write succeeded. While commits are failing it
// probes the store with a write (Store.Probe), since an unready gateway
// may get no traffic to prove otherwise: ErrCommitsFailing while that
// fails too, nil (and the Log healthy again) once it succeeds.
func (l *Log) Ping(ctx context.Context) error {
	if err := l.store.Ping(ctx); err != nil {
		return storeErr(err)
	}
	gen, failing := l.health.get()
	if failing == nil {
		return nil
	}
	err := l.store.Probe(ctx)
	if err != nil && ctx.Err() != nil {
		return ctx.Err() // the caller gave up; no verdict
	}
	l.health.recordIf(gen, err)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCommitsFailing, err)
	}
	return nil
}

// storeErr passes the errors that mean something to callers and marks the
// rest as the store being unavailable.
func storeErr(err error) error {
	switch {
	case err == nil, errors.Is(err, ErrNotFound), errors.Is(err, ErrBadCursor),
		errors.Is(err, ErrBadFilter), errors.Is(err, ErrUnavailable),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}
