package client_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/toolgate/toolgate/sdk/client"
)

// fakeGateway answers like a gateway for the examples; real code points
// client.New at the gateway.
func fakeGateway() *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/tools", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"tools":[{"name":"maintenance-window","description":"Find a service's next maintenance window.","input_schema":{"type":"object"}}]}`)
	})
	mux.HandleFunc("POST /v1/tools/maintenance-window/calls", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"call_id":"c-1","decision_id":"d-1","outcome":"ok","content":"checkout: Sunday 02:00-02:30 UTC","is_error":false}`)
	})
	mux.HandleFunc("POST /v1/tools/decommission/calls", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusFailedDependency)
		fmt.Fprint(w, `{"error":{"code":"permanent_failure","message":"the tool reported a permanent failure; end the run rather than retry","call_id":"c-2","decision_id":"d-2"}}`)
	})
	return httptest.NewServer(mux)
}

func Example() {
	gw := fakeGateway()
	defer gw.Close()

	c, err := client.New(gw.URL, "<a JWT or API key>")
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	tools, _ := c.ListTools(ctx, "")
	for _, t := range tools {
		fmt.Println("offered:", t.Name)
	}
	res, err := c.Call(ctx, "maintenance-window", map[string]string{"service_id": "checkout"}, &client.CallOptions{SessionID: "s-1"})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Outcome, res.Content)
	// Output:
	// offered: maintenance-window
	// ok checkout: Sunday 02:00-02:30 UTC
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
