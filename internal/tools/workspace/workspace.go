package workspace

import "github.com/toolgate/toolgate/internal/tools"

// Tools returns the workspace tools in their published order: read-file,
// write-file, edit-file, glob, grep.
func Tools() []tools.Tool {
	return []tools.Tool{NewReadFile(), NewWriteFile(), NewEditFile(), NewGlob(), NewGrep()}
}

// Compile-time checks that every tool implements tools.Tool.
var (
	_ tools.Tool = (*ReadFile)(nil)
	_ tools.Tool = (*WriteFile)(nil)
	_ tools.Tool = (*EditFile)(nil)
	_ tools.Tool = (*Glob)(nil)
	_ tools.Tool = (*Grep)(nil)
)
