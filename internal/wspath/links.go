package wspath

import (
	"io/fs"
	"strconv"
)

// AddLinks sets r["links"] to the hard-link count of fi when it is above
// 1, the only case a file resource carries it, and returns r.
func AddLinks(r map[string]any, fi fs.FileInfo) map[string]any {
	if n := Links(fi); n > 1 {
		r["links"] = float64(n)
	}
	return r
}

// LinksMessage is the model-safe reason a tool gives for refusing to write
// a file with n hard links: a write through one name changes every other
// name of the same file, protected ones included.
func LinksMessage(n int) string {
	return "the file has " + strconv.Itoa(n) + " hard links; it is not written through any of them"
}
