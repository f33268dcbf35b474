package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolgate/toolgate/internal/identity"
)

// ErrStdioCredential: the token given to ServeStdio does not verify (or
// is a JWT without the gateway's audience).
var ErrStdioCredential = errors.New("mcpserver: the credential does not verify as a credential of this gateway")

// ServeStdio serves one MCP client over in and out (newline-delimited
// JSON-RPC, the stdio transport) until the client hangs up or ctx ends.
// Every request is made as the holder of token, verified again per
// request by the same authenticator and audience rule as /mcp, so an
// expired or revoked credential stops working mid-session. The token is
// never sent anywhere. Each tools/call's JSON-RPC id reaches its audit
// events as over /mcp (stampRequestIDs).
func (s *Server) ServeStdio(ctx context.Context, token string, in io.ReadCloser, out io.WriteCloser) error {
	identify := func(ctx context.Context, _ mcp.Request) (*identity.Identity, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://stdio"+Path, nil)
		if err != nil {
			return nil, rpcError(errUnauthenticated)
		}
		r.Header.Set("Authorization", "Bearer "+token)
		ti, err := s.verify(ctx, token, r)
		if err != nil {
			return nil, rpcError(errUnauthenticated)
		}
		return ti.Extra[identityKeyName].(*identity.Identity), nil
	}
	if _, err := identify(ctx, nil); err != nil {
		return ErrStdioCredential // before the client hears anything
	}
	return s.newMCPServer(identify, stdioRequestID).Run(ctx, &mcp.IOTransport{Reader: stampRequestIDs(in), Writer: out})
}

// stdioRequestIDKey is the _meta key under which the stdio stream hands
// a tools/call's JSON-RPC id to the handler (the SDK gives handlers the
// params, not the id). stampRequestIDs sets it on every tools/call it
// passes, replacing whatever the client put there, and only the stdio
// server reads it: /mcp takes the id from the body it read itself.
const stdioRequestIDKey = "io.toolgate/mcp_request_id"

func stdioRequestID(call *mcp.CallToolRequest) string {
	id, _ := call.Params.Meta[stdioRequestIDKey].(string)
	return id
}

// stampRequestIDs reads the client's stream of JSON-RPC messages (JSON
// values, one a line) and passes each on, one a line, to the SDK's stdio
// connection: a request or notification re-encoded from what was parsed
// here (so the SDK reads exactly the message stamped), a tools/call with
// stdioRequestIDKey in its params' _meta set to auditableID of its id
// (removed when it has none). Anything else goes on as it came. What the
// SDK's connection refuses it still refuses: a value that is not JSON,
// trailing data on a line, a frame over mcp.DefaultMaxLineLength end the
// stream with that error.
func stampRequestIDs(in io.ReadCloser) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		lim := &frameLimit{r: in, left: mcp.DefaultMaxLineLength}
		dec := json.NewDecoder(lim)
		for {
			var raw json.RawMessage
			err := dec.Decode(&raw)
			if err == nil {
				var next [1]byte
				if n, _ := dec.Buffered().Read(next[:]); n > 0 && next[0] != '\n' && next[0] != '\r' {
					err = errors.New("invalid trailing data at the end of stream")
				}
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				pw.CloseWithError(err)
				return
			}
			if _, err := pw.Write(append(stamp(raw), '\n')); err != nil {
				return // the connection closed
			}
			lim.left = mcp.DefaultMaxLineLength
		}
	}()
	return &stampedReader{PipeReader: pr, in: in}
}

// stampedReader closes the client's stream with the pipe, so that the
// copying goroutine ends.
type stampedReader struct {
	*io.PipeReader
	in   io.Closer
	once sync.Once
}

func (r *stampedReader) Close() error {
	var err error
	r.once.Do(func() { err = errors.Join(r.PipeReader.Close(), r.in.Close()) })
	return err
}

// frameLimit bounds what one JSON value may buffer, as the SDK's stdio
// connection does.
type frameLimit struct {
	r    io.Reader
	left int
}

var errFrameTooLarge = fmt.Errorf("a JSON-RPC frame is over %d bytes", mcp.DefaultMaxLineLength)

func (l *frameLimit) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, errFrameTooLarge
	}
	if len(p) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= n
	return n, err
}

// stamp is one JSON value of the stream, stamped: a batch element by
// element.
func stamp(raw json.RawMessage) json.RawMessage {
	switch t := bytes.TrimLeft(raw, " \t\r\n"); {
	case len(t) > 0 && t[0] == '{':
		return stampMessage(raw)
	case len(t) > 0 && t[0] == '[':
		var batch []json.RawMessage
		if json.Unmarshal(raw, &batch) != nil {
			return raw
		}
		for i := range batch {
			batch[i] = stampMessage(batch[i])
		}
		return encode(batch, raw)
	}
	return raw
}

// stampMessage re-encodes a request or notification from its members as
// parsed here (duplicates collapsed), a tools/call stamped with its id.
func stampMessage(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m["method"] == nil {
		return raw // not a request: a response, or what the SDK refuses
	}
	var method string
	if json.Unmarshal(m["method"], &method) == nil && method == "tools/call" {
		var params map[string]json.RawMessage
		if json.Unmarshal(m["params"], &params) == nil && params != nil {
			// A _meta that is no object fails the SDK's decoding of the
			// params (so the call never runs); params that are no object
			// too. Every tools/call that can run is stamped.
			var meta map[string]json.RawMessage
			var metaErr error
			if raw, ok := params["_meta"]; ok {
				metaErr = json.Unmarshal(raw, &meta)
			}
			if metaErr == nil {
				if meta == nil {
					meta = map[string]json.RawMessage{}
				}
				delete(meta, stdioRequestIDKey)
				if id := m["id"]; id != nil && !bytes.Equal(id, []byte("null")) {
					v, _ := json.Marshal(auditableID(id))
					meta[stdioRequestIDKey] = v
				}
				params["_meta"] = encode(meta, nil)
				m["params"] = encode(params, nil)
			}
		}
	}
	return encode(m, raw)
}

// encode is v as compact JSON without HTML escapes; fallback if it
// cannot be encoded.
func encode(v any, fallback json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return fallback
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}
