// Package mcptool offers the tools of MCP servers (tools.mcp) as governed
// gateway tools, through the official Go SDK's client
// (github.com/modelcontextprotocol/go-sdk).
//
// An Upstream is one MCP server, reached over streamable HTTP or started
// as a stdio program inside the command jail. Discover lists its tools;
// each offered one becomes a Tool named "<namespace>-<tool>" (Normalize)
// with kind "mcp", the upstream's input schema (whatever JSON Schema draft
// it declares) and its annotations, which policy sees as untrusted.
//
// Pinned definitions: the canonical definition of a tool (RFC 8785 of its
// name, description, input schema and annotations, see Definition) has a
// SHA-256 digest; mcp.lock.json (Lock) records the approved digest of each
// tool. A tool whose digest differs from its pin, or that has none, is not
// offered; Refresh re-lists the tools and withholds a tool whose
// definition drifted (the gateway then answers "tool unavailable") until it
// matches its pin again. Every drift is reported once per digest through
// Options.OnDrift. Run refreshes every interval and, debounced, whenever
// the upstream sends notifications/tools/list_changed (over streamable
// HTTP heard on a session of its own, see Upstream.Run).
//
// Calls: Prepare applies the schema's top-level defaults and builds the
// typed resources (a "service" resource for the tool plus the configured
// mapping); Run forwards exactly the prepared arguments with tools/call.
// Over streamable HTTP every request carries a signed Toolgate-Assertion
// (never the caller's credential) and, with a TokenExchange, the access
// token an RFC 8693 exchange of that assertion gives (oauthex.ExchangeToken),
// cached per tenant, principal and roles; each of those subjects then calls
// over an MCP session of its own, since servers bind a session to the user
// of its token. No token, nothing sent. Results map like HTTP upstream tools:
// text content is the result; isError results are model-facing errors
// (text capped at MaxToolErrorBytes); everything else — protocol errors, a
// result larger than the response limit, a timeout — is "the tool failed".
package mcptool
