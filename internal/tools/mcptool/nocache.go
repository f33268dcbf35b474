package mcptool

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// newClient is an SDK client that never serves tools/list from its cache.
// On protocol revision 2026-07-28 the go-sdk client keeps a list result
// for as long as the result's ttlMs says (SEP-2549), and that number is
// the upstream's to choose: an upstream answering ttlMs of a day would
// see every refresh within the day answered from the cache, so a
// definition it changed after review would not be seen drifting from its
// pin. The gateway forgets the hint: every listing asks the upstream.
func newClient(opts *mcp.ClientOptions) *mcp.Client {
	c := mcp.NewClient(&mcp.Implementation{Name: "toolgate", Version: "1"}, opts)
	c.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if lr, ok := res.(*mcp.ListToolsResult); ok && lr != nil {
				lr.TTLMs = 0 // stale at once: the client's cache never answers
			}
			return res, err
		}
	})
	return c
}
