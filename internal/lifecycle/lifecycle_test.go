package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestStopEndsEveryRunnerAndWaits(t *testing.T) {
	var running, ended atomic.Int32
	started := make(chan struct{}, 3)
	slow := func(ctx context.Context) error {
		running.Add(1)
		started <- struct{}{}
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond) // work after the cancel: Stop must wait for it
		ended.Add(1)
		return ctx.Err()
	}
	g := Start(context.Background(), nil, Runner{"a", slow}, Runner{"b", slow}, Runner{"c", slow})
	for range 3 {
		<-started
	}
	g.Stop()
	if ended.Load() != 3 {
		t.Fatalf("Stop returned with %d of 3 runners still running", 3-ended.Load())
	}
	g.Stop() // a second Stop is harmless
}

func TestARunnerThatFailsIsLoggedAndTheOthersGoOn(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	other, failed := make(chan struct{}), make(chan struct{})
	g := Start(context.Background(), log,
		Runner{"watcher", func(context.Context) error { defer close(failed); return errors.New("boom") }},
		Runner{"other", func(ctx context.Context) error { close(other); <-ctx.Done(); return nil }},
	)
	<-other
	<-failed // the other runner goes on after this one failed
	g.Stop()
	if !strings.Contains(buf.String(), `msg="watcher stopped" err=boom`) {
		t.Fatalf("log: %s", buf.String())
	}
}

func TestAParentContextEndsTheGroup(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	g := Start(ctx, nil, Runner{"r", func(ctx context.Context) error { <-ctx.Done(); close(ran); return nil }})
	cancel()
	<-ran
	g.Stop()
}

func TestEveryRunsAtOnceThenOnItsTicker(t *testing.T) {
	calls := make(chan struct{}, 16)
	g := Start(context.Background(), nil, Every("tick", time.Millisecond, func(context.Context) { calls <- struct{}{} }))
	for range 3 {
		<-calls // the first at once, then one a tick
	}
	g.Stop()
}
