package pipeline

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/tools/ask"
)

// authzAnswer allows every call; an answer by someone other than the asker
// (input.answer) needs the answerer role.
const authzAnswer = `package toolgate.authz

default decision := {"allow": true, "reasons": ["ok"]}

decision := {"allow": false, "reasons": ["answering needs the answerer role"]} if {
	input.answer
	not "answerer" in input.answer.roles
}
`

// clock is a settable Now.
type clock struct{ ms atomic.Int64 }

func (c *clock) now() time.Time          { return time.UnixMilli(c.ms.Load()).UTC() }
func (c *clock) advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

func askingFixture(t *testing.T) (*fixture, *clock) {
	t.Helper()
	f := newFixture(t, map[string]string{"a.rego": allowAll, "b.rego": authzAnswer}, ask.New())
	st := f.db.Approvals()
	c := &clock{}
	c.ms.Store(t0.UnixMilli())
	f.pl.o.Approvals, f.pl.o.QuestionTTL, f.pl.o.Now = st, time.Hour, c.now
	return f, c
}

var (
	bob      = &identity.Identity{Tenant: "acme", Principal: "bob", Roles: []string{"developer"}}
	proxy    = &identity.Identity{Tenant: "acme", Principal: "support", Roles: []string{"answerer"}}
	globexAl = &identity.Identity{Tenant: "globex", Principal: "alice", Roles: []string{"developer", "answerer"}}
)

// askQuestion makes an ask-user call as alice and returns the question id.
func askQuestion(t *testing.T, f *fixture, callID, args string) string {
	t.Helper()
	resp, err := f.pl.Call(context.Background(), Request{Identity: alice, Tool: ask.Name, Arguments: []byte(args), CallID: callID})
	if err != nil {
		t.Fatal(err)
	}
	qid, _ := resp.Data["question_id"].(string)
	if resp.Outcome != apiv1.OutcomeAwaitingUser || resp.Content != TextAwaitingUser || resp.IsError || qid == "" || resp.Data["expires_at"] != "2025-06-01T13:00:00.000Z" {
		t.Fatalf("ask-user call: %+v", resp)
	}
	return qid
}

func TestAnsweredQuestionIsTheCallsResult(t *testing.T) {
	f, _ := askingFixture(t)
	qid := askQuestion(t, f, "c1", `{"question":"Which branch?"}`)
	st, err := f.pl.PollCall(context.Background(), alice, "c1", 0)
	if err != nil || !st.Pending() || st.Question == nil || st.Question.ID != qid {
		t.Fatalf("poll before the answer: %+v %v", st, err)
	}
	if _, err := f.pl.Answer(context.Background(), AnswerStep{Identity: alice, ID: qid, Answer: "main"}); err != nil {
		t.Fatal(err)
	}
	st, err = f.pl.PollCall(context.Background(), alice, "c1", 0)
	if err != nil || st.Pending() || st.Question.Answer != "main" || st.Question.AnsweredBy != "alice" {
		t.Fatalf("poll after the answer: %+v %v", st.Question, err)
	}
	// decision (allow), result (awaiting_user), question (answered): one
	// chain of events about the call, newest first.
	evs := f.events(t, "c1")
	want := []struct{ phase, outcome string }{{audit.PhaseQuestion, string(apiv1.OutcomeAnswered)}, {audit.PhaseResult, string(apiv1.OutcomeAwaitingUser)}, {audit.PhaseDecision, string(apiv1.OutcomeAllow)}}
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d", len(evs), len(want))
	}
	for i, w := range want {
		if evs[i].Phase != w.phase || evs[i].Outcome != w.outcome {
			t.Errorf("event %d: %s/%s, want %s/%s", i, evs[i].Phase, evs[i].Outcome, w.phase, w.outcome)
		}
	}
	if evs[0].Question == nil || evs[0].Question.ID != qid || evs[0].Question.By != "alice" || evs[0].Result.Bytes != 4 {
		t.Errorf("answer event: %+v %+v", evs[0].Question, evs[0].Result)
	}
	if evs[1].Question == nil || evs[1].Question.ID != qid || evs[1].Question.ExpiresAt == "" {
		t.Errorf("result event: %+v", evs[1].Question)
	}
}

func TestWhoMayAnswerAQuestion(t *testing.T) {
	for _, tc := range []struct {
		name    string
		who     *identity.Identity
		want    error
		decided string // outcome of the audited second decision, "" for none
	}{
		{"the asker", alice, nil, ""},
		{"another principal", bob, ErrQuestionNotFound, string(apiv1.OutcomeDenied)},
		{"a principal whose role policy allows", proxy, nil, string(apiv1.OutcomeAllow)},
		{"another tenant", globexAl, ErrQuestionNotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := askingFixture(t)
			qid := askQuestion(t, f, "c1", `{"question":"Deploy?"}`)
			_, err := f.pl.Answer(context.Background(), AnswerStep{Identity: tc.who, ID: qid, Answer: "yes"})
			if !errors.Is(err, tc.want) {
				t.Fatalf("answer: %v, want %v", err, tc.want)
			}
			st, _ := f.pl.PollCall(context.Background(), alice, "c1", 0)
			if answered := !st.Pending(); answered != (tc.want == nil) {
				t.Fatalf("answered %v after %v", answered, err)
			}
			var decided string
			for _, ev := range f.events(t, "c1") {
				if ev.Phase == audit.PhaseDecision && ev.Question != nil {
					decided = ev.Outcome
					if ev.Question.By != tc.who.Principal || ev.Input["answer"] == nil {
						t.Errorf("second decision event: %+v %v", ev.Question, ev.Input["answer"])
					}
				}
			}
			if decided != tc.decided {
				t.Fatalf("second decision %q, want %q", decided, tc.decided)
			}
		})
	}
}

func TestAQuestionIsAnsweredOnceAndOnlyWithAnOfferedOption(t *testing.T) {
	f, _ := askingFixture(t)
	qid := askQuestion(t, f, "c1", `{"question":"Deploy?","options":["yes","no"]}`)
	if _, err := f.pl.Answer(context.Background(), AnswerStep{Identity: alice, ID: qid, Answer: "maybe"}); !errors.Is(err, ErrAnswerNotOffered) {
		t.Fatalf("answer outside the options: %v", err)
	}
	if _, err := f.pl.Answer(context.Background(), AnswerStep{Identity: alice, ID: qid, Answer: "no"}); err != nil {
		t.Fatal(err)
	}
	for _, who := range []*identity.Identity{alice, proxy} {
		if _, err := f.pl.Answer(context.Background(), AnswerStep{Identity: who, ID: qid, Answer: "yes"}); !errors.Is(err, ErrQuestionAnswered) {
			t.Fatalf("second answer by %s: %v", who.Principal, err)
		}
	}
	if st, _ := f.pl.PollCall(context.Background(), alice, "c1", 0); st.Question.Answer != "no" {
		t.Fatalf("answer after a second try: %q", st.Question.Answer)
	}
}

func TestAnExpiredQuestionIsLikeAMissingOne(t *testing.T) {
	f, c := askingFixture(t)
	qid := askQuestion(t, f, "c1", `{"question":"Deploy?"}`)
	c.advance(time.Hour)
	if _, err := f.pl.Answer(context.Background(), AnswerStep{Identity: alice, ID: qid, Answer: "yes"}); !errors.Is(err, ErrQuestionNotFound) {
		t.Fatalf("answer after expiry: %v", err)
	}
	if _, err := f.pl.PollCall(context.Background(), alice, "c1", 0); !errors.Is(err, ErrCallNotFound) {
		t.Fatalf("poll after expiry: %v", err)
	}
	expired := 0
	for _, ev := range f.events(t, "c1") {
		if ev.Phase == audit.PhaseQuestion && ev.Outcome == string(apiv1.OutcomeExpired) {
			expired++
		}
	}
	if expired != 1 {
		t.Fatalf("%d expiry events, want 1", expired)
	}
}

// pollInBackground starts a long poll and waits until it is subscribed.
func pollInBackground(t *testing.T, f *fixture, callID string, wait time.Duration) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	var st CallState
	go func() {
		var err error
		st, err = f.pl.PollCall(context.Background(), alice, callID, wait)
		if err == nil && st.Pending() {
			err = errors.New("returned pending")
		}
		done <- err
	}()
	eventually(t, "the poll to subscribe", func() bool { return f.pl.calls.size() > 0 })
	return done
}

func TestLongPollReturnsWhenTheQuestionIsAnswered(t *testing.T) {
	f, _ := askingFixture(t)
	qid := askQuestion(t, f, "c1", `{"question":"Deploy?"}`)
	done := pollInBackground(t, f, "c1", MaxPollWait)
	if _, err := f.pl.Answer(context.Background(), AnswerStep{Identity: alice, ID: qid, Answer: "yes"}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := f.pl.calls.size(); n != 0 {
		t.Fatalf("%d waiter entries left", n)
	}
}

func TestLongPollReturnsWhenTheQuestionExpires(t *testing.T) {
	f, c := askingFixture(t)
	askQuestion(t, f, "c1", `{"question":"Deploy?"}`)
	done := pollInBackground(t, f, "c1", MaxPollWait)
	c.advance(2 * time.Hour)
	if err := f.pl.ExpireDue(context.Background(), "acme"); err != nil { // the gateway's sweep
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrCallNotFound) {
		t.Fatalf("poll of an expiring question: %v", err)
	}
}

func TestLongPollReturnsPendingAtTheWaitBoundAndAtShutdown(t *testing.T) {
	f, _ := askingFixture(t)
	askQuestion(t, f, "c1", `{"question":"Deploy?"}`)
	st, err := f.pl.PollCall(context.Background(), alice, "c1", 10*time.Millisecond)
	if err != nil || !st.Pending() {
		t.Fatalf("poll at the bound: %+v %v", st, err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		st, err := f.pl.PollCall(context.Background(), alice, "c1", MaxPollWait)
		if err != nil || !st.Pending() {
			t.Errorf("poll at shutdown: %+v %v", st, err)
		}
	})
	eventually(t, "the poll to subscribe", func() bool { return f.pl.calls.size() > 0 })
	f.pl.StopWaiting()
	wg.Wait()
}
