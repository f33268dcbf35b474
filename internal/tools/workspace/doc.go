// Package workspace implements the built-in file tools of a tenant's
// workspace: read-file, write-file, edit-file, glob and grep.
//
// Every path goes through the tenant's *os.Root. Prepare resolves the path
// component by component (symlinks included, with a hop limit) so that policy
// sees the file that would really be touched, and remembers that file's
// identity (device, inode, type) — or, for a file that does not exist yet,
// the identity of its deepest existing ancestor. Run opens the resolved path
// through the same root, compares the identity on the opened descriptor and
// fails with an error wrapping tools.ErrTargetChanged, before any effect, when
// it differs.
//
// Hard links: the file resource of a regular file with more than one name
// carries "links": N (read-file, write-file, edit-file, grep of a file), so
// policy can refuse it. write-file and edit-file never write such a file:
// Run checks the link count on the opened descriptor (before the identity,
// and again right before the first byte changes) and fails with a
// model-safe tools.ModelError, so an approved target swapped for a hard
// link to another file, or given a second name, is not written.
//
// Walks (glob, grep) never follow symbolic links: glob lists a link's own
// path when it matches but never descends into it, grep never reads through
// one. Both skip every path matching one of Limits.ExcludePaths (OPA
// glob.match semantics with "/" as the delimiter) and do not descend into an
// excluded directory. Every tool also refuses a single target that is
// excluded or lies below an excluded directory.
package workspace
