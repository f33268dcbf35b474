// Package auth turns a bearer credential into a verified identity.Identity.
// Tenant, principal, roles and groups come only from the credential; nothing
// in a request body is ever a second source of identity.
package auth
