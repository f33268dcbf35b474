package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	"github.com/toolgate/toolgate/sdk/client"
)

// keyedGateway answers calls the way a gateway treats call_ids, for the
// example (the gateway's own behaviour is tested end to end in
// internal/gateway): the first request with a call_id runs, the same
// request again gets the recorded response, another request with it is a
// 409 conflict.
func keyedGateway() (*httptest.Server, *int) {
	var mu sync.Mutex
	runs := 0
	recorded := map[string]string{} // call_id → arguments
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/tools/write-file/calls", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Arguments json.RawMessage `json:"arguments"`
			CallID    string          `json:"call_id"`
		}
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &in)
		mu.Lock()
		defer mu.Unlock()
		switch args, seen := recorded[in.CallID]; {
		case !seen:
			recorded[in.CallID] = string(in.Arguments)
			runs++
		case args != string(in.Arguments):
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"error":{"code":"conflict","message":"call_id was already used by another request; nothing was run: a new call needs a new call_id"}}`)
			return
		}
		fmt.Fprintf(w, `{"call_id":%q,"decision_id":"d-1","outcome":"ok","content":"wrote 5 bytes to notes/a.txt","is_error":false}`, in.CallID)
	})
	return httptest.NewServer(mux), &runs
}

// A call retried after a network error with the same CallID answers the
// recorded response and runs nothing again; the same CallID with other
// arguments is a conflict.
func ExampleIsConflict() {
	gw, runs := keyedGateway()
	defer gw.Close()
	c, _ := client.New(gw.URL, "<token>")
	ctx := context.Background()
	args := map[string]string{"path": "notes/a.txt", "content": "hello"}
	opts := &client.CallOptions{CallID: "turn-7-call-1"}

	first, _ := c.Call(ctx, "write-file", args, opts)
	retry, _ := c.Call(ctx, "write-file", args, opts) // say the first answer was lost
	fmt.Println(first.DecisionID == retry.DecisionID, *runs)

	_, err := c.Call(ctx, "write-file", map[string]string{"path": "notes/a.txt", "content": "other"}, opts)
	fmt.Println(client.IsConflict(err))
	// Output:
	// true 1
	// true
}
