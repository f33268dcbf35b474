package shell

import (
	"io/fs"
	"os"

	"github.com/toolgate/toolgate/internal/wspath"
)

// resolveDir resolves a working folder inside root with the one resolver
// of workspace paths (wspath.Resolve, mode Folder): it must exist and be a
// folder. It returns the cleaned, slash-separated, symlink-free
// workspace-relative path ("." is the root) with its Lstat for an identity
// check at run time. Errors are ArgErrors on pointer with wspath's rules.
func resolveDir(root *os.Root, pointer, name string) (string, fs.FileInfo, error) {
	r, err := wspath.Resolve(root, name, wspath.Options{Mode: wspath.Folder, Pointer: pointer})
	if err != nil {
		return "", nil, err
	}
	return r.Rel, r.Info, nil
}
