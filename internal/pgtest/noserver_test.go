package pgtest

import (
	"testing"
	"time"
)

// recorder is a testing.TB that records Skip and Fatal instead of ending
// the test.
type recorder struct {
	testing.TB
	skipped, failed bool
}

func (r *recorder) Helper()           {}
func (r *recorder) Skip(...any)       { r.skipped = true }
func (r *recorder) Fatal(args ...any) { r.failed = true }

func TestWithoutAServerTestsSkipButFailInCI(t *testing.T) {
	for _, tc := range []struct {
		ci           string
		skip, failed bool
	}{
		{"", true, false},
		{"false", true, false},
		{"true", false, true},
	} {
		t.Run("CI="+tc.ci, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			r := &recorder{TB: t}
			noServer(r, "no Docker engine is reachable")
			if r.skipped != tc.skip || r.failed != tc.failed {
				t.Fatalf("skipped %v, failed %v; want skipped %v, failed %v", r.skipped, r.failed, tc.skip, tc.failed)
			}
		})
	}
}

func TestSchemaNamesAreUniqueAndDated(t *testing.T) {
	now := time.Unix(1_750_000_000, 0)
	a, err := newSchemaName(now)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := newSchemaName(now)
	if a == b {
		t.Fatalf("two names alike: %s", a)
	}
	if at, ok := schemaTime(a); !ok || !at.Equal(now) {
		t.Fatalf("schemaTime(%s) = %v, %v; want %v", a, at, ok, now)
	}
	for _, other := range []string{"public", "tg_", "tg_x_1", "audit"} {
		if _, ok := schemaTime(other); ok {
			t.Errorf("schemaTime(%q) recognized a name pgtest did not make", other)
		}
	}
}
