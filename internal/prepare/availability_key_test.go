package prepare

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/tools"
)

// availabilityKeyOfInput is the key AvailabilityKey must equal: the
// policy key of the document availability is evaluated on.
func availabilityKeyOfInput(t *testing.T, id *identity.Identity, session string, s *tools.Spec, choice map[string]any) [32]byte {
	t.Helper()
	doc := AvailabilityInput(id, session, s)
	if choice != nil {
		doc["choice"] = choice
	}
	k, err := PolicyKey(doc)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// The key written from the parts is the key of the document, whatever the
// parts hold: empty and nil lists, escapes, names beyond U+E000, nested
// claims, chooser values, optional members.
func TestAvailabilityKeyIsThePolicyKeyOfTheInput(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	words := []string{"", "alice", "dev\"eloper", "a\\b", "line\nbreak", "\u2028", "ünï", "\U0001F600", "\uff61", "<&>", "\x01"}
	word := func() string { return words[r.IntN(len(words))] }
	list := func() []string {
		switch r.IntN(4) {
		case 0:
			return nil
		case 1:
			return []string{}
		}
		out := make([]string, 1+r.IntN(3))
		for i := range out {
			out[i] = word()
		}
		return out
	}
	claims := func() map[string]any {
		switch r.IntN(4) {
		case 0:
			return nil
		case 1:
			return map[string]any{}
		}
		return map[string]any{
			word(): word(), "n": float64(r.IntN(1000)) / 8, "b": r.IntN(2) == 0, "nested": map[string]any{word(): []any{word(), 1.5, nil}},
		}
	}
	for i := range 500 {
		id := &identity.Identity{Tenant: word(), Principal: word(), Roles: list(), Groups: list(), Client: word(), Claims: claims(), Method: "jwt"}
		s := &tools.Spec{Name: word(), Kind: word(), Effects: list(), Action: word(), Description: word(),
			Annotations: tools.Annotations{ReadOnly: r.IntN(2) == 0, Destructive: r.IntN(2) == 0, Idempotent: r.IntN(2) == 0, OpenWorld: r.IntN(2) == 0}}
		if r.IntN(2) == 0 {
			s.SchemaDigest = "sha256:" + word()
		}
		var choice map[string]any
		if r.IntN(3) == 0 {
			choice = map[string]any{"type": "skill", "name": word(), "version": "1.0.0"}
		}
		session := word()
		got, err := AvailabilityKey(id, session, s, choice)
		if err != nil {
			t.Fatal(err)
		}
		if want := availabilityKeyOfInput(t, id, session, s, choice); got != want {
			t.Fatalf("case %d: %+v %q %+v %v: key %x, want %x", i, id, session, s, choice, got, want)
		}
	}
	// Invalid UTF-8 cannot be canonical JSON, either way.
	if _, err := AvailabilityKey(&identity.Identity{Principal: "\xff"}, "", &tools.Spec{}, nil); err == nil {
		t.Fatal("invalid UTF-8 gave a key")
	}
}

// AvailabilityKey names AvailabilityInput's members itself. Should the
// input ever show policy another member (a new identity or spec field),
// this list changes, and so must AvailabilityKey — or one cache entry
// would answer callers that differ in it.
func TestAvailabilityInputMembersAreTheKeyedOnes(t *testing.T) {
	var id identity.Identity
	var s tools.Spec
	fillNonZero(reflect.ValueOf(&id).Elem())
	fillNonZero(reflect.ValueOf(&s).Elem())
	var got []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		m, ok := v.(map[string]any)
		if !ok || prefix == "/principal/claims" {
			got = append(got, prefix)
			return
		}
		for k, e := range m {
			walk(prefix+"/"+k, e)
		}
	}
	walk("", AvailabilityInput(&id, "s", &s))
	slices.Sort(got)
	want := []string{
		"/client/id",
		"/principal/claims", "/principal/groups", "/principal/id", "/principal/roles",
		"/session_id", "/tenant",
		"/tool/annotations/destructive", "/tool/annotations/idempotent", "/tool/annotations/open_world", "/tool/annotations/read_only",
		"/tool/annotations_trusted", "/tool/definition_digest",
		"/tool/effects", "/tool/kind", "/tool/name", "/tool/schema_digest",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("AvailabilityInput's members changed:\n got %s\nwant %s\nupdate AvailabilityKey to write exactly them", strings.Join(got, " "), strings.Join(want, " "))
	}
	k, err := AvailabilityKey(&id, "s", &s, nil)
	if err != nil || k != availabilityKeyOfInput(t, &id, "s", &s, nil) {
		t.Fatalf("fully populated parts: key differs from the document's (%v)", err)
	}
}

// fillNonZero sets every field reachable in v to a value that is not the
// zero value of its type.
func fillNonZero(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillNonZero(v.Field(i))
			}
		}
	case reflect.String:
		v.SetString("v-" + v.Type().String())
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(7)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fillNonZero(s.Index(0))
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fillNonZero(k)
		if e.Kind() == reflect.Interface {
			e.Set(reflect.ValueOf("v"))
		} else {
			fillNonZero(e)
		}
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillNonZero(p.Elem())
		v.Set(p)
	default:
		panic(fmt.Sprintf("fillNonZero: %s", v.Type()))
	}
}

// BenchmarkAvailabilityKey compares the key written from its parts with
// the key of the built document (what every call paid before).
func BenchmarkAvailabilityKey(b *testing.B) {
	id := &identity.Identity{Tenant: "acme", Principal: "alice", Roles: []string{"developer"}, Client: "platform-a", Claims: map[string]any{"team": "red"}}
	s := &tools.Spec{Name: "read-file", Kind: tools.KindBuiltin, Effects: []string{"fs.read"}, Annotations: tools.Annotations{ReadOnly: true, Idempotent: true}}
	b.Run("parts", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := AvailabilityKey(id, "s-1", s, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("document", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := PolicyKey(AvailabilityInput(id, "s-1", s)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
