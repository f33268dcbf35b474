// Package upstream implements application tools declared in config: an
// HTTP service runs the tool, the gateway does everything around it.
//
// Prepare applies the schema's top-level defaults, builds the declared
// typed resources from the arguments by JSON pointer, and freezes the RFC
// 8785 canonical JSON of the arguments as the request body. Run sends
// exactly that body to the configured URL (arguments never choose the
// host) with a signed identity assertion (upstreamv1.AssertionHeader) naming the
// caller, the call and the digests of the request document and of the
// body, over a connection pool of its own, with a timeout and a
// concurrency limit. The request carries the call's W3C trace context
// (traceparent), so the service's own spans join the caller's trace.
//
// Responses follow the contract's model-facing rules:
//
//   - 2xx with a JSON string body: the string is the result;
//   - 2xx with any other JSON: the JSON text is the result;
//   - non-2xx with {"tool_error":"text"} (upstreamv1.ErrorBody): a
//     model-facing error with exactly that text;
//   - non-2xx with {"permanent":true} (optionally "detail"): a permanent
//     failure, wrapping tools.ErrPermanent;
//   - anything else (other statuses and bodies, non-JSON, a body over the
//     response limit, a timeout, a refused connection): "the tool failed".
//
// Upstream diagnostics (status, detail, a short excerpt of an unexpected
// body) are carried by the Run error, which the gateway writes to the
// audit result event and the log, never to the response.
package upstream
