package audit

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	apiv1 "github.com/toolgate/toolgate/api/v1"
)

// The one-pass event writer must produce exactly what marshal +
// Canonicalize produced before it, or every chain hash would change.
func TestCanonicalEventMatchesMarshal(t *testing.T) {
	base := func() *Event {
		return &Event{
			ID: "01a2", Time: "2026-12-02T17:00:00.000Z", Tenant: "acme", Principal: "alice",
			CallID: "c-1", DecisionID: "d-1", SessionID: "s-1", Tool: "read-file", Action: "fs.read",
			Phase: PhaseDecision, Outcome: "allow", Reasons: []string{"b", "a \"quoted\"\n"},
			PolicyRevision: "sha256:00", RequestDigest: "sha256:11", Chain: "main",
			Input: map[string]any{"args": map[string]any{"path": "docs/é\U0001F600.md", "n": 3.5, "ü": nil},
				"resources": []any{map[string]any{"type": "file"}}, "\uff61": true, "\U0001F600": false},
			DurationsUS: map[string]int64{"prepare": 19, "decide": 133},
		}
	}
	cases := map[string]func(*Event){
		"decision":          func(*Event) {},
		"with client":       func(e *Event) { e.Client = "platform-a" },
		"nil slices, maps":  func(e *Event) { e.Reasons, e.Input, e.DurationsUS = nil, nil, nil },
		"empty obligations": func(e *Event) { e.Obligations = map[string]any{} },
		"obligations": func(e *Event) {
			e.Obligations = map[string]any{"timeout_ms": 5000.0, "exclude_paths": []any{"secrets/**"}}
		},
		"decision object": func(e *Event) {
			e.Decision = map[string]any{"allow": true, "approval_required": false, "reasons": []any{"r"},
				"obligations": map[string]any{"timeout_ms": int64(30000), "f": 0.5}, "message": "m"}
		},
		"availability refused": func(e *Event) { e.Outcome, e.Decision = "unavailable", false },
		"policy failed": func(e *Event) {
			e.Outcome, e.Error = "error", &apiv1.AuditError{Code: "eval_conflict_error", Message: "rule \"x\"\n  conflicting", Location: "authz.rego:5"}
		},
		"policy failed, no location": func(e *Event) {
			e.Outcome, e.Error = "error", &apiv1.AuditError{Code: "no_policy", Message: "decision: no policy loaded"}
		},
		"concealed denial": func(e *Event) {
			e.Outcome, e.Concealed, e.Decision = "denied", true, map[string]any{"allow": false, "conceal": true}
		},
		"result":            func(e *Event) { e.Phase, e.Result = PhaseResult, &ResultInfo{Bytes: 42, Truncated: true} },
		"result with error": func(e *Event) { e.Result = &ResultInfo{IsError: true, Error: "open x: \u0001 denied"} },
		"question asked":    func(e *Event) { e.Question = &QuestionInfo{ID: "q-1", ExpiresAt: "2026-12-02T18:00:00.000Z"} },
		"question answered": func(e *Event) { e.Phase, e.Question = PhaseQuestion, &QuestionInfo{ID: "q-1", By: "bob"} },
		"chained":           func(e *Event) { e.Seq, e.PrevHash, e.Hash = 1<<40, "sha256:ff", "sha256:ee" },
		"controls":          func(e *Event) { e.Principal = "a\u2028b\x7f" },
		"trace id":          func(e *Event) { e.TraceID = "4bf92f3577b34da6a3ce929d0e0e4736" },
		"trace id, shadow, result": func(e *Event) {
			e.TraceID, e.Shadow = "4bf92f3577b34da6a3ce929d0e0e4736", &ShadowInfo{Revision: "r", Outcome: "allow"}
			e.Result = &ResultInfo{Bytes: 1}
		},
		"empty trace id": func(e *Event) { e.TraceID = "" },
		"via mcp":        func(e *Event) { e.Via, e.MCPRequestID = "mcp", `"req-1"` },
		"via mcp, trace": func(e *Event) { e.Via, e.MCPRequestID, e.TraceID = "mcp", "7", "4bf92f3577b34da6a3ce929d0e0e4736" },
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			ev := base()
			edit(ev)
			raw, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			want := jsontext.Value(raw)
			if err := want.Canonicalize(); err != nil {
				t.Fatal(err)
			}
			got, err := canonicalEvent(ev)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("\n got %s\nwant %s", got, want)
			}
		})
	}
	bad := base()
	bad.Tool = "\xff"
	if _, err := canonicalEvent(bad); err == nil {
		t.Fatal("invalid UTF-8 accepted")
	}
}

// fill sets every exported field of the struct v points to (recursively
// through pointers to structs) to a non-zero value.
func fill(t *testing.T, v reflect.Value) {
	t.Helper()
	for i := range v.NumField() {
		f := v.Field(i)
		if !v.Type().Field(i).IsExported() {
			continue
		}
		switch f.Kind() {
		case reflect.String:
			f.SetString("x-" + v.Type().Field(i).Name)
		case reflect.Int, reflect.Int64, reflect.Int32:
			f.SetInt(7)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Float64:
			f.SetFloat(1.5)
		case reflect.Slice:
			s := reflect.MakeSlice(f.Type(), 1, 1)
			if e := s.Index(0); e.Kind() == reflect.String {
				e.SetString("r")
			} else if e.Kind() == reflect.Struct {
				fill(t, e)
			}
			f.Set(s)
		case reflect.Map:
			m := reflect.MakeMap(f.Type())
			val := reflect.New(f.Type().Elem()).Elem()
			switch val.Kind() {
			case reflect.Interface:
				val.Set(reflect.ValueOf("v"))
			case reflect.Int64, reflect.Int:
				val.SetInt(3)
			case reflect.String:
				val.SetString("v")
			}
			m.SetMapIndex(reflect.ValueOf("k"), val)
			f.Set(m)
		case reflect.Pointer:
			p := reflect.New(f.Type().Elem())
			if p.Elem().Kind() == reflect.Struct {
				fill(t, p.Elem())
			}
			f.Set(p)
		case reflect.Struct:
			fill(t, f)
		case reflect.Interface:
			f.Set(reflect.ValueOf(map[string]any{"allow": true, "n": int64(30000)}))
		default:
			t.Fatalf("fill: field %s of kind %s: teach this test about it", v.Type().Field(i).Name, f.Kind())
		}
	}
}

// Every field of Event, present or new, must reach the hashed bytes: a
// field the one-pass writer forgot would silently fall out of the hash.
// The one exception is LogIndex, assigned after the event was hashed.
func TestCanonicalEventCoversEveryField(t *testing.T) {
	var ev Event
	fill(t, reflect.ValueOf(&ev).Elem())
	ev.LogIndex = nil
	raw, err := json.Marshal(&ev)
	if err != nil {
		t.Fatal(err)
	}
	want := jsontext.Value(raw)
	if err := want.Canonicalize(); err != nil {
		t.Fatal(err)
	}
	got, err := canonicalEvent(&ev)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("a field is missing or different:\n got %s\nwant %s", got, want)
	}
}
