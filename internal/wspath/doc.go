// Package wspath owns workspace paths: Resolve, the one resolver every
// tool and the jail builder use to turn a workspace-relative name into the
// symlink-free path of its real target (with the same ArgError rules for
// the same conditions everywhere), and the hard-link count a file resource
// carries as "links" (CONTRACT §7) with the write-time refusal of files
// with more than one link.
package wspath
