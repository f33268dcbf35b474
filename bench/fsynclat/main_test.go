package main

import (
	"slices"
	"testing"
)

func TestMeasureReturnsSortedSamples(t *testing.T) {
	d, err := measure(t.TempDir(), 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != 5 || !slices.IsSorted(d) || d[0] <= 0 {
		t.Fatalf("samples %v", d)
	}
	if pct(d, 50) != d[2] || pct(nil, 50) != 0 {
		t.Fatal("percentile")
	}
}
