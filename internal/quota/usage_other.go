//go:build !linux

package quota

import (
	"io/fs"
	"path/filepath"
)

// Usage is the size of the tree at dir: the sum of the sizes of its
// regular files, symlinks never followed (a portable approximation; Linux
// counts allocated blocks).
func Usage(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			total += fi.Size()
		}
		return nil
	})
	return total, err
}
