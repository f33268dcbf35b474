package tools

// Choice is one value a caller may pass for a tool's enumerated argument
// (a skill's name), with what the availability policy sees about it and
// how the published schema describes it.
type Choice struct {
	Value       string
	Description string
	// Policy is shown to the availability entrypoint as input.choice, e.g.
	// {"type":"skill","name":"pdf","version":"1.0.0"}. Values follow the
	// same rules as Resource values.
	Policy map[string]any
}

// Chooser is a tool whose input schema depends on the caller: one argument
// takes one of the values the tenant's environment holds, and each value is
// offered (or not) by the availability policy. The schema rendered from the
// offered choices is both the one GET /v1/tools publishes to that caller
// and the one prepare enforces on that caller's call, so they cannot
// differ. Spec().InputSchema stays the caller-independent superset.
type Chooser interface {
	Tool
	// Choices lists the values env holds, in a stable order.
	Choices(env *Env) ([]Choice, error)
	// SchemaFor renders the input schema that accepts exactly choices
	// (never empty).
	SchemaFor(choices []Choice) string
}
