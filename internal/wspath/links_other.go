//go:build !unix

package wspath

import "io/fs"

// Links returns 1: this platform does not report hard-link counts.
func Links(fs.FileInfo) int { return 1 }
