package canonical

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// slow is the reference: marshal, then RFC 8785 canonicalization.
func slow(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v, json.Deterministic(true))
	if err != nil {
		t.Fatal(err)
	}
	val := jsontext.Value(raw)
	if err := val.Canonicalize(); err != nil {
		t.Fatal(err)
	}
	return val
}

var tricky = []string{
	"", "a", "call_id", "\x00", "\x1f", "\x7f", "\"", "\\", "/", "\b\f\n\r\t", "<>&",
	"\u2028\u2029", "é", "\u00e9", "\ud7ff", "\ue000", "\uffff", "\U0001F600", "\U00010000",
	"aa", "a\U0001F600", "a\uff61", "\uff61", "z", "Z", "10", "1", "é\U0001F600\ue000",
}

func randomValue(r *rand.Rand, depth int) any {
	switch n := r.IntN(10); {
	case depth > 3 || n < 2:
		return tricky[r.IntN(len(tricky))]
	case n == 2:
		return []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 1e21, 1e-7, 123456789012345680, 5e-324,
			math.MaxFloat64, 1.5, -2.25, 9007199254740993, 1e300, 333333333.33333329}[r.IntN(15)]
	case n == 3:
		return r.IntN(2) == 0
	case n == 4:
		return nil
	case n == 5:
		return int64(r.Uint64() >> r.IntN(64))
	case n == 6:
		a := make([]any, r.IntN(4))
		for i := range a {
			a[i] = randomValue(r, depth+1)
		}
		return a
	case n == 7:
		return []string{tricky[r.IntN(len(tricky))], tricky[r.IntN(len(tricky))]}
	default:
		m := map[string]any{}
		for range r.IntN(6) {
			m[tricky[r.IntN(len(tricky))]] = randomValue(r, depth+1)
		}
		return m
	}
}

// The one-pass writer and the reference agree byte for byte on every kind
// of value, including member names that sort differently in UTF-8 and
// UTF-16, escapes, -0 and numbers at the edges of float64.
func TestMarshalMatchesCanonicalize(t *testing.T) {
	r := rand.New(rand.NewPCG(8785, 1))
	for i := range 5000 {
		v := randomValue(r, 0)
		got, err := Marshal(v)
		if err != nil {
			t.Fatalf("value %d %#v: %v", i, v, err)
		}
		if want := slow(t, v); !bytes.Equal(got, want) {
			t.Fatalf("value %d %#v:\n got %s\nwant %s", i, v, got, want)
		}
	}
	// Typed maps and a type only the slow path knows.
	type point struct{ X, Y int }
	for _, v := range []any{
		map[string]string{"\uff61": "b", "\U0001F600": "a", "a": "c"},
		map[string]int64{"b": 1 << 60, "a": -3},
		point{1, 2},
		map[string]any{"p": point{3, 4}, "f": float32(0.1)},
	} {
		got, err := Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if want := slow(t, v); !bytes.Equal(got, want) {
			t.Fatalf("%#v:\n got %s\nwant %s", v, got, want)
		}
	}
}

func TestMarshalRejectsWhatJSONCannotHold(t *testing.T) {
	for _, v := range []any{"\xff", map[string]any{"\xfe": 1}, math.NaN(), math.Inf(1), []any{math.Inf(-1)}} {
		if _, err := Marshal(v); err == nil {
			t.Errorf("%#v: no error", v)
		}
	}
}

func TestLessIsUTF16Order(t *testing.T) {
	// U+FF61 is above U+E000 in both orders' terms but sorts after a
	// supplementary character in UTF-16 only.
	if !Less("\U0001F600", "\uff61") || Less("\uff61", "\U0001F600") {
		t.Fatal("a surrogate pair must sort before U+FF61")
	}
	if !Less("a", "b") || Less("b", "a") || Less("a", "a") {
		t.Fatal("ASCII order broken")
	}
}

func BenchmarkMarshalDocument(b *testing.B) {
	doc := map[string]any{
		"version": 1, "tenant": "acme", "session_id": "s-1", "call_id": "01a237db-3183-79d3-ba87-df92336b22a1",
		"principal": map[string]any{"id": "alice", "roles": []any{"developer"}, "groups": []any{}, "claims": map[string]any{"team": "blue"}},
		"client":    map[string]any{"id": ""},
		"tool":      map[string]any{"name": "read-file", "kind": "builtin", "effects": []any{"fs.read"}, "annotations": map[string]any{"read_only": true, "destructive": false}},
		"action":    "fs.read",
		"resources": []any{map[string]any{"type": "file", "path": "docs/guide.md", "access": "read"}},
		"args":      map[string]any{"path": "docs/guide.md", "offset": 1.0, "limit": 2000.0},
	}
	b.Run("one-pass", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Marshal(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("marshal+canonicalize", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			raw, _ := json.Marshal(doc, json.Deterministic(true))
			v := jsontext.Value(raw)
			if err := v.Canonicalize(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
