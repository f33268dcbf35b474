//go:build unix

package wspath

import (
	"io/fs"
	"syscall"
)

// Links returns the hard-link count of a regular file, or 1 for anything
// else (folders, symlinks, devices) and when the platform does not say.
func Links(fi fs.FileInfo) int {
	if fi == nil || !fi.Mode().IsRegular() {
		return 1
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Nlink < 1 {
		return 1
	}
	return int(st.Nlink)
}
