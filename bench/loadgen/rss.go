package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// rssSampler polls /proc/PID/status and keeps the highest VmRSS seen, so
// each run reports its own peak rather than the process's lifetime peak.
type rssSampler struct {
	path string
	done chan struct{}
	wg   sync.WaitGroup
	peak int64
}

// startRSSSampler begins sampling pid every interval.
func startRSSSampler(pid int, interval time.Duration) (*rssSampler, error) {
	s := &rssSampler{path: fmt.Sprintf("/proc/%d/status", pid), done: make(chan struct{})}
	rss, _, err := s.read()
	if err != nil {
		return nil, fmt.Errorf("-pid %d: %w", pid, err)
	}
	s.peak = rss
	s.wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				if rss, _, err := s.read(); err == nil && rss > s.peak {
					s.peak = rss
				}
			}
		}
	})
	return s, nil
}

// stop ends sampling and returns the peak VmRSS seen and the final VmHWM, in KiB.
func (s *rssSampler) stop() (peakRSS, hwm int64) {
	close(s.done)
	s.wg.Wait()
	rss, hwm, err := s.read()
	if err == nil && rss > s.peak {
		s.peak = rss
	}
	return s.peak, hwm
}

// read returns VmRSS and VmHWM in KiB.
func (s *rssSampler) read() (rss, hwm int64, err error) {
	b, err := os.ReadFile(s.path)
	if err != nil {
		return 0, 0, err
	}
	return parseStatus(b)
}

// parseStatus extracts VmRSS and VmHWM (KiB) from /proc/PID/status text.
func parseStatus(b []byte) (rss, hwm int64, err error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	found := 0
	for sc.Scan() {
		line := sc.Bytes()
		var dst *int64
		switch {
		case bytes.HasPrefix(line, []byte("VmRSS:")):
			dst = &rss
		case bytes.HasPrefix(line, []byte("VmHWM:")):
			dst = &hwm
		default:
			continue
		}
		fields := bytes.Fields(line)
		if len(fields) < 2 {
			return 0, 0, fmt.Errorf("malformed %q", line)
		}
		v, err := strconv.ParseInt(string(fields[1]), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("malformed %q", line)
		}
		*dst = v
		found++
	}
	if found < 2 {
		return 0, 0, fmt.Errorf("no VmRSS/VmHWM in %s", "status")
	}
	return rss, hwm, sc.Err()
}
