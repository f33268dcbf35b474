// Package v1 holds the request and response types of Toolgate's HTTP API
// (v1): what api/openapi.yaml describes, as Go values. The server
// (internal/api) encodes its answers with them and the Go SDK (sdk/client)
// decodes them with the same types, so the two cannot drift: a member the
// server adds is one field here, and every client sees it. The
// application services (internal/service) return these values to every
// front door, and [Outcome] is the gateway's one set of outcome words.
//
// The types are encoded with github.com/go-json-experiment/json (the
// coming encoding/json/v2), as the server does; their tags mean the same
// under encoding/json. An AuditEvent decoded from the API re-hashes to its
// hash ([AuditEvent.ComputeHash]) because it holds every member the server
// hashed.
//
// Import it as
//
//	import apiv1 "github.com/toolgate/toolgate/api/v1"
package v1
