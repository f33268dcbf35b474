// Package wspath holds what every tool needs to know about workspace
// paths beyond resolving them: today, the hard-link count a file resource
// carries as "links" (CONTRACT §7) and the write-time refusal of files with
// more than one link.
package wspath
