package shell

import (
	"sync"
	"unicode/utf8"
)

// outputRing retains the last cap bytes a background process wrote,
// addressed by absolute byte offsets (cursors) since it started. Readers can
// wait for new output through changed.
type outputRing struct {
	mu      sync.Mutex
	buf     []byte // ring storage, len ≤ cap
	cap     int
	start   int   // index in buf of the oldest retained byte (0 until full)
	total   int64 // bytes ever written
	closed  bool  // no more output will come
	changed chan struct{}
}

func newOutputRing(capacity int) *outputRing {
	return &outputRing{cap: capacity, changed: make(chan struct{})}
}

// Write appends p, dropping the oldest bytes past the cap.
func (r *outputRing) Write(p []byte) (int, error) {
	n := len(p)
	if n == 0 {
		return 0, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return n, nil
	}
	r.total += int64(n)
	if len(p) >= r.cap {
		r.buf = append(r.buf[:0], p[len(p)-r.cap:]...)
		r.start = 0
		p = nil
	}
	if room := r.cap - len(r.buf); room > 0 && len(p) > 0 {
		// Not full yet: the oldest byte is at index 0.
		k := min(room, len(p))
		r.buf = append(r.buf, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 { // full: overwrite the oldest bytes
		k := copy(r.buf[r.start:], p)
		p = p[k:]
		r.start = (r.start + k) % r.cap
	}
	r.notifyLocked()
	return n, nil
}

// close marks the end of output and wakes every waiter.
func (r *outputRing) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed = true
		r.notifyLocked()
	}
}

func (r *outputRing) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// chunk is one read of the ring.
type chunk struct {
	data    []byte
	next    int64 // cursor after data
	dropped int64 // bytes between the asked cursor and data that are gone
}

// read returns up to max bytes from cursor. A cursor before the retained
// window reads from the window's start and counts the bytes dropped; one
// past the end reads nothing. The chunk never ends inside a UTF-8 sequence
// unless that is all there is, and never starts inside one after a drop.
func (r *outputRing) read(cursor int64, max int) (chunk, <-chan struct{}, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch, closed := r.changed, r.closed
	first := r.total - int64(len(r.buf))
	var c chunk
	if cursor > r.total {
		cursor = r.total
	}
	if cursor < first {
		c.dropped = first - cursor
		cursor = first
		// Skip the rest of a character the drop cut through.
		for i := 0; i < utf8.UTFMax-1 && cursor < r.total && !utf8.RuneStart(r.at(cursor-first)); i++ {
			cursor++
			c.dropped++
		}
	}
	n := int(min(int64(max), r.total-cursor))
	data := make([]byte, n)
	for i := range data {
		data[i] = r.at(cursor - first + int64(i))
	}
	if cut := incompleteSuffix(data); cut > 0 && cut < len(data) {
		data = data[:len(data)-cut]
	}
	c.data = data
	c.next = cursor + int64(len(data))
	return c, ch, closed
}

// at is the byte at logical offset i of the retained window.
func (r *outputRing) at(i int64) byte {
	return r.buf[(int64(r.start)+i)%int64(len(r.buf))]
}

// incompleteSuffix is the length of a UTF-8 sequence cut at the end of b.
func incompleteSuffix(b []byte) int {
	for i := 1; i <= utf8.UTFMax-1 && i <= len(b); i++ {
		c := b[len(b)-i]
		if !utf8.RuneStart(c) {
			continue
		}
		if c < utf8.RuneSelf {
			return 0
		}
		need := 0
		switch {
		case c&0xE0 == 0xC0:
			need = 2
		case c&0xF0 == 0xE0:
			need = 3
		case c&0xF8 == 0xF0:
			need = 4
		}
		if need > i {
			return i
		}
		return 0
	}
	return 0
}
