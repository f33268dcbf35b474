package sandbox

import (
	"os"
	"sync"
	"time"
)

// cleanups runs a Jailer's deferred cgroup removals in the background and
// lets Close stop them and wait for them: no goroutine of a closed Jailer
// is left behind (what a removal did not finish, the next start's sweep
// removes).
type cleanups struct {
	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup
	quit    chan struct{}
	// quitR reaches EOF when Close runs, so that a removal blocked in
	// poll(2) on a process wakes too.
	quitR, quitW *os.File
}

func newCleanups() (*cleanups, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	return &cleanups{quit: make(chan struct{}), quitR: r, quitW: w}, nil
}

// run runs f in the background, or at once when the Jailer is closing (f
// then sees quit closed and makes one attempt).
func (c *cleanups) run(f func()) {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		f()
		return
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		f()
	}()
}

// wait waits for d, and reports false without waiting once Close runs.
func (c *cleanups) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.quit:
		return false
	case <-t.C:
		return true
	}
}

// closing reports whether stop has been called.
func (c *cleanups) closing() bool {
	select {
	case <-c.quit:
		return true
	default:
		return false
	}
}

// stop tells every removal to make its last attempt, and waits for them.
func (c *cleanups) stop() {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.stopped = true
	close(c.quit)
	c.quitW.Close()
	c.mu.Unlock()
	c.wg.Wait()
	c.quitR.Close()
}
