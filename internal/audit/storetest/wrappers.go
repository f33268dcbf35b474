package storetest

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/toolgate/toolgate/internal/audit"
)

// Test doubles that wrap a real store: they inject faults around it but
// leave persisting and querying to the store under test.

var (
	errUnreachable = errors.New("storetest: store unreachable")
	errLostAck     = errors.New("storetest: commit acknowledgement lost")
)

type fault int

const (
	faultNone fault = iota
	// faultBefore fails Insert without reaching the store (it is down).
	faultBefore
	// faultMidway makes the store itself fail halfway through the batch:
	// a copy of the first event (same id, later seq) is appended, so the
	// unique id constraint fires after some rows went in. The store must
	// roll all of them back.
	faultMidway
	// faultAfter lets the store commit, then reports failure: the commit
	// landed but its acknowledgement was lost.
	faultAfter
)

// faultyStore injects Insert (and Heads) failures on demand.
type faultyStore struct {
	audit.Store
	mu        sync.Mutex
	insert    fault
	headsFail bool
}

func (s *faultyStore) set(f fault, headsFail bool) {
	s.mu.Lock()
	s.insert, s.headsFail = f, headsFail
	s.mu.Unlock()
}

func (s *faultyStore) Insert(ctx context.Context, entries []audit.Entry) error {
	s.mu.Lock()
	f := s.insert
	s.mu.Unlock()
	switch f {
	case faultBefore:
		return errUnreachable
	case faultMidway:
		dup := *entries[0].Event
		dup.Seq = entries[len(entries)-1].Event.Seq + 1000
		err := s.Store.Insert(ctx, append(slices.Clone(entries), audit.Entry{Event: &dup, Raw: entries[0].Raw}))
		if err == nil {
			return errors.New("storetest: store accepted a duplicate event id")
		}
		return err
	case faultAfter:
		if err := s.Store.Insert(ctx, entries); err != nil {
			return err
		}
		return errLostAck
	}
	return s.Store.Insert(ctx, entries)
}

// Probe fails while the store is unreachable, like Insert.
func (s *faultyStore) Probe(ctx context.Context) error {
	s.mu.Lock()
	f := s.insert
	s.mu.Unlock()
	if f == faultBefore {
		return errUnreachable
	}
	return s.Store.Probe(ctx)
}

func (s *faultyStore) Heads(ctx context.Context, chain string) (map[string]audit.Head, error) {
	s.mu.Lock()
	fail := s.headsFail
	s.mu.Unlock()
	if fail {
		return nil, errUnreachable
	}
	return s.Store.Heads(ctx, chain)
}

// gatedStore holds every Insert until released, so a test can fill the
// queue behind a batch in flight.
type gatedStore struct {
	audit.Store
	entered chan struct{} // one token per Insert that reached the gate
	release chan struct{}
	once    sync.Once
}

func newGatedStore(s audit.Store) *gatedStore {
	return &gatedStore{Store: s, entered: make(chan struct{}, 1024), release: make(chan struct{})}
}

func (s *gatedStore) open() { s.once.Do(func() { close(s.release) }) }

func (s *gatedStore) Insert(ctx context.Context, entries []audit.Entry) error {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.release
	return s.Store.Insert(ctx, entries)
}
