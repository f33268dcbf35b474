package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/toolgate/toolgate/sdk/client"
)

// fakeGateway stands in for a gateway whose upstream tool declared a
// permanent failure, which needs an upstream service to show for real
// (internal/gateway's TestSDKClientDrivesTheGateway does); the other
// examples run a real gateway.
func fakeGateway() *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/tools/decommission/calls", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusFailedDependency)
		fmt.Fprint(w, `{"error":{"code":"permanent_failure","message":"the tool reported a permanent failure; end the run rather than retry","call_id":"c-2","decision_id":"d-2"}}`)
	})
	return httptest.NewServer(mux)
}

// A platform lists what its agent is offered and calls a tool.
func Example() {
	gw := mustStart() // a real gateway on loopback, with the shipped policy pack
	defer gw.stop()

	c, err := client.New(gw.URL, gw.token("acme", "alice", "developer"))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	tools, err := c.ListTools(ctx, "")
	if err != nil {
		panic(err)
	}
	for _, t := range tools {
		fmt.Println("offered:", t.Name)
	}
	res, err := c.Call(ctx, "read-file", map[string]string{"path": "docs/guide.md"}, &client.CallOptions{SessionID: "s-1"})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Outcome, strings.Contains(res.Content, "# Guide"))
	denied, _ := c.Call(ctx, "read-file", map[string]string{"path": "../globex/docs/globex-only.md"}, nil)
	fmt.Println(denied.Outcome, denied.IsError)
	// Output:
	// offered: read-file
	// offered: write-file
	// offered: ask-user
	// ok true
	// invalid_arguments true
}

// A call policy holds for a human: the agent's platform waits on it while
// an approver (another principal, role approver) approves it; then it runs
// once.
func ExampleClient_Approve() {
	gw := mustStart()
	defer gw.stop()
	ctx := context.Background()
	agent, _ := client.New(gw.URL, gw.token("acme", "alice", "developer"))
	approver, _ := client.New(gw.URL, gw.token("acme", "bob", "developer", "approver"))

	held, err := agent.Call(ctx, "write-file", map[string]string{"path": "release/VERSION", "content": "2\n"}, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(held.Outcome, held.Content)

	pending, _ := approver.Approvals(ctx, client.ApprovalQuery{Status: "pending"})
	for _, a := range pending {
		fmt.Println("pending:", a.Tool, a.Principal, a.Input["args"].(map[string]any)["path"])
		if _, err := approver.Approve(ctx, a.ID, "release 2"); err != nil {
			panic(err)
		}
	}
	st, err := agent.WaitForCall(ctx, held.CallID)
	if err != nil {
		panic(err)
	}
	fmt.Println(st.Outcome, *st.Content)
	// A second approval of the same call is a conflict.
	_, err = approver.Approve(ctx, pending[0].ID, "")
	fmt.Println(errors.Is(err, client.ErrConflict))
	// Output:
	// approval_required approval required
	// pending: write-file alice release/VERSION
	// ok wrote 2 bytes to release/VERSION
	// true
}

// The ask-user tool stores a question; the platform shows it to its user,
// posts the answer, and the call's result is the answer.
func ExampleClient_Answer() {
	gw := mustStart()
	defer gw.stop()
	ctx := context.Background()
	c, _ := client.New(gw.URL, gw.token("acme", "alice", "developer"))

	asked, err := c.Call(ctx, "ask-user", map[string]any{"question": "Ship it?", "options": []string{"yes", "no"}}, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(asked.Outcome)
	if _, err := c.Answer(ctx, asked.Data["question_id"].(string), "yes"); err != nil {
		panic(err)
	}
	st, err := c.WaitForCall(ctx, asked.CallID)
	if err != nil {
		panic(err)
	}
	fmt.Println(st.Outcome, *st.Content)
	// Output:
	// awaiting_user
	// ok yes
}

// A model turn's parallel tool calls go in one batch; results come back in
// request order.
func ExampleClient_Batch() {
	gw := mustStart()
	defer gw.stop()
	c, _ := client.New(gw.URL, gw.token("acme", "alice", "developer"))
	results, err := c.Batch(context.Background(), "s-1", []client.BatchCall{
		{Tool: "read-file", Arguments: map[string]string{"path": "docs/guide.md"}},
		{Tool: "write-file", Arguments: map[string]string{"path": "notes/n.txt", "content": "n"}},
		{Tool: "no-such-tool"},
	})
	if err != nil {
		panic(err)
	}
	for _, r := range results {
		fmt.Println(r.Outcome)
	}
	// Output:
	// ok
	// ok
	// unavailable
}

// An auditor checks the tenant's log and streams it; every exported event
// re-hashes to its hash.
func ExampleClient_ExportEvents() {
	gw := mustStart()
	defer gw.stop()
	ctx := context.Background()
	agent, _ := client.New(gw.URL, gw.token("acme", "alice", "developer"))
	agent.Call(ctx, "read-file", map[string]string{"path": "docs/guide.md"}, nil)
	agent.Call(ctx, "read-file", map[string]string{"path": "secrets/db.env"}, nil)

	auditor, _ := client.New(gw.URL, gw.token("acme", "carol", "auditor"))
	v, err := auditor.VerifyAudit(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("verified:", v.OK, v.EventsChecked)
	err = auditor.ExportEvents(ctx, time.Time{}, time.Time{}, func(ev *client.AuditEvent) error {
		h, err := ev.ComputeHash()
		fmt.Println(ev.Phase, ev.Outcome, h == ev.Hash)
		return err
	})
	if err != nil {
		panic(err)
	}
	// Output:
	// verified: true 3
	// decision allow true
	// result ok true
	// decision denied true
}

// A request refused for its rate (429) or while the audit log is
// overloaded (503) ran nothing: retry it with the same call_id after the
// server's Retry-After.
func ExampleRetryAfter() {
	c, _ := client.New("http://127.0.0.1:8080", "<token>")
	ctx := context.Background()
	opts := &client.CallOptions{CallID: "turn-7-call-1"} // the idempotency key: one effect however often it is sent
	for {
		res, err := c.Call(ctx, "read-file", map[string]string{"path": "docs/guide.md"}, opts)
		if wait, ok := client.RetryAfter(err); ok && errors.Is(err, client.ErrRateLimited) {
			time.Sleep(wait)
			continue
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(res.Content)
		return
	}
}

// A tool that declares a permanent failure ends the run: the call returns
// an *Error with status 424.
func ExampleIsPermanent() {
	gw := fakeGateway()
	defer gw.Close()
	c, _ := client.New(gw.URL, "<token>")
	_, err := c.Call(context.Background(), "decommission", map[string]string{"service_id": "legacy"}, nil)
	fmt.Println(client.IsPermanent(err))
	fmt.Println(err)
	// Output:
	// true
	// toolgate: 424 permanent_failure: the tool reported a permanent failure; end the run rather than retry
}
