package mcpserver

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/auth"
)

// ErrStdioCredential: the token given to ServeStdio does not verify (or
// is a JWT without the gateway's audience).
var ErrStdioCredential = errors.New("mcpserver: the credential does not verify as a credential of this gateway")

// ServeStdio serves one MCP client over in and out (newline-delimited
// JSON-RPC, the stdio transport) until the client hangs up or ctx ends.
// Every request is made as the holder of token, verified again per
// request by the same authenticator and audience rule as /mcp, so an
// expired or revoked credential stops working mid-session. The token is
// never sent anywhere.
func (s *Server) ServeStdio(ctx context.Context, token string, in io.ReadCloser, out io.WriteCloser) error {
	identify := func(ctx context.Context, _ mcp.Request) (*auth.Identity, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://stdio"+Path, nil)
		if err != nil {
			return nil, rpcError(errUnauthenticated)
		}
		r.Header.Set("Authorization", "Bearer "+token)
		ti, err := s.verify(ctx, token, r)
		if err != nil {
			return nil, rpcError(errUnauthenticated)
		}
		return ti.Extra[identityKeyName].(*auth.Identity), nil
	}
	if _, err := identify(ctx, nil); err != nil {
		return ErrStdioCredential // before the client hears anything
	}
	return s.newMCPServer(identify, httpRequestID).Run(ctx, &mcp.IOTransport{Reader: in, Writer: out})
}
