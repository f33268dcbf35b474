package decision

import (
	"context"
	"strings"
	"testing"
)

func TestCheckWithFindsContractProblemsBeyondCompiling(t *testing.T) {
	allTools := []string{"read-file", "write-file", "edit-file", "glob", "grep", "bash", "fetch",
		"process-output", "process-input", "process-stop", "task-create", "task-update", "task-get", "task-list"}
	problems, err := CheckWith(context.Background(), shippedPack, CheckOptions{Tools: allTools, TestDirs: []string{"../../policies_test"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Fatalf("the shipped pack with its tests and every tool has problems:\n%s", FormatProblems(problems))
	}

	for _, tc := range []struct {
		name  string
		files map[string]string
		opts  CheckOptions
		want  []string
	}{
		{
			name: "a tool no availability rule can offer",
			opts: CheckOptions{Tools: []string{"read-file", "write-file"}},
			want: []string{`tool "write-file" is enabled in the configuration, but data.toolgate.availability.allow can never offer it`},
		},
		{
			name: "a decision that can be a string",
			files: map[string]string{"authz.rego": `package toolgate.authz

decision := {"allow": true} if input.tool.name == "read-file"

else := "deny"
`},
			want: []string{"authz.rego:3: data.toolgate.authz.decision can be string, not an object"},
		},
		{
			name: "a rule no test input fires",
			files: map[string]string{
				"authz.rego": `package toolgate.authz

decision := {"allow": allow}

default allow := false

allow if input.tool.name == "read-file"

allow if input.tool.name == "teleport"
`,
				"tests/authz_test.rego": `package toolgate.authz_test

import data.toolgate.authz

test_read if authz.decision.allow with input as {"tool": {"name": "read-file"}}

test_other if not authz.decision.allow with input as {"tool": {"name": "glob"}}

test_offered if data.toolgate.availability.allow with input as {"tool": {"name": "read-file"}}

test_not_offered if not data.toolgate.availability.allow with input as {"tool": {"name": "glob"}}
`},
			want: []string{"authz.rego:9: rule data.toolgate.authz.allow never produced a value"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := newPack(t, tc.files)
			opts := tc.opts
			if _, ok := tc.files["tests/authz_test.rego"]; ok {
				opts.TestDirs = []string{dir + "/tests"}
			}
			problems, err := CheckWith(context.Background(), dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			got := FormatProblems(problems)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("problems:\n%s\nwant one with %q", got, w)
				}
			}
			if len(problems) != len(tc.want) {
				t.Errorf("%d problems, want %d:\n%s", len(problems), len(tc.want), got)
			}
		})
	}
}
