package pipeline

import "sync"

// waiters wakes long-polling callers when a call they wait for changes
// (answered, approved and finished, denied, expired). Each key has one
// channel, closed and replaced on change, so a waiter never misses a
// change that happens after it subscribed; nothing polls.
type waiters struct {
	mu     sync.Mutex
	m      map[string]*waitEntry
	closed bool
}

type waitEntry struct {
	ch chan struct{}
	n  int // subscribers
}

// closedCh is returned once the waiters are closed.
var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// subscribe returns a channel closed on the next change of key, and a
// release function the waiter must call when it stops waiting. stopping
// is true once the gateway shuts down: the caller answers at once.
func (w *waiters) subscribe(key string) (ch <-chan struct{}, release func(), stopping bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return closedCh, func() {}, true
	}
	if w.m == nil {
		w.m = map[string]*waitEntry{}
	}
	e := w.m[key]
	if e == nil {
		e = &waitEntry{ch: make(chan struct{})}
		w.m[key] = e
	}
	e.n++
	return e.ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if e.n--; e.n == 0 && w.m[key] == e {
			delete(w.m, key)
		}
	}, false
}

// notify wakes the waiters of key.
func (w *waiters) notify(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.m[key]; e != nil {
		close(e.ch)
		delete(w.m, key)
	}
}

// close wakes every waiter and makes later subscriptions return at once.
func (w *waiters) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	for k, e := range w.m {
		close(e.ch)
		delete(w.m, k)
	}
}

// size is the number of keys waited on (tests check that nothing leaks).
func (w *waiters) size() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.m)
}

func callKey(tenant, callID string) string { return tenant + "\x00" + callID }
