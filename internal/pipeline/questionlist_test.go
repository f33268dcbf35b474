package pipeline

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/tools/ask"
)

// A question is listed to whoever may answer it and to nobody else: its
// asker, and another principal only when policy lets them answer. The
// listing's decisions leave no audit event; answered and expired
// questions are not listed.
func TestQuestionsListsWhatTheViewerMayAnswer(t *testing.T) {
	f, c := askingFixture(t)
	q1 := askQuestion(t, f, "c1", `{"question":"Deploy?"}`)
	c.advance(time.Minute)
	resp, err := f.pl.Call(context.Background(), Request{Identity: alice, Tool: ask.Name, Arguments: []byte(`{"question":"Which branch?","options":["main","next"]}`), CallID: "c2"})
	q2, _ := resp.Data["question_id"].(string)
	if err != nil || q2 == "" {
		t.Fatalf("second ask-user call: %+v %v", resp, err)
	}
	before := len(f.events(t, "c1")) + len(f.events(t, "c2"))

	list := func(who *identity.Identity, limit int) []string {
		t.Helper()
		l, err := f.pl.Questions(context.Background(), who, limit)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, q := range l {
			out = append(out, q.ID)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		who   *identity.Identity
		limit int
		want  []string
	}{
		{"the asker, newest first", alice, 0, []string{q2, q1}},
		{"the asker, limited", alice, 1, []string{q2}},
		{"a principal whose role policy allows", proxy, 0, []string{q2, q1}},
		{"another principal", bob, 0, []string{}},
		{"another tenant", globexAl, 0, []string{}},
	} {
		if got := list(tc.who, tc.limit); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if after := len(f.events(t, "c1")) + len(f.events(t, "c2")); after != before {
		t.Fatalf("listing wrote %d audit events", after-before)
	}
	l, err := f.pl.Questions(context.Background(), proxy, 1)
	if err != nil || len(l) != 1 || l[0].Text != "Which branch?" || !reflect.DeepEqual(l[0].Options, []string{"main", "next"}) || l[0].Principal != "alice" || l[0].CallID != "c2" {
		t.Fatalf("listed question: %+v %v", l, err)
	}

	if _, err := f.pl.Answer(context.Background(), AnswerStep{Identity: alice, ID: q2, Answer: "main"}); err != nil {
		t.Fatal(err)
	}
	if got := list(alice, 0); !reflect.DeepEqual(got, []string{q1}) {
		t.Fatalf("after an answer: %v", got)
	}
	c.advance(time.Hour)
	if got := list(proxy, 0); len(got) != 0 {
		t.Fatalf("after the expiry: %v", got)
	}
}
