package tlog_test

import (
	"crypto/rand"
	"math/bits"
	mrand "math/rand/v2"
	"testing"

	"github.com/toolgate/toolgate/internal/tlog"
)

// randomState is a valid State of the given size with random hashes:
// integration costs the same whatever the hashes are, and building a real
// tree of a million entries would dominate the benchmark's setup.
func randomState(size uint64) tlog.State {
	st := tlog.State{Size: size, Hashes: make([][]byte, bits.OnesCount64(size))}
	for i := range st.Hashes {
		st.Hashes[i] = make([]byte, 32)
		rand.Read(st.Hashes[i])
	}
	return st
}

func BenchmarkIntegrate(b *testing.B) {
	for _, bc := range []struct {
		name  string
		size  uint64
		batch int
	}{
		{"1000_into_1M", 1_000_000, 1000},
		{"1_into_1M", 1_000_000, 1},
		{"10000_into_1M", 1_000_000, 10000},
	} {
		b.Run(bc.name, func(b *testing.B) {
			st := randomState(bc.size)
			es := entries(bc.batch)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tlog.Integrate(st, es); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*bc.batch), "ns/entry")
		})
	}
}

func BenchmarkProveInclusion(b *testing.B) {
	const size = 100_003 // not a power of two: proofs have an ephemeral node
	_, nodes := build(b, entries(size), 10_000)
	rnd := mrand.New(mrand.NewPCG(1, 1))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tlog.ProveInclusion(ctx, nodes, rnd.Uint64N(size), size); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkProveConsistency(b *testing.B) {
	const size = 100_003
	_, nodes := build(b, entries(size), 10_000)
	rnd := mrand.New(mrand.NewPCG(1, 1))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tlog.ProveConsistency(ctx, nodes, rnd.Uint64N(size)+1, size); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRootOf is the offline check's cost per exported event.
func BenchmarkRootOf(b *testing.B) {
	es := entries(100_000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tlog.RootOf(es); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(es)), "ns/entry")
}

func BenchmarkSignAndOpenCheckpoint(b *testing.B) {
	s, _ := newSigner(b)
	cp := sampleCheckpoint("acme", 1_000_000)
	b.ReportAllocs()
	for b.Loop() {
		msg, err := s.Sign(cp)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Verifier().Open(msg, "toolgate/acme"); err != nil {
			b.Fatal(err)
		}
	}
}
