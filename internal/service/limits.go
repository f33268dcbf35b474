package service

// DefaultMaxBodyBytes bounds a request body every front door reads (REST,
// MCP, console) unless configured otherwise (limits.max_body_bytes).
const DefaultMaxBodyBytes = 1 << 20
