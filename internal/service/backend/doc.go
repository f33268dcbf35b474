// Package backend implements the application services of
// internal/service over the pipeline, the audit log and the policy
// engine; the gateway (internal/gateway) wires it. Its constructors
// return the services checked (service.Checked…): every role and request
// check of internal/service runs before anything here reads or changes
// anything. Front doors never import this package: they compile against
// internal/service alone, which imports no pipeline, store, engine or
// configuration.
package backend
