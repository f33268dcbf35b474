package shell

import (
	"strconv"

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

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
