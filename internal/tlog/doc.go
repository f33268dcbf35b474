// Package tlog holds the storage-agnostic building blocks of a tenant's
// provable audit log: an append-only Merkle tree with RFC 6962 hashing
// (github.com/transparency-dev/merkle), signed checkpoints in the C2SP
// signed-note format (golang.org/x/mod/sumdb/note, Ed25519, body from
// github.com/transparency-dev/formats/log), inclusion and consistency
// proofs, and the checks an auditor runs. It does no I/O besides the
// signing key file; a store persists what it returns.
//
// # The tree
//
// Each tenant has one tree. Its entries are the events in integration
// order: entry i (the event's log_index) is the 32 raw bytes of the
// event's SHA-256 hash, not its hex form. Leaf hash = SHA-256(0x00 ||
// entry); interior node = SHA-256(0x01 || left || right); the empty tree's
// root is SHA-256 of nothing.
//
// A complete subtree is a node named by NodeID{Level, Index}: it covers
// entries [Index<<Level, (Index+1)<<Level), and its hash never changes.
// The tree's right border (incomplete subtrees) is never stored; proofs
// rebuild it from complete nodes.
//
// # How a store uses it
//
// The integrator, one per tenant, runs in one transaction per batch:
//
//  1. read the tenant's State (UnmarshalBinary of the stored bytes; the
//     zero State for a new tenant);
//  2. Integrate(state, eventHashes) with the next events in order; the
//     first gets log_index state.Size;
//  3. insert every Node of the result into a table keyed by (tenant,
//     level, index) — insert only, never update; store the new State
//     (MarshalBinary) and the events' log_index; commit;
//  4. on its interval, Signer.Sign a Checkpoint{Origin(tenant), size,
//     root} and publish the note.
//
// Level-0 nodes are LeafHash(eventHash): a store may skip them and have
// its NodeReader derive them from the events by log_index. A tree of n
// entries has about 2n nodes. The State is redundant with the node table
// (StateAt rebuilds it, for any size), so a store can recover or
// cross-check it.
//
// Proofs are read through a NodeReader: ProveInclusion(index, size) and
// ProveConsistency(from, to) for any size up to the integrated one; their
// JSON forms are {"index","size","hashes"} and {"from","to","hashes"},
// hashes in standard base64. VerifyInclusion and VerifyConsistency check
// them against checkpoints.
//
// # Checkpoints and keys
//
// A checkpoint note reads:
//
//	toolgate/<tenant>
//	<size>
//	<base64 root>
//
//	— toolgate-audit <base64 of key hash and Ed25519 signature>
//
// The key (KeyName, "toolgate-audit") lives in a file outside the database;
// LoadOrCreateSigner creates it (mode 0600) and refuses one that group or
// others can access; RotateSigner replaces it and keeps the verifier keys
// of previous keys, so that Verifier.Open still accepts what they signed.
// Signer.VerifierKey is the "name+hash+base64key" string auditors pin.
//
// # What an auditor can prove
//
// An auditor keeps a checkpoint note and the verifier key. Someone who can
// write anything to the database but lacks the signing key cannot make
// these checks pass for a log that lost, changed, reordered or inserted
// events covered by the saved checkpoint:
//
//   - offline: Verifier.Open the note, then VerifyLog(checkpoint, entries
//     of the export): the export must be exactly the log the checkpoint
//     commits to (a shorter one fails with ErrTruncated, a longer one
//     reports ErrUncovered after checking the covered prefix);
//   - online: Verifier.Open the saved note, VerifyExtension(saved, the
//     current size and root) to prove the current tree extends it, and
//     VerifyLog(current, every stored event hash in log order) to prove the
//     stored events are that tree.
package tlog
