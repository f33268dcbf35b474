package workspace

import (
	"errors"

	"github.com/toolgate/toolgate/internal/tools"
)

// The family's argument readers are the shared ones in package tools.
var (
	copyArgs       = tools.CopyArgs
	stringArg      = tools.StringArg
	requiredString = tools.RequiredString
	intArg         = tools.IntArg
	boolArg        = tools.BoolArg
)

// errNoWorkspace is returned when a tool is called without a workspace; it
// is a wiring mistake, not the model's.
var errNoWorkspace = errors.New("workspace: no workspace in env")
