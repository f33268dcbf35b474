package quota

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestMeterRoomAndFull(t *testing.T) {
	var used atomic.Int64
	m := NewMeter(Accounting, 100, func() (int64, error) { return used.Load(), nil }, nil)
	defer m.Close()
	for _, c := range []struct {
		used, room int64
		full       bool
	}{{0, 100, false}, {40, 60, false}, {99, 1, false}, {100, 0, true}, {150, -50, true}} {
		used.Store(c.used)
		if err := m.Measure(); err != nil {
			t.Fatal(err)
		}
		if m.Room() != c.room || m.Full() != c.full || m.Used() != c.used {
			t.Errorf("used %d: room %d full %v, want room %d full %v", c.used, m.Room(), m.Full(), c.room, c.full)
		}
	}
	if m.Hard() || m.Mode() != Accounting || m.Limit() != 100 {
		t.Errorf("mode %s hard %v limit %d", m.Mode(), m.Hard(), m.Limit())
	}
}

// The kernel keeps a metadata reservation inside a qgroup's limit: a
// btrfs workspace is full a little before its referenced bytes reach it.
func TestBtrfsMeterKeepsAMargin(t *testing.T) {
	m := NewMeter(BtrfsQgroup, 1<<20, func() (int64, error) { return 1<<20 - 16<<10, nil }, nil)
	defer m.Close()
	if err := m.Measure(); err != nil {
		t.Fatal(err)
	}
	if !m.Hard() || !m.Full() {
		t.Errorf("16 KiB under a btrfs limit: hard %v full %v, want both", m.Hard(), m.Full())
	}
}

// A measurement that fails counts the workspace as full until one
// succeeds: nothing a tenant does to its tree can hide bytes from the
// count.
func TestFailedMeasurementCountsAsFull(t *testing.T) {
	fail := atomic.Bool{}
	fail.Store(true)
	m := NewMeter(Accounting, 1<<20, func() (int64, error) {
		if fail.Load() {
			return 0, errors.New("unreadable")
		}
		return 10, nil
	}, nil)
	defer m.Close()
	if err := m.Measure(); err == nil || !m.Full() || m.Room() != 0 {
		t.Fatalf("failed measurement: err %v full %v room %d", err, m.Full(), m.Room())
	}
	fail.Store(false)
	if err := m.Measured(context.Background(), m.Changed()); err != nil {
		t.Fatal(err)
	}
	if m.Full() || m.Room() != 1<<20-10 {
		t.Fatalf("after a good measurement: full %v room %d", m.Full(), m.Room())
	}
}

// Changed never blocks and never runs two measurements of one workspace
// at once: the requests that arrive while one runs share the next one,
// and a ticket is only answered by a measurement that began after it.
func TestChangedCoalescesMeasurements(t *testing.T) {
	var runs, concurrent, most atomic.Int32
	gate := make(chan struct{})
	started := make(chan struct{}, 10)
	m := NewMeter(Accounting, 1000, func() (int64, error) {
		n := concurrent.Add(1)
		if n > most.Load() {
			most.Store(n)
		}
		started <- struct{}{}
		<-gate
		concurrent.Add(-1)
		return int64(runs.Add(1)), nil
	}, nil)
	defer m.Close()

	first := m.Changed()
	<-started // the first measurement is under way and blocked
	var tickets []uint64
	for range 20 {
		tickets = append(tickets, m.Changed()) // returns at once
	}
	last := tickets[len(tickets)-1]

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	if err := m.Measured(ctx, first); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Measured returned %v before the measurement ended", err)
	}
	cancel()

	gate <- struct{}{} // the first ends
	if err := m.Measured(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	if m.Used() != 1 {
		t.Fatalf("used %d after the first measurement", m.Used())
	}
	<-started // one more measurement, for all twenty requests
	gate <- struct{}{}
	if err := m.Measured(context.Background(), last); err != nil {
		t.Fatal(err)
	}
	if runs.Load() != 2 || most.Load() != 1 || m.Used() != 2 {
		t.Fatalf("runs %d, most at once %d, used %d; want 2, 1, 2", runs.Load(), most.Load(), m.Used())
	}
	select {
	case <-started:
		t.Fatal("a third measurement ran although every ticket was covered")
	default:
	}
}

func TestClosedMeterAnswersWaitersAndMeasuresNoMore(t *testing.T) {
	var runs atomic.Int32
	m := NewMeter(Accounting, 1000, func() (int64, error) { runs.Add(1); return 0, nil }, nil)
	if err := m.Measured(context.Background(), m.Changed()); err != nil {
		t.Fatal(err)
	}
	m.Close()
	before := runs.Load()
	ticket := m.Changed()
	if err := m.Measured(context.Background(), ticket); err != nil {
		t.Fatal(err)
	}
	if runs.Load() != before {
		t.Fatal("a closed meter measured")
	}
}
