// Package quota bounds the disk space of each tenant's workspace
// (limits.workspace_bytes), so that one tenant filling its workspace never
// fills the disk the others, or the audit database, write to.
//
// Each workspace gets a Meter, chosen at start by Open:
//
//   - BtrfsQgroup (hard): the workspace is a btrfs subvolume on a
//     filesystem whose quotas are enabled and its qgroup carries the
//     limit; the kernel refuses every write past it (EDQUOT), root's
//     included. The Meter reads the kernel's own count.
//   - Accounting (soft): the Meter walks the workspace, summing the
//     allocated bytes of every entry (st_blocks × 512, symlinks never
//     followed, hard links counted once), and the tools refuse writes
//     while the last measurement is at or over the limit.
//
// Measurements run off the request path: Changed asks for one, and the
// requests of one workspace that arrive while one runs share the next.
package quota
