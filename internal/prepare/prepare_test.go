package prepare

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/tools"
)

// echoTool is a minimal tool for exercising the boundary: its artifact is
// the normalized text, and Run returns it.
type echoTool struct{ spec tools.Spec }

type echoArtifact struct{ text string }

func newEcho() *echoTool {
	return &echoTool{spec: tools.Spec{
		Name: "echo", Description: "echo text", Kind: tools.KindBuiltin, Action: "test.echo", Effects: []string{"test.echo"},
		InputSchema: `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","additionalProperties":false,
		  "required":["text"],
		  "properties":{"text":{"type":"string","minLength":1,"maxLength":100},
		                "times":{"type":"integer","minimum":1,"maximum":5},
		                "opts":{"type":"object"}}}`,
	}}
}

func (e *echoTool) Spec() *tools.Spec { return &e.spec }

func (e *echoTool) Prepare(_ context.Context, _ *tools.Env, args map[string]any) (tools.Plan, error) {
	text := args["text"].(string)
	if strings.Contains(text, "..") {
		return tools.Plan{}, &tools.ArgError{Pointer: "/text", Rule: "must not contain .."}
	}
	times := 1.0
	if v, ok := args["times"]; ok {
		times = v.(float64)
	}
	norm := strings.ToLower(text)
	return tools.Plan{
		Args:      map[string]any{"text": text, "times": times},
		Resources: []tools.Resource{{"type": "text", "value": norm}},
		Artifact:  echoArtifact{text: strings.Repeat(norm, int(times))},
	}, nil
}

func (e *echoTool) Run(_ context.Context, _ *tools.Env, a any, _ tools.Limits) (tools.Result, error) {
	art := a.(echoArtifact)
	return tools.Result{Content: art.text, Bytes: len(art.text)}, nil
}

func newPreparer(t *testing.T) (*Preparer, tools.Tool) {
	t.Helper()
	tool := newEcho()
	reg, err := tools.NewRegistry(tool)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(reg, Options{MaxDepth: 8})
	if err != nil {
		t.Fatal(err)
	}
	return p, tool
}

var alice = &identity.Identity{Tenant: "acme", Principal: "alice", Roles: []string{"developer"}, Client: "platform-a"}

func prepareRaw(t *testing.T, raw string) (*Prepared, error) {
	t.Helper()
	p, tool := newPreparer(t)
	return p.Prepare(context.Background(), Call{
		Identity: alice, SessionID: "s-1", CallID: "c-1", Tool: tool,
		Env: &tools.Env{Tenant: "acme"}, RawArgs: []byte(raw),
	})
}

func TestBadArgumentsAreModelSafeFeedback(t *testing.T) {
	cases := []struct {
		name, raw, want string
	}{
		{"duplicate member names", `{"text":"a","text":"b"}`, "/text: duplicate member name"},
		{"case-variant name is an unknown argument", `{"Text":"a"}`, "/Text: unknown argument"},
		{"unknown member", `{"text":"a","tenant":"globex"}`, "/tenant: unknown argument"},
		{"invalid UTF-8", "{\"text\":\"a\xff\"}", "invalid UTF-8"},
		{"null required field", `{"text":null}`, "/text: must be string, not null"},
		{"absent required field", `{}`, "/text: missing required argument"},
		{"array root", `["text"]`, "(arguments): must be a JSON object"},
		{"null root", `null`, "(arguments): must be a JSON object"},
		{"string root", `"x"`, "(arguments): must be a JSON object"},
		{"trailing data", `{"text":"a"} {}`, "unexpected data after the arguments object"},
		{"truncated", `{"text":"a"`, "truncated JSON"},
		{"deep nesting", `{"text":"a","opts":{"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{}}}}}}}}}}`, "nested more than 8 levels deep"},
		{"wrong type", `{"text":5}`, "/text: must be string"},
		{"fractional integer", `{"text":"a","times":1.5}`, "/times: must be integer"},
		{"below minimum", `{"text":"a","times":0}`, "/times: must be >= 1"},
		{"above maximum", `{"text":"a","times":6}`, "/times: must be <= 5"},
		{"too long", `{"text":"` + strings.Repeat("x", 101) + `"}`, "/text: must be at most 100 characters"},
		{"huge number", `{"text":"a","times":1e400}`, "number out of range"},
		// Integers beyond 2^53 - 1 are refused, never rounded: 2^53 + 1
		// would parse as 2^53, so 2^53 itself is refused too.
		{"2^53 + 1", `{"text":"a","opts":{"n":9007199254740993}}`, "/opts/n: integer too large"},
		{"2^53", `{"text":"a","opts":{"n":9007199254740992}}`, "/opts/n: integer too large"},
		{"-(2^53)", `{"text":"a","opts":{"n":-9007199254740992}}`, "/opts/n: integer too large"},
		{"whole number in float form", `{"text":"a","opts":{"n":1e16}}`, "/opts/n: integer too large"},
		{"in an array", `{"text":"a","opts":{"n":[1,18446744073709551616]}}`, "/opts/n/1: integer too large"},
		{"tool normalization rule", `{"text":"a..b"}`, "/text: must not contain .."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := prepareRaw(t, tc.raw)
			var ie *InvalidArgumentsError
			if !errors.As(err, &ie) {
				t.Fatalf("err = %v, want *InvalidArgumentsError", err)
			}
			if !strings.HasPrefix(ie.Error(), "invalid arguments: ") || !strings.Contains(ie.Error(), tc.want) {
				t.Fatalf("message %q does not contain %q", ie.Error(), tc.want)
			}
		})
	}
}

// The largest safe integers and fractions below 2^53 pass.
func TestSafeIntegersPass(t *testing.T) {
	for _, n := range []string{"9007199254740991", "-9007199254740991", "0", "1.5e-300", "123456.789", "4503599627370495.5"} {
		if _, err := prepareRaw(t, `{"text":"a","opts":{"n":`+n+`}}`); err != nil {
			t.Errorf("%s refused: %v", n, err)
		}
	}
}

func TestAbsentArgumentsAreAnEmptyObject(t *testing.T) {
	_, err := prepareRaw(t, ``)
	var ie *InvalidArgumentsError
	if !errors.As(err, &ie) || !strings.Contains(ie.Error(), "/text: missing required argument") {
		t.Fatalf("err = %v", err)
	}
}

func TestDocumentCarriesNormalizedArgsResourcesAndDigest(t *testing.T) {
	p, err := prepareRaw(t, `{"text":"HeLLo"}`)
	if err != nil {
		t.Fatal(err)
	}
	doc := p.Document()
	if doc["tenant"] != "acme" || doc["call_id"] != "c-1" || doc["session_id"] != "s-1" || doc["action"] != "test.echo" {
		t.Fatalf("document envelope wrong: %v", doc)
	}
	args := doc["args"].(map[string]any)
	if args["times"] != 1.0 {
		t.Fatalf("defaults not applied: %v", args)
	}
	res := doc["resources"].([]any)[0].(map[string]any)
	if res["value"] != "hello" {
		t.Fatalf("resource not normalized: %v", res)
	}
	delete(doc, "digest")
	want, err := Digest(doc)
	if err != nil {
		t.Fatal(err)
	}
	if p.Digest() != want || !strings.HasPrefix(want, "sha256:") || len(want) != len("sha256:")+64 {
		t.Fatalf("digest %q, recomputed %q", p.Digest(), want)
	}
}

func TestDigestIsCanonical(t *testing.T) {
	a, err := Digest(map[string]any{"b": 1.0, "a": []any{"x", true, nil}, "c": map[string]any{"z": "é", "y": 1e21}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Digest(map[string]any{"c": map[string]any{"y": 1e21, "z": "é"}, "a": []any{"x", true, nil}, "b": 1.0})
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatalf("same document, different digests: %s %s", a, b)
	}
	c, _ := Digest(map[string]any{"b": 2.0})
	if c == a {
		t.Fatal("different documents share a digest")
	}
}

func TestPreparedIsImmutable(t *testing.T) {
	p, err := prepareRaw(t, `{"text":"abc","times":2}`)
	if err != nil {
		t.Fatal(err)
	}
	before := p.Digest()
	doc := p.Document()
	doc["args"].(map[string]any)["text"] = "rm -rf /"
	doc["resources"].([]any)[0].(map[string]any)["value"] = "evil"
	doc["tenant"] = "globex"
	again := p.Document()
	if again["tenant"] != "acme" || again["args"].(map[string]any)["text"] != "abc" ||
		again["resources"].([]any)[0].(map[string]any)["value"] != "abc" {
		t.Fatalf("mutating a returned document changed the frozen one: %v", again)
	}
	delete(again, "digest")
	if d, _ := Digest(again); d != before {
		t.Fatal("frozen document no longer matches its digest")
	}
	res, err := p.Run(context.Background(), tools.Limits{})
	if err != nil || res.Content != "abcabc" {
		t.Fatalf("Run = %q, %v; want the prepared artifact", res.Content, err)
	}
}

func TestEnvironmentOfAnotherTenantIsRefused(t *testing.T) {
	p, tool := newPreparer(t)
	_, err := p.Prepare(context.Background(), Call{
		Identity: alice, Tool: tool, Env: &tools.Env{Tenant: "globex"}, RawArgs: []byte(`{"text":"a"}`),
	})
	var ie *InvalidArgumentsError
	if err == nil || errors.As(err, &ie) {
		t.Fatalf("err = %v, want an internal error", err)
	}
}

func BenchmarkPrepare(b *testing.B) {
	tool := newEcho()
	reg, _ := tools.NewRegistry(tool)
	p, _ := New(reg, Options{})
	c := Call{Identity: alice, SessionID: "s-1", CallID: "c-1", Tool: tool, Env: &tools.Env{Tenant: "acme"},
		RawArgs: []byte(`{"text":"docs/guide.md","times":2}`)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Prepare(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}

// The frozen call carries who asked and what was decided, for tools that
// assert it to a service (upstream tools), and a spec's schema digest is
// part of the request document.
func TestPreparedEnvironmentNamesTheCall(t *testing.T) {
	tool := newEcho()
	tool.spec.SchemaDigest = "sha256:5c4e"
	reg, _ := tools.NewRegistry(tool)
	p, err := New(reg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var seen *tools.Env
	spy := &envSpy{echoTool: tool, seen: &seen}
	base := &tools.Env{Tenant: "acme"}
	pr, err := p.Prepare(context.Background(), Call{Identity: alice, SessionID: "s-1", CallID: "c-1", Tool: spy, Env: base, RawArgs: []byte(`{"text":"a"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pr.Run(context.Background(), tools.Limits{}); err != nil {
		t.Fatal(err)
	}
	if seen.Principal != "alice" || seen.CallID != "c-1" || seen.SessionID != "s-1" || seen.RequestDigest != pr.Digest() ||
		len(seen.Roles) != 1 || seen.Roles[0] != "developer" {
		t.Fatalf("run environment %+v", seen)
	}
	if base.CallID != "" || base.RequestDigest != "" {
		t.Fatalf("the tenant's shared environment was modified: %+v", base)
	}
	if pr.Document()["tool"].(map[string]any)["schema_digest"] != "sha256:5c4e" {
		t.Fatalf("document tool = %v", pr.Document()["tool"])
	}
}

type envSpy struct {
	*echoTool
	seen **tools.Env
}

func (s *envSpy) Run(ctx context.Context, env *tools.Env, a any, lim tools.Limits) (tools.Result, error) {
	*s.seen = env
	return s.echoTool.Run(ctx, env, a, lim)
}
