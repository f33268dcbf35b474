// Package lifecycle runs a gateway's background work — policy watchers,
// retention, sweeps, pruning, upstream refreshes, a debug listener — as
// named runners under one group that is always stopped and waited for
// before what the runners use (stores, engines) is closed.
package lifecycle

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Runner is one piece of background work: Run works until ctx ends, then
// returns. An error other than the context's is logged with Name (the
// work has stopped; the rest of the group goes on).
type Runner struct {
	Name string
	Run  func(ctx context.Context) error
}

// Group is a set of started runners.
type Group struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// Start starts every runner in a goroutine of its own, under a context
// derived from ctx.
func Start(ctx context.Context, log *slog.Logger, runners ...Runner) *Group {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	g := &Group{cancel: cancel}
	for _, r := range runners {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			if err := r.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				log.Error(r.Name+" stopped", "err", err)
			}
		}()
	}
	return g
}

// Stop ends every runner's context and waits until all have returned. It
// may be called more than once.
func (g *Group) Stop() {
	g.once.Do(g.cancel)
	g.wg.Wait()
}

// Every returns a runner that calls f at once and then every interval
// until ctx ends (a Ticker: a slow f delays, never stacks, the next).
func Every(name string, interval time.Duration, f func(ctx context.Context)) Runner {
	return Runner{Name: name, Run: func(ctx context.Context) error {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			f(ctx)
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	}}
}
