// Package ask is the ask-user tool: the model asks the caller's user a
// question, optionally offering a short list of answers. Running the tool
// only hands the prepared question back; the gateway stores it, answers
// the call with outcome awaiting_user and a question id, and delivers the
// user's answer when the platform posts it (see internal/pipeline).
package ask

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"unicode"

	"github.com/toolgate/toolgate/internal/tools"
)

// Name and Action of the tool.
const (
	Name   = "ask-user"
	Action = "user.ask"
)

// Bounds of the arguments, in characters (JSON Schema maxLength counts
// code points); the schema publishes and enforces them.
const (
	MaxQuestion = 2000
	MaxOptions  = 10
	MaxOption   = 200
)

const schema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "question": {
      "type": "string", "minLength": 1, "maxLength": 2000,
      "description": "The question for the user, in plain words. Ask one thing at a time."
    },
    "options": {
      "type": "array", "minItems": 1, "maxItems": 10, "uniqueItems": true,
      "items": {"type": "string", "minLength": 1, "maxLength": 200},
      "description": "Optional answers to choose from (at most 10). When given, the user's answer is exactly one of them."
    }
  },
  "required": ["question"],
  "additionalProperties": false
}`

// Tool is ask-user.
type Tool struct{ spec tools.Spec }

// New returns the ask-user tool.
func New() *Tool {
	return &Tool{spec: tools.Spec{
		Name: Name,
		Description: "Ask the user a question and wait for the answer. The call returns outcome awaiting_user " +
			"with data.question_id; the answer arrives later as this call's result. Use it when you cannot " +
			"go on without the user's decision or information; offer options when the answer is a choice.",
		InputSchema: schema,
		Kind:        tools.KindBuiltin,
		Action:      Action,
		Effects:     []string{Action},
		Annotations: tools.Annotations{ReadOnly: true},
	}}
}

// Spec returns the published description.
func (t *Tool) Spec() *tools.Spec { return &t.spec }

// asked is the prepared question.
type asked struct {
	text    string
	options []string
}

// Prepare checks what the schema cannot say: the question and each option
// must carry visible text, and no control characters but newlines and tabs
// in the question (what a platform shows the user must be what policy saw).
func (t *Tool) Prepare(_ context.Context, _ *tools.Env, args map[string]any) (tools.Plan, error) {
	text, err := tools.RequiredString(args, "question")
	if err != nil {
		return tools.Plan{}, err
	}
	if err := visible("/question", text, true); err != nil {
		return tools.Plan{}, err
	}
	var options []string
	if raw, ok := args["options"]; ok {
		l, ok := raw.([]any)
		if !ok || len(l) > MaxOptions {
			return tools.Plan{}, &tools.ArgError{Pointer: "/options", Rule: "must be a list of at most 10 strings"}
		}
		seen := map[string]bool{}
		for i, v := range l {
			p := "/options/" + strconv.Itoa(i)
			s, ok := v.(string)
			if !ok {
				return tools.Plan{}, &tools.ArgError{Pointer: p, Rule: "must be a string"}
			}
			if err := visible(p, s, false); err != nil {
				return tools.Plan{}, err
			}
			if seen[s] {
				return tools.Plan{}, &tools.ArgError{Pointer: p, Rule: "must differ from the other options"}
			}
			seen[s] = true
			options = append(options, s)
		}
	}
	return tools.Plan{Args: tools.CopyArgs(args), Artifact: asked{text: text, options: options}}, nil
}

func visible(pointer, s string, multiline bool) error {
	if strings.TrimSpace(s) == "" {
		return &tools.ArgError{Pointer: pointer, Rule: "must not be blank"}
	}
	for _, r := range s {
		if unicode.IsControl(r) && !(multiline && (r == '\n' || r == '\t')) {
			return &tools.ArgError{Pointer: pointer, Rule: "must not contain control characters"}
		}
	}
	return nil
}

// Run hands the prepared question back as the result's data, for the
// gateway to store (UserQuestion reads it).
func (t *Tool) Run(_ context.Context, _ *tools.Env, artifact any, _ tools.Limits) (tools.Result, error) {
	a, ok := artifact.(asked)
	if !ok {
		return tools.Result{}, errors.New("ask-user: foreign artifact")
	}
	options := make([]any, len(a.options))
	for i, o := range a.options {
		options[i] = o
	}
	return tools.Result{
		Content: a.text,
		Data:    map[string]any{"question": a.text, "options": options},
		Bytes:   len(a.text),
	}, nil
}

// UserQuestion reads the question back from the data of a result Run
// returned; ok is false for anything else.
func (t *Tool) UserQuestion(data map[string]any) (text string, options []string, ok bool) {
	text, ok = data["question"].(string)
	if !ok {
		return "", nil, false
	}
	l, _ := data["options"].([]any)
	for _, v := range l {
		s, isString := v.(string)
		if !isString {
			return "", nil, false
		}
		options = append(options, s)
	}
	return text, options, true
}
