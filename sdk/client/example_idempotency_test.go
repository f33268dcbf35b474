package client_test

import (
	"context"
	"fmt"

	"github.com/toolgate/toolgate/sdk/client"
)

// A call retried after a network error with the same CallID answers the
// recorded response and runs nothing again; the same CallID with other
// arguments is a conflict. Against a real gateway on loopback.
func ExampleIsConflict() {
	gw := mustStart()
	defer gw.stop()
	c, _ := client.New(gw.URL, gw.token("acme", "alice", "developer"))
	ctx := context.Background()
	args := map[string]string{"path": "notes/retried.txt", "content": "hello"}
	opts := &client.CallOptions{CallID: "turn-7-call-1"}

	first, err := c.Call(ctx, "write-file", args, opts)
	if err != nil {
		panic(err)
	}
	retry, err := c.Call(ctx, "write-file", args, opts) // say the first answer was lost
	if err != nil {
		panic(err)
	}
	fmt.Println(first.Outcome, first.DecisionID == retry.DecisionID, first.Content == retry.Content)

	_, err = c.Call(ctx, "write-file", map[string]string{"path": "notes/retried.txt", "content": "other"}, opts)
	fmt.Println(client.IsConflict(err))
	// Output:
	// ok true true
	// true
}
