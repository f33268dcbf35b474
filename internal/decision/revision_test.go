package decision

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// echoPack returns whatever the input says, so one revision can produce
// every shape of result. The type checker cannot judge input, so the pack
// loads.
var echoPack = map[string]string{
	"availability.rego": "package toolgate.availability\n\nallow := input.allow\n",
	"authz.rego":        "package toolgate.authz\n\ndecision := input.decision\n",
	"audit.rego":        "package toolgate.audit\n\nmask := input.mask\n",
}

func TestAvailableResults(t *testing.T) {
	reg := prometheus.NewRegistry()
	rev := current(t, loaded(t, newPack(t, echoPack), reg))
	tests := []struct {
		name    string
		input   string
		want    bool
		wantErr error
	}{
		{"true", `{"allow": true}`, true, nil},
		{"false", `{"allow": false}`, false, nil},
		{"undefined means false, not an error", `{}`, false, nil},
		{"a string is malformed", `{"allow": "true"}`, false, ErrMalformed},
		{"a number is malformed", `{"allow": 1}`, false, ErrMalformed},
		{"an object is malformed", `{"allow": {"allow": true}}`, false, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rev.Available(context.Background(), value(t, tt.input))
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Errorf("Available = %v, %v; want %v, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
	if got := metricValue(t, reg, "toolgate_policy_decision_errors_total", map[string]string{"entrypoint": "availability", "kind": "malformed"}); got != 3 {
		t.Errorf("malformed availability results counted %v, want 3", got)
	}
}

func TestDecideResults(t *testing.T) {
	reg := prometheus.NewRegistry()
	rev := current(t, loaded(t, newPack(t, echoPack), reg))
	tests := []struct {
		name     string
		decision string // "" leaves it undefined
		want     Decision
		wantErr  error
	}{
		{name: "undefined is malformed", wantErr: ErrMalformed},
		{name: "a boolean is malformed", decision: `true`, wantErr: ErrMalformed},
		{name: "an array is malformed", decision: `[{"allow": true}]`, wantErr: ErrMalformed},
		{name: "missing allow is malformed", decision: `{"reasons": ["x"]}`, wantErr: ErrMalformed},
		{name: "a string allow is malformed", decision: `{"allow": "true"}`, wantErr: ErrMalformed},
		{name: "a null allow is malformed", decision: `{"allow": null}`, wantErr: ErrMalformed},
		{name: "bare allow", decision: `{"allow": true}`, want: Decision{Allow: true}},
		{name: "bare deny", decision: `{"allow": false}`, want: Decision{}},
		{
			name:     "every member",
			decision: `{"allow": true, "approval_required": true, "reasons": ["a", "b"], "message": "m", "extra": 1}`,
			want:     Decision{Allow: true, ApprovalRequired: true, Reasons: []string{"a", "b"}, Message: "m"},
		},
		{name: "reasons may be a set", decision: `{"allow": false, "reasons": {"b", "a"}}`, want: Decision{Reasons: []string{"a", "b"}}},
		{name: "a non-boolean approval_required is malformed", decision: `{"allow": true, "approval_required": "yes"}`, wantErr: ErrMalformed},
		{name: "reasons that are a string are malformed", decision: `{"allow": true, "reasons": "x"}`, wantErr: ErrMalformed},
		{name: "a non-string reason is malformed", decision: `{"allow": true, "reasons": ["x", 1]}`, wantErr: ErrMalformed},
		{name: "a non-string message is malformed", decision: `{"allow": false, "message": ["no"]}`, wantErr: ErrMalformed},
		{name: "obligations that are not an object are malformed", decision: `{"allow": true, "obligations": []}`, wantErr: ErrMalformed},
		{name: "a string timeout is malformed", decision: `{"allow": true, "obligations": {"timeout_ms": "5s"}}`, wantErr: ErrMalformed},
		{name: "a zero timeout is malformed", decision: `{"allow": true, "obligations": {"timeout_ms": 0}}`, wantErr: ErrMalformed},
		{name: "a negative output cap is malformed", decision: `{"allow": true, "obligations": {"max_output_bytes": -1}}`, wantErr: ErrMalformed},
		{name: "a fractional timeout is malformed", decision: `{"allow": true, "obligations": {"timeout_ms": 1.5}}`, wantErr: ErrMalformed},
		{name: "a huge output cap is malformed", decision: `{"allow": true, "obligations": {"max_output_bytes": 1e300}}`, wantErr: ErrMalformed},
		{name: "exclude_paths that are a string are malformed", decision: `{"allow": true, "obligations": {"exclude_paths": ".env"}}`, wantErr: ErrMalformed},
		{name: "a non-string exclude path is malformed", decision: `{"allow": true, "obligations": {"exclude_paths": [1]}}`, wantErr: ErrMalformed},
		{name: "a zero approval ttl is malformed", decision: `{"allow": true, "obligations": {"approval_ttl_ms": 0}}`, wantErr: ErrMalformed},
		{
			name:     "an approval ttl obligation",
			decision: `{"allow": true, "approval_required": true, "obligations": {"approval_ttl_ms": 60000}}`,
			want: Decision{Allow: true, ApprovalRequired: true, Obligations: Obligations{
				ApprovalTTLMS: 60000, Raw: map[string]any{"approval_ttl_ms": int64(60000)},
			}},
		},
		{
			name:     "obligations",
			decision: `{"allow": true, "obligations": {"timeout_ms": 5000.0, "max_output_bytes": 65536, "exclude_paths": {".env", "secrets/**"}, "custom": {"k": "v"}}}`,
			want: Decision{Allow: true, Obligations: Obligations{
				TimeoutMS: 5000, MaxOutputBytes: 65536, ExcludePaths: []string{".env", "secrets/**"},
				Raw: map[string]any{"timeout_ms": int64(5000), "max_output_bytes": int64(65536), "exclude_paths": []any{".env", "secrets/**"}, "custom": map[string]any{"k": "v"}},
			}},
		},
	}
	malformed := 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			input := `{}`
			if tt.decision != "" {
				input = `{"decision": ` + tt.decision + `}`
			}
			got, err := rev.Decide(context.Background(), value(t, input))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Decide error = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				malformed++
				if !reflect.DeepEqual(got, Decision{}) {
					t.Errorf("a failed decision carries %+v; want the zero Decision", got)
				}
				return
			}
			// The whole decision is kept as policy returned it, numbers
			// as numbers, members the contract does not name included,
			// and its obligations are the very map Obligations.Raw holds.
			if got.Raw["allow"] != got.Allow {
				t.Errorf("Raw %v does not carry allow %v", got.Raw, got.Allow)
			}
			if ob, ok := got.Raw["obligations"].(map[string]any); ok != (got.Obligations.Raw != nil) || ok && reflect.ValueOf(ob).Pointer() != reflect.ValueOf(got.Obligations.Raw).Pointer() {
				t.Errorf("Raw obligations %v are not Obligations.Raw %v", got.Raw["obligations"], got.Obligations.Raw)
			}
			if _, has := got.Raw["extra"]; has && got.Raw["extra"] != int64(1) {
				t.Errorf("extra member = %#v, want the number 1", got.Raw["extra"])
			}
			got.Raw = nil
			// Raw numbers are plain numbers (the audit log records
			// "timeout_ms": 5000, not the string "5000.0").
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Decide = %#v\nwant     %#v", got, tt.want)
			}
		})
	}
	if got := metricValue(t, reg, "toolgate_policy_decision_errors_total", map[string]string{"entrypoint": "authz", "kind": "malformed"}); got != float64(malformed) {
		t.Errorf("malformed decisions counted %v, want %d", got, malformed)
	}
	if got := metricValue(t, reg, "toolgate_policy_decision_duration_seconds", map[string]string{"entrypoint": "authz"}); got != float64(len(tests)) {
		t.Errorf("latency histogram has %v samples, want %d", got, len(tests))
	}
}

func TestMaskResults(t *testing.T) {
	rev := current(t, loaded(t, newPack(t, echoPack), nil))
	tests := []struct {
		name    string
		input   string
		want    []string
		wantErr error
	}{
		{"undefined is no mask", `{}`, nil, nil},
		{"a set, sorted", `{"mask": {"/args/b", "/args/a"}}`, []string{"/args/a", "/args/b"}, nil},
		{"an array", `{"mask": ["/args/content"]}`, []string{"/args/content"}, nil},
		{"empty", `{"mask": []}`, []string{}, nil},
		{"a string is malformed", `{"mask": "/args/content"}`, nil, ErrMalformed},
		{"a non-string member is malformed", `{"mask": ["/args/a", 1]}`, nil, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rev.Mask(context.Background(), value(t, tt.input))
			if !errors.Is(err, tt.wantErr) || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Mask = %#v, %v; want %#v, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestMaskIsOptional(t *testing.T) {
	rev := current(t, loaded(t, newPack(t, nil), nil))
	got, err := rev.Mask(context.Background(), value(t, `{"tool": {"name": "write-file"}}`))
	if got != nil || err != nil {
		t.Errorf("Mask without a mask rule = %v, %v; want nil, nil", got, err)
	}
}

func TestEvaluationErrorsFailClosed(t *testing.T) {
	tests := []struct {
		name  string
		authz string
		input string
	}{
		{
			// Without strict builtin errors the deny rule would be undefined
			// and the call allowed.
			name: "a builtin error in a deny rule",
			authz: `package toolgate.authz

deny contains "too big" if to_number(input.size) > 10

decision := {"allow": count(deny) == 0}
`,
			input: `{"size": "x"}`,
		},
		{
			name:  "a builtin error in the decision",
			authz: "package toolgate.authz\n\ndecision := {\"allow\": to_number(input.size) > 0}\n",
			input: `{"size": "x"}`,
		},
		{
			name: "conflicting values of a complete rule",
			authz: `package toolgate.authz

decision := {"allow": true} if input.a

decision := {"allow": false} if input.b
`,
			input: `{"a": true, "b": true}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			rev := current(t, loaded(t, newPack(t, map[string]string{"authz.rego": tt.authz}), reg))
			d, err := rev.Decide(context.Background(), value(t, tt.input))
			if !errors.Is(err, ErrEvaluation) {
				t.Fatalf("Decide = %+v, %v; want ErrEvaluation", d, err)
			}
			if d.Allow {
				t.Error("a failed evaluation allowed the call")
			}
			if got := metricValue(t, reg, "toolgate_policy_decision_errors_total", map[string]string{"entrypoint": "authz", "kind": "evaluation"}); got != 1 {
				t.Errorf("evaluation errors counted %v, want 1", got)
			}
		})
	}
}

func TestAvailabilityEvaluationError(t *testing.T) {
	rev := current(t, loaded(t, newPack(t, map[string]string{
		"availability.rego": "package toolgate.availability\n\nallow := to_number(input.tool.name) > 0\n",
	}), nil))
	ok, err := rev.Available(context.Background(), value(t, availabilityDeveloper))
	if ok || !errors.Is(err, ErrEvaluation) {
		t.Errorf("Available = %v, %v; want false, ErrEvaluation", ok, err)
	}
}

func TestCanceledContextFailsClosed(t *testing.T) {
	rev := current(t, loaded(t, newPack(t, nil), nil))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d, err := rev.Decide(ctx, value(t, `{"tool": {"name": "read-file"}}`))
	if !errors.Is(err, ErrEvaluation) || !errors.Is(err, context.Canceled) || d.Allow {
		t.Errorf("Decide with a canceled context = %+v, %v; want ErrEvaluation wrapping context.Canceled", d, err)
	}
}

func TestMalformedErrorsSayWhy(t *testing.T) {
	rev := current(t, loaded(t, newPack(t, echoPack), nil))
	_, err := rev.Decide(context.Background(), value(t, `{"decision": {"allow": "yes"}}`))
	if err == nil || !strings.Contains(err.Error(), `"allow" is string, want boolean`) {
		t.Errorf("error %v does not explain the malformed allow", err)
	}
}
