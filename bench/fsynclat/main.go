// Command fsynclat measures the latency of a 4 KiB write followed by
// fdatasync in a folder: the floor under any durable commit on that disk
// (SQLite with synchronous=FULL pays at least one per transaction).
// bench/compare.sh prints it next to the call-path overhead, which cannot
// be lower than one durable commit.
//
// Usage:
//
//	go run ./bench/fsynclat [-n 500] [DIR]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

func main() {
	n := flag.Int("n", 500, "number of write+fdatasync rounds")
	flag.Parse()
	dir := os.TempDir()
	if flag.NArg() > 0 {
		dir = flag.Arg(0)
	}
	d, err := measure(dir, *n)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fsynclat:", err)
		os.Exit(1)
	}
	fmt.Printf("fdatasync of a 4 KiB write, %d rounds: p50 %d µs, p90 %d µs, p99 %d µs\n", *n,
		pct(d, 50).Microseconds(), pct(d, 90).Microseconds(), pct(d, 99).Microseconds())
}

// measure appends 4 KiB and fdatasyncs n times in a new file under dir,
// returning the sorted fdatasync latencies.
func measure(dir string, n int) ([]time.Duration, error) {
	f, err := os.CreateTemp(dir, "fsynclat-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(filepath.Clean(f.Name()))
	defer f.Close()
	buf := make([]byte, 4096)
	d := make([]time.Duration, 0, n)
	for range n {
		if _, err := f.Write(buf); err != nil {
			return nil, err
		}
		t := time.Now()
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return nil, err
		}
		d = append(d, time.Since(t))
	}
	slices.Sort(d)
	return d, nil
}

func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}
