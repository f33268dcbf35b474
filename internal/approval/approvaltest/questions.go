package approvaltest

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/approval"
)

// PendingQuestion returns a pending question of tenant created at
// t0+created that expires ttl later, offering options.
func PendingQuestion(id, tenant, callID string, created, ttl time.Duration, options ...string) *approval.Question {
	return &approval.Question{
		ID: id, Tenant: tenant, CallID: callID, DecisionID: "d-" + id, SessionID: "s-1",
		Principal: "alice", Client: "platform", Tool: "ask-user", Action: "user.ask",
		Digest: "sha256:" + fmt.Sprintf("%064d", 9), PolicyRevision: "rev-1",
		Document: map[string]any{
			"tenant": tenant, "args": map[string]any{"question": "Deploy now?"},
			"principal": map[string]any{"id": "alice", "roles": []any{"developer"}},
		},
		Input:     map[string]any{"args": map[string]any{"question": "**masked**"}},
		Text:      "Deploy now?",
		Options:   options,
		CreatedAt: t0.Add(created),
		ExpiresAt: t0.Add(created + ttl),
	}
}

// questionSuite is the part of StoreSuite about ask-user questions.
func questionSuite(t *testing.T, open func(t *testing.T) approval.Store) {
	t.Run("a created question reads back exactly and pending", func(t *testing.T) {
		s := open(t)
		for _, want := range []*approval.Question{
			PendingQuestion("q1", "acme", "c1", 0, time.Hour),
			PendingQuestion("q2", "acme", "c2", 0, time.Hour, "yes", "no"),
		} {
			mustAsk(t, s, want)
			got, err := s.Question(t.Context(), "acme", want.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != approval.QuestionPending || got.Answer != "" || got.AnsweredBy != "" || !got.AnsweredAt.IsZero() {
				t.Fatalf("new question state: %+v", got)
			}
			got.Status = ""
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
			}
			byCall, err := s.QuestionByCall(t.Context(), "acme", want.CallID)
			if err != nil || byCall.ID != want.ID {
				t.Fatalf("QuestionByCall: %v %v", byCall, err)
			}
		}
	})

	t.Run("another tenant's question does not exist", func(t *testing.T) {
		s := open(t)
		mustAsk(t, s, PendingQuestion("q1", "acme", "c1", 0, time.Hour))
		if _, err := s.Question(t.Context(), "globex", "q1"); !errors.Is(err, approval.ErrNotFound) {
			t.Fatalf("Question from globex: %v", err)
		}
		if _, err := s.QuestionByCall(t.Context(), "globex", "c1"); !errors.Is(err, approval.ErrNotFound) {
			t.Fatalf("QuestionByCall from globex: %v", err)
		}
		if _, err := s.AnswerQuestion(t.Context(), "globex", "q1", answer("yes", 1)); !errors.Is(err, approval.ErrNotFound) {
			t.Fatalf("AnswerQuestion from globex: %v", err)
		}
		if ex, err := s.ExpireQuestions(t.Context(), "globex", t0.Add(2*time.Hour)); err != nil || len(ex) != 0 {
			t.Fatalf("ExpireQuestions of globex: %v %v", ex, err)
		}
		if q, _ := s.Question(t.Context(), "acme", "q1"); q.Status != approval.QuestionPending {
			t.Fatalf("acme's question changed: %+v", q)
		}
	})

	t.Run("a question is answered once", func(t *testing.T) {
		s := open(t)
		mustAsk(t, s, PendingQuestion("q1", "acme", "c1", 0, time.Hour))
		got, err := s.AnswerQuestion(t.Context(), "acme", "q1", answer("ship it", 1))
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != approval.QuestionAnswered || got.Answer != "ship it" || got.AnsweredBy != "alice" || !got.AnsweredAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("answered: %+v", got)
		}
		if again, err := s.AnswerQuestion(t.Context(), "acme", "q1", answer("wait", 2)); !errors.Is(err, approval.ErrNotPending) || again.Answer != "ship it" {
			t.Fatalf("second answer: %v %+v, want ErrNotPending and the first answer kept", err, again)
		}
	})

	t.Run("concurrent answers: exactly one wins", func(t *testing.T) {
		s := open(t)
		mustAsk(t, s, PendingQuestion("q1", "acme", "c1", 0, time.Hour))
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				_, errs[i] = s.AnswerQuestion(t.Context(), "acme", "q1", answer(fmt.Sprint("answer-", i), 1))
			})
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, approval.ErrNotPending):
				t.Errorf("loser: %v, want ErrNotPending", err)
			}
		}
		if won != 1 {
			t.Fatalf("%d answers won, want 1", won)
		}
	})

	t.Run("only an offered option answers a question with options", func(t *testing.T) {
		s := open(t)
		mustAsk(t, s, PendingQuestion("q1", "acme", "c1", 0, time.Hour, "yes", "no"))
		for _, bad := range []string{"maybe", "Yes", "yes ", ""} {
			if _, err := s.AnswerQuestion(t.Context(), "acme", "q1", answer(bad, 1)); !errors.Is(err, approval.ErrNotOffered) {
				t.Fatalf("answer %q: %v, want ErrNotOffered", bad, err)
			}
		}
		if q, _ := s.Question(t.Context(), "acme", "q1"); q.Status != approval.QuestionPending {
			t.Fatalf("a refused answer changed the question: %+v", q)
		}
		if q, err := s.AnswerQuestion(t.Context(), "acme", "q1", answer("no", 1)); err != nil || q.Answer != "no" {
			t.Fatalf("offered answer: %+v %v", q, err)
		}
	})

	t.Run("an expired question cannot be answered and expires once", func(t *testing.T) {
		s := open(t)
		mustAsk(t, s, PendingQuestion("q1", "acme", "c1", 0, time.Hour))
		mustAsk(t, s, PendingQuestion("q2", "acme", "c2", 0, 3*time.Hour))
		if _, err := s.AnswerQuestion(t.Context(), "acme", "q1", answer("late", 60)); !errors.Is(err, approval.ErrExpired) {
			t.Fatalf("answer at expiry: %v, want ErrExpired", err)
		}
		ex, err := s.ExpireQuestions(t.Context(), "acme", t0.Add(2*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if len(ex) != 1 || ex[0].ID != "q1" || ex[0].Status != approval.QuestionExpired {
			t.Fatalf("expired %+v, want [q1]", ex)
		}
		if ex, err := s.ExpireQuestions(t.Context(), "acme", t0.Add(2*time.Hour)); err != nil || len(ex) != 0 {
			t.Fatalf("second expiry: %+v %v", ex, err)
		}
		if _, err := s.AnswerQuestion(t.Context(), "acme", "q1", answer("late", 60)); !errors.Is(err, approval.ErrNotPending) {
			t.Fatalf("answer an expired question: %v, want ErrNotPending", err)
		}
		if q, _ := s.Question(t.Context(), "acme", "q2"); q.Status != approval.QuestionPending {
			t.Fatalf("q2 expired early: %+v", q)
		}
	})

	t.Run("questions and held calls are kept apart", func(t *testing.T) {
		s := open(t)
		mustAsk(t, s, PendingQuestion("x1", "acme", "c1", 0, time.Hour))
		if _, err := s.Get(t.Context(), "acme", "x1"); !errors.Is(err, approval.ErrNotFound) {
			t.Fatalf("a question read as an approval: %v", err)
		}
		if ex, err := s.Expire(t.Context(), "acme", t0.Add(2*time.Hour)); err != nil || len(ex) != 0 {
			t.Fatalf("approval expiry touched questions: %v %v", ids(ex), err)
		}
		if q, _ := s.Question(t.Context(), "acme", "x1"); q.Status != approval.QuestionPending {
			t.Fatalf("question after approval expiry: %+v", q)
		}
	})

	t.Run("questions list newest first, by status, within the tenant", func(t *testing.T) {
		s := open(t)
		mustAsk(t, s, PendingQuestion("q1", "acme", "c1", 0, time.Hour))
		mustAsk(t, s, PendingQuestion("q2", "acme", "c2", time.Minute, time.Hour, "yes", "no"))
		mustAsk(t, s, PendingQuestion("q3", "acme", "c3", 2*time.Minute, time.Hour))
		mustAsk(t, s, PendingQuestion("g1", "globex", "c1", 3*time.Minute, time.Hour))
		if _, err := s.AnswerQuestion(t.Context(), "acme", "q3", answer("yes", 5)); err != nil {
			t.Fatal(err)
		}
		list := func(f approval.Filter) []string {
			t.Helper()
			l, err := s.ListQuestions(t.Context(), "acme", f)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, q := range l {
				out = append(out, q.ID+":"+q.Status)
			}
			return out
		}
		for _, tc := range []struct {
			f    approval.Filter
			want []string
		}{
			{approval.Filter{}, []string{"q3:answered", "q2:pending", "q1:pending"}},
			{approval.Filter{Status: approval.QuestionPending}, []string{"q2:pending", "q1:pending"}},
			{approval.Filter{Status: approval.QuestionAnswered}, []string{"q3:answered"}},
			{approval.Filter{Status: approval.QuestionExpired}, nil},
			{approval.Filter{Status: approval.QuestionPending, Limit: 1}, []string{"q2:pending"}},
		} {
			if got := list(tc.f); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ListQuestions(%+v) = %v, want %v", tc.f, got, tc.want)
			}
		}
		l, err := s.ListQuestions(t.Context(), "acme", approval.Filter{Status: approval.QuestionPending, Limit: 1})
		if err != nil || len(l) != 1 {
			t.Fatalf("ListQuestions: %v %v", l, err)
		}
		want := PendingQuestion("q2", "acme", "c2", time.Minute, time.Hour, "yes", "no")
		if got := l[0]; got.Text != want.Text || !reflect.DeepEqual(got.Options, want.Options) || got.Principal != want.Principal ||
			got.Tool != want.Tool || got.Digest != want.Digest || !got.ExpiresAt.Equal(want.ExpiresAt) {
			t.Fatalf("listed question: %+v", got)
		}
		if l, err := s.ListQuestions(t.Context(), "initech", approval.Filter{}); err != nil || len(l) != 0 {
			t.Fatalf("another tenant's list: %v %v", l, err)
		}
	})
}

func answer(text string, minutes int) approval.Answer {
	return approval.Answer{Text: text, By: "alice", At: t0.Add(time.Duration(minutes) * time.Minute)}
}

func mustAsk(t *testing.T, s approval.Store, q *approval.Question) {
	t.Helper()
	if err := s.CreateQuestion(t.Context(), q); err != nil {
		t.Fatal(err)
	}
}
