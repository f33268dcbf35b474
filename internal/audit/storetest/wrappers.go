package storetest

import (
	"context"
	"errors"
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
	// faultAfter lets the store commit, then reports failure: the commit
	// landed but its acknowledgement was lost.
	faultAfter
)

// faultyStore injects Insert failures on demand.
type faultyStore struct {
	audit.Store
	mu     sync.Mutex
	insert fault
}

func (s *faultyStore) set(f fault) {
	s.mu.Lock()
	s.insert = f
	s.mu.Unlock()
}

func (s *faultyStore) Insert(ctx context.Context, entries []audit.Entry) error {
	s.mu.Lock()
	f := s.insert
	s.mu.Unlock()
	switch f {
	case faultBefore:
		return errUnreachable
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
