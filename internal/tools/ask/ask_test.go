package ask_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/toolgate/toolgate/internal/tools"
	"github.com/toolgate/toolgate/internal/tools/ask"
)

func TestPrepareRefusesQuestionsAUserCouldNotReadAsPolicySawThem(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    map[string]any
		pointer string
	}{
		{"no question", map[string]any{}, "/question"},
		{"a blank question", map[string]any{"question": " \n\t"}, "/question"},
		{"a control character", map[string]any{"question": "ok?\x1b[2J"}, "/question"},
		{"a blank option", map[string]any{"question": "q", "options": []any{"yes", " "}}, "/options/1"},
		{"a repeated option", map[string]any{"question": "q", "options": []any{"yes", "yes"}}, "/options/1"},
		{"an option with a newline", map[string]any{"question": "q", "options": []any{"a\nb"}}, "/options/0"},
		{"an option that is no string", map[string]any{"question": "q", "options": []any{1.0}}, "/options/0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ask.New().Prepare(context.Background(), &tools.Env{}, tc.args)
			var ae *tools.ArgError
			if !errors.As(err, &ae) || ae.Pointer != tc.pointer {
				t.Fatalf("Prepare: %v, want an argument error at %s", err, tc.pointer)
			}
		})
	}
}

func TestRunHandsThePreparedQuestionBack(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    map[string]any
		options []string
	}{
		{"free text", map[string]any{"question": "Which branch?\nSay main if unsure."}, nil},
		{"options", map[string]any{"question": "Deploy?", "options": []any{"yes", "no"}}, []string{"yes", "no"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool := ask.New()
			plan, err := tool.Prepare(context.Background(), &tools.Env{}, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Resources) != 0 || !reflect.DeepEqual(plan.Args, tc.args) {
				t.Fatalf("plan: %+v", plan)
			}
			tc.args["question"] = "changed after prepare"
			res, err := tool.Run(context.Background(), &tools.Env{}, plan.Artifact, tools.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			text, options, ok := tool.UserQuestion(res.Data)
			if !ok || text == "changed after prepare" || text != res.Content || !reflect.DeepEqual(options, tc.options) {
				t.Fatalf("UserQuestion: %q %v %v (content %q)", text, options, ok, res.Content)
			}
		})
	}
}

func TestUserQuestionReadsOnlyAskUserResults(t *testing.T) {
	for _, data := range []map[string]any{nil, {"question": 1.0}, {"question": "q", "options": []any{2.0}}} {
		if _, _, ok := ask.New().UserQuestion(data); ok {
			t.Errorf("UserQuestion(%v) read a question", data)
		}
	}
}
