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
)

// LogOptions configure a Log. Zero values take the defaults.
type LogOptions struct {
	// Chain names this writer's chain segment; one per replica, so replicas
	// never contend on one chain head. Default "main".
	Chain string
	// QueueSize bounds the events waiting for the writer; beyond it Append
	// fails fast with ErrOverloaded. Default 4096.
	QueueSize int
	// MaxBatch bounds the events committed in one transaction. Default 256.
	MaxBatch int
	// Now is the clock for event times. Default time.Now.
	Now func() time.Time
	// NewID makes event ids. Default: UUID v7 strings.
	NewID func() string
	// Logger receives commit failures. Default: discard.
	Logger *slog.Logger
	// Registerer gets the Log's metrics; nil leaves them unregistered.
	Registerer prometheus.Registerer
}

// Log is the append-only, hash-chained audit log in front of a Store. It is
// the only audit type the rest of the gateway talks to.
//
// Appends are group-committed: one writer goroutine drains a bounded queue,
// takes whatever is queued when it wakes (up to MaxBatch, it never waits for
// more), assigns each event its (tenant, chain) position and hash in queue
// order, commits the batch with one Store.Insert and then wakes every
// waiter with the result.
type Log struct {
	store    Store
	chain    string
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

	// heads are the chain heads of committed events, written only by the
	// writer; headsMu lets Verify read them.
	headsMu sync.Mutex
	heads   map[string]Head
	// stale is writer-only: a failed commit may or may not have landed, so
	// the heads are reloaded from the store before the next batch.
	stale bool

	// health is the outcome of the last write (a batch or a probe), for
	// readiness.
	health health
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

// pending is one queued append. ev is the Log's own copy of the event;
// rec is the record that commits with it (Entry.Record), if any.
type pending struct {
	ev     *Event
	rec    any
	tmpl   template
	result chan error // buffered: the writer never blocks on a waiter
}

// NewLog starts a Log on store. It loads the chain heads, so that a
// restarted gateway continues its chain, and starts the writer goroutine;
// Close stops it. Close does not close the store: its opener owns it.
func NewLog(store Store, opts LogOptions) (*Log, error) {
	if opts.Chain == "" {
		opts.Chain = "main"
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 4096
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 256
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
	heads, err := store.Heads(context.Background(), opts.Chain)
	if err != nil {
		return nil, fmt.Errorf("%w: loading chain heads: %w", ErrUnavailable, err)
	}
	if heads == nil {
		heads = map[string]Head{}
	}
	l := &Log{
		store:    store,
		chain:    opts.Chain,
		maxBatch: opts.MaxBatch,
		now:      opts.Now,
		newID:    opts.NewID,
		logger:   opts.Logger,
		queue:    make(chan *pending, opts.QueueSize),
		done:     make(chan struct{}),
		heads:    heads,
	}
	l.m, err = newLogMetrics(opts.Registerer, func() int { return len(l.queue) })
	if err != nil {
		return nil, err
	}
	go l.run()
	return l, nil
}

// Chain is the name of the chain segment this Log writes.
func (l *Log) Chain() string { return l.chain }

// Append commits ev and returns once it is durable. It fills ev.ID (when
// empty) and ev.Time (when empty, from the clock) before queueing, and
// ev.Chain, Seq, PrevHash and Hash once committed.
//
// Errors: ErrOverloaded when the queue is full (nothing was queued),
// ErrUnavailable (wrapped) when the store could not commit the batch,
// ErrInvalidEvent (wrapped) for an event without tenant, with an
// unparsable time or a value with no JSON form, ErrClosed after Close.
//
// If ctx ends while the event waits for its batch, Append returns ctx.Err(),
// but the event stays queued and may still be committed: an abandoned
// append is not a retracted one. ev's chain fields are then left unset.
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
	e := *ev
	e.Chain, e.Seq, e.PrevHash, e.Hash = l.chain, 0, "", ""
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
		ev.Chain, ev.Seq, ev.PrevHash, ev.Hash = p.ev.Chain, p.ev.Seq, p.ev.PrevHash, p.ev.Hash
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// prepare validates e and encodes it, in the caller's goroutine.
func (l *Log) prepare(e *Event) (*pending, error) {
	if e.Tenant == "" {
		return nil, fmt.Errorf("%w: no tenant", ErrInvalidEvent)
	}
	// PostgreSQL text cannot hold NUL: one such value would fail the whole
	// batch, and with it other callers' events. Refuse it alone, on every
	// store alike.
	for _, f := range []string{e.Tenant, e.Chain, e.ID, e.Tool, e.Principal, e.Outcome, e.Phase, e.SessionID, e.CallID, e.DecisionID} {
		if strings.IndexByte(f, 0) >= 0 {
			return nil, fmt.Errorf("%w: NUL in an indexed field", ErrInvalidEvent)
		}
	}
	if _, err := e.TimeMS(); err != nil {
		return nil, err
	}
	t, err := newTemplate(e)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	return &pending{ev: e, tmpl: t, result: make(chan error, 1)}, nil
}

// Close stops accepting events, commits everything queued and stops the
// writer. Append after Close returns ErrClosed. Close is idempotent.
func (l *Log) Close() error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.queue)
	}
	l.mu.Unlock()
	<-l.done
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

// commit chains and inserts one batch. The heads advance only when the
// store committed it. An entry whose record the store refused is failed
// alone and the rest of the batch is chained and committed again: nothing
// of the refused attempt landed.
func (l *Log) commit(batch []*pending) {
	// The batch belongs to many callers; none of their contexts may cancel it.
	ctx := context.Background()
	l.m.batchSize.Observe(float64(len(batch)))
	if l.stale {
		heads, err := l.store.Heads(ctx, l.chain)
		if err != nil {
			l.health.record(err)
			l.fail(batch, fmt.Errorf("reloading chain heads: %w", err))
			return
		}
		if heads == nil {
			heads = map[string]Head{}
		}
		l.headsMu.Lock()
		l.heads = heads
		l.headsMu.Unlock()
		l.stale = false
	}

	for len(batch) > 0 {
		staged, entries := l.chainBatch(batch)
		start := time.Now()
		err := l.store.Insert(ctx, entries)
		l.m.commit.Observe(time.Since(start).Seconds())
		var re *RecordError
		if errors.As(err, &re) && re.Index >= 0 && re.Index < len(batch) {
			l.fail(batch[re.Index:re.Index+1], err)
			batch = append(batch[:re.Index:re.Index], batch[re.Index+1:]...)
			continue
		}
		l.health.record(err)
		if err != nil {
			// The insert may have landed anyway (a lost commit
			// acknowledgement): reload the heads rather than trust or
			// advance ours.
			l.stale = true
			l.fail(batch, err)
			return
		}
		l.headsMu.Lock()
		for t, h := range staged {
			l.heads[t] = h
		}
		l.headsMu.Unlock()
		l.m.ok.Add(float64(len(batch)))
		for _, p := range batch {
			p.result <- nil
		}
		return
	}
}

// chainBatch assigns each event of the batch its position and hash after
// the committed heads, in queue order, and returns the heads the batch
// leaves and the entries to insert.
func (l *Log) chainBatch(batch []*pending) (map[string]Head, []Entry) {
	staged := make(map[string]Head, 4)
	entries := make([]Entry, len(batch))
	for i, p := range batch {
		h, ok := staged[p.ev.Tenant]
		if !ok {
			h = l.heads[p.ev.Tenant]
		}
		seq := h.Seq + 1
		raw, hash := p.tmpl.link(seq, h.Hash)
		p.ev.Seq, p.ev.PrevHash, p.ev.Hash = seq, h.Hash, hash
		staged[p.ev.Tenant] = Head{Seq: seq, Hash: hash}
		entries[i] = Entry{Event: p.ev, Raw: raw, Record: p.rec}
	}
	return staged, entries
}

func (l *Log) fail(batch []*pending, err error) {
	l.logger.Error("audit batch not committed", "events", len(batch), "chain", l.chain, "err", err)
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
