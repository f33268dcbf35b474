package quota

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
)

// Mode is how a workspace is held to its limit.
type Mode string

// The modes, as the start log and /readyz name them.
const (
	// BtrfsQgroup: the kernel enforces the limit (a btrfs qgroup).
	BtrfsQgroup Mode = "btrfs-qgroup"
	// Accounting: the gateway measures the workspace and refuses writes
	// once it is full; soft.
	Accounting Mode = "accounting"
)

// btrfsMargin is the room under which a btrfs workspace counts as full:
// the kernel keeps a metadata reservation (a node per transaction) inside
// the qgroup's limit, so writes fail before the referenced bytes reach it.
const btrfsMargin = 64 << 10

// Meter holds one workspace's last measured usage against its limit and
// measures it again when asked, one measurement at a time.
type Meter struct {
	mode    Mode
	limit   int64
	margin  int64
	reason  string
	measure func() (int64, error)
	log     *slog.Logger

	used   atomic.Int64
	failed atomic.Bool // the last measurement failed: counted as full

	mu      sync.Mutex
	asked   uint64        // tickets handed out by Changed
	done    uint64        // the highest ticket a finished measurement covers
	running bool          // a measuring goroutine is active
	closed  bool          // no more measurements start
	ended   chan struct{} // closed and replaced whenever a measurement ends
	idle    sync.WaitGroup
}

// NewMeter returns a Meter that measures with measure, for tests and for
// callers that pick the mechanism themselves. Open is the usual way.
func NewMeter(mode Mode, limit int64, measure func() (int64, error), log *slog.Logger) *Meter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Meter{mode: mode, limit: limit, measure: measure, log: log, ended: make(chan struct{})}
	if mode == BtrfsQgroup {
		m.margin = btrfsMargin
	}
	return m
}

// Mode is how the limit is enforced.
func (m *Meter) Mode() Mode { return m.mode }

// Hard reports whether the kernel enforces the limit.
func (m *Meter) Hard() bool { return m.mode == BtrfsQgroup }

// Limit is the enforced limit in bytes.
func (m *Meter) Limit() int64 { return m.limit }

// Reason says why the mode was chosen (a fallback's cause), for the log.
func (m *Meter) Reason() string { return m.reason }

// Used is the last measured usage in bytes.
func (m *Meter) Used() int64 { return m.used.Load() }

// Room is how many more bytes the workspace may take according to the
// last measurement; 0 or less when it is full. A failed measurement
// leaves no room (fail closed) until one succeeds.
func (m *Meter) Room() int64 {
	if m.failed.Load() {
		return 0
	}
	return m.limit - m.margin - m.used.Load()
}

// Full reports whether the workspace is at or over its limit.
func (m *Meter) Full() bool { return m.Room() <= 0 }

// Measure measures the workspace now, on the caller's goroutine (at
// start).
func (m *Meter) Measure() error {
	n, err := m.measure()
	if err != nil {
		m.failed.Store(true)
		return err
	}
	m.used.Store(n)
	m.failed.Store(false)
	return nil
}

// Changed says the workspace may have changed size and returns a ticket
// for Measured. It never blocks: the measurement runs on a goroutine of
// its own, and the requests that arrive while one runs share the next.
func (m *Meter) Changed() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.asked++
	if !m.running && !m.closed {
		m.running = true
		m.idle.Add(1)
		go m.loop()
	}
	return m.asked
}

// loop measures until every ticket handed out is covered.
func (m *Meter) loop() {
	defer m.idle.Done()
	for {
		m.mu.Lock()
		if m.done >= m.asked || m.closed {
			m.running = false
			m.mu.Unlock()
			return
		}
		ticket := m.asked
		m.mu.Unlock()
		if err := m.Measure(); err != nil {
			m.log.Error("workspace not measured: counted as full until a measurement succeeds", "mode", string(m.mode), "err", err)
		}
		m.mu.Lock()
		m.done = ticket
		close(m.ended)
		m.ended = make(chan struct{})
		m.mu.Unlock()
	}
}

// Measured waits until a measurement that started after ticket was handed
// out has ended, or ctx ends (its error), or the Meter is closed.
func (m *Meter) Measured(ctx context.Context, ticket uint64) error {
	for {
		m.mu.Lock()
		if m.done >= ticket || m.closed {
			m.mu.Unlock()
			return nil
		}
		ended := m.ended
		m.mu.Unlock()
		select {
		case <-ended:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close stops measuring and waits for a measurement under way.
func (m *Meter) Close() error {
	m.mu.Lock()
	m.closed = true
	close(m.ended)
	m.ended = make(chan struct{})
	m.mu.Unlock()
	m.idle.Wait()
	return nil
}
