package decision

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

func TestCheckShippedPackIsClean(t *testing.T) {
	problems, err := Check(context.Background(), shippedPack)
	if err != nil || len(problems) > 0 {
		t.Fatalf("Check(policies) = %v, %v", problems, err)
	}
}

func TestCheckFindsProblems(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  []Problem
	}{
		{
			name: "availability reads arguments",
			files: map[string]string{"availability.rego": `package toolgate.availability

allow if {
	input.tool.name == "read-file"
	input.args.path != "secret"
}
`},
			want: []Problem{{File: "availability.rego", Line: 5, Message: "data.toolgate.availability.allow reads input.args, but availability input has no args: the rule is undefined there (move the check to the authorization decision)"}},
		},
		{
			name: "availability reads resources through a helper in another package",
			files: map[string]string{
				"availability.rego": "package toolgate.availability\n\nimport data.toolgate.helpers\n\nallow if helpers.ok\n",
				"helpers.rego": `package toolgate.helpers

ok if no_secrets(input.tool.name)

no_secrets(_) if {
	some r in input.resources
	r.path != "secret"
}
`,
			},
			want: []Problem{{File: "helpers.rego", Line: 6, Message: "data.toolgate.availability.allow reads input.resources, but availability input has no resources: the rule is undefined there (move the check to the authorization decision)"}},
		},
		{
			name:  "a strict compile error",
			files: map[string]string{"authz.rego": "package toolgate.authz\n\nimport data.unused\n\ndecision := {\"allow\": true}\n"},
			want:  []Problem{{File: "authz.rego", Line: 3, Message: "rego_compile_error: import data.unused unused"}},
		},
		{
			name:  "a missing entrypoint",
			files: map[string]string{"authz.rego": ""},
			want:  []Problem{{Message: "data.toolgate.authz.decision is missing: the policy contract requires this rule"}},
		},
		{
			name:  "a mistyped decision",
			files: map[string]string{"authz.rego": "package toolgate.authz\n\ndecision := \"allow\"\n"},
			want:  []Problem{{File: "authz.rego", Line: 3, Message: "data.toolgate.authz.decision must be an object, but it is string"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Check(context.Background(), newPack(t, tt.files))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Check =\n%s\nwant\n%s", FormatProblems(got), FormatProblems(tt.want))
			}
		})
	}
}

func TestCheckAuthzMayReadArguments(t *testing.T) {
	problems, err := Check(context.Background(), newPack(t, map[string]string{
		"authz.rego": "package toolgate.authz\n\ndecision := {\"allow\": input.args.path != \"x\"}\n",
	}))
	if err != nil || len(problems) > 0 {
		t.Errorf("Check = %v, %v; the authorization decision may read args", problems, err)
	}
}

func TestCheckMissingFolderIsAnError(t *testing.T) {
	if _, err := Check(context.Background(), t.TempDir()+"/nowhere"); err == nil {
		t.Error("Check of a missing folder returned no error")
	}
}

func TestProblemString(t *testing.T) {
	tests := []struct {
		p    Problem
		want string
	}{
		{Problem{File: "a.rego", Line: 3, Message: "m"}, "a.rego:3: m"},
		{Problem{File: ".manifest", Message: "m"}, ".manifest: m"},
		{Problem{Message: "m"}, "m"},
	}
	for _, tt := range tests {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.p, got, tt.want)
		}
	}
	err := &LoadError{Problems: []Problem{{File: "a.rego", Line: 1, Message: "x"}, {Message: "y"}}}
	if got := err.Error(); !strings.Contains(got, "a.rego:1: x\ny") {
		t.Errorf("LoadError = %q", got)
	}
}
