package tlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
)

// ErrNodeNotFound is what a NodeReader returns (wrapped) for a node it does
// not have: the tree is smaller than the proof asks for, or nodes are
// missing from the store.
var ErrNodeNotFound = errors.New("tlog: tree node not found")

// ErrBadProof reports a proof that does not prove what it claims: a wrong
// hash count, a hash of the wrong length, or hashes that do not lead to the
// expected root(s).
var ErrBadProof = errors.New("tlog: proof does not verify")

// ErrBadRange reports proof parameters outside the tree: an index not
// below the size, or a consistency proof from a larger to a smaller size.
var ErrBadRange = errors.New("tlog: proof range out of bounds")

// NodeReader reads complete tree nodes, as Integrate reported them, from
// wherever a store keeps them.
type NodeReader interface {
	// Nodes returns the hashes of ids, in the same order. It fails,
	// wrapping ErrNodeNotFound, when any of them is missing.
	Nodes(ctx context.Context, ids []NodeID) ([][]byte, error)
}

// MemNodes is a NodeReader over a map, for tests and for an offline verifier
// that rebuilt a tree from an export.
type MemNodes map[NodeID][]byte

// Put adds nodes, as Integrate returned them.
func (m MemNodes) Put(nodes []Node) {
	for _, n := range nodes {
		m[n.ID] = n.Hash
	}
}

// Nodes implements NodeReader.
func (m MemNodes) Nodes(_ context.Context, ids []NodeID) ([][]byte, error) {
	out := make([][]byte, len(ids))
	for i, id := range ids {
		h, ok := m[id]
		if !ok {
			return nil, fmt.Errorf("%w: %s", ErrNodeNotFound, id)
		}
		out[i] = h
	}
	return out, nil
}

// InclusionProof is an RFC 6962 inclusion (audit) proof that the entry at
// Index is in the tree of Size entries. Its JSON form is
// {"index":I,"size":N,"hashes":["base64",…]}, hashes from the leaf's
// sibling up to the root's child.
type InclusionProof struct {
	Index  uint64   `json:"index"`
	Size   uint64   `json:"size"`
	Hashes [][]byte `json:"hashes"`
}

// ConsistencyProof is an RFC 6962 consistency proof that the tree of From
// entries is a prefix of the tree of To entries. Its JSON form is
// {"from":M,"to":N,"hashes":["base64",…]}.
type ConsistencyProof struct {
	From   uint64   `json:"from"`
	To     uint64   `json:"to"`
	Hashes [][]byte `json:"hashes"`
}

// ProveInclusion builds the inclusion proof of the entry at index in the
// tree of the given size from stored nodes. size must not exceed the
// integrated tree size (nodes of a larger tree are missing: the error then
// wraps ErrNodeNotFound).
func ProveInclusion(ctx context.Context, r NodeReader, index, size uint64) (InclusionProof, error) {
	if index >= size {
		return InclusionProof{}, fmt.Errorf("%w: index %d, size %d", ErrBadRange, index, size)
	}
	nodes, err := proof.Inclusion(index, size)
	if err != nil {
		return InclusionProof{}, fmt.Errorf("%w: %v", ErrBadRange, err)
	}
	hashes, err := fetch(ctx, r, nodes)
	if err != nil {
		return InclusionProof{}, err
	}
	return InclusionProof{Index: index, Size: size, Hashes: hashes}, nil
}

// ProveConsistency builds the consistency proof between the trees of from
// and to entries (from <= to) from stored nodes. It is empty when from is
// 0 or equal to to.
func ProveConsistency(ctx context.Context, r NodeReader, from, to uint64) (ConsistencyProof, error) {
	if from > to {
		return ConsistencyProof{}, fmt.Errorf("%w: from %d > to %d", ErrBadRange, from, to)
	}
	nodes, err := proof.Consistency(from, to)
	if err != nil {
		return ConsistencyProof{}, fmt.Errorf("%w: %v", ErrBadRange, err)
	}
	hashes, err := fetch(ctx, r, nodes)
	if err != nil {
		return ConsistencyProof{}, err
	}
	return ConsistencyProof{From: from, To: to, Hashes: hashes}, nil
}

// fetch reads the nodes a proof needs and folds the ones under its
// ephemeral (incomplete) node into that node's hash.
func fetch(ctx context.Context, r NodeReader, nodes proof.Nodes) ([][]byte, error) {
	ids := make([]NodeID, len(nodes.IDs))
	for i, id := range nodes.IDs {
		ids[i] = fromCompact(id)
	}
	if len(ids) == 0 {
		return [][]byte{}, nil
	}
	got, err := r.Nodes(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("tlog: reading proof nodes: %w", err)
	}
	if len(got) != len(ids) {
		return nil, fmt.Errorf("tlog: node reader returned %d hashes for %d nodes", len(got), len(ids))
	}
	// Rehash overwrites the list it is given: copy it, so a reader may hand
	// out a list it keeps.
	hashes := make([][]byte, len(got))
	for i, h := range got {
		if len(h) != HashSize {
			return nil, fmt.Errorf("tlog: node %s is %d bytes, want %d", ids[i], len(h), HashSize)
		}
		hashes[i] = h
	}
	return nodes.Rehash(hashes, hasher.HashChildren)
}

// VerifyInclusion checks that p proves entry (a 32-byte event hash) is at
// p.Index in the tree cp commits to: p.Size must be cp.Size.
func VerifyInclusion(p InclusionProof, entry []byte, cp Checkpoint) error {
	if len(entry) != HashSize {
		return fmt.Errorf("%w: %d bytes", ErrBadEntry, len(entry))
	}
	if p.Size != cp.Size {
		return fmt.Errorf("%w: proof is for size %d, checkpoint has size %d", ErrBadProof, p.Size, cp.Size)
	}
	if len(cp.Root) != HashSize {
		return fmt.Errorf("%w: root is %d bytes", ErrBadProof, len(cp.Root))
	}
	if p.Index >= p.Size {
		return fmt.Errorf("%w: index %d, size %d", ErrBadRange, p.Index, p.Size)
	}
	if err := proof.VerifyInclusion(hasher, p.Index, p.Size, LeafHash(entry), p.Hashes, cp.Root); err != nil {
		return fmt.Errorf("%w: inclusion of index %d in size %d: %v", ErrBadProof, p.Index, p.Size, err)
	}
	return nil
}

// VerifyConsistency checks that p proves the tree from commits to is a
// prefix of the tree to commits to: p.From must be from.Size and p.To
// to.Size.
func VerifyConsistency(p ConsistencyProof, from, to Checkpoint) error {
	if p.From != from.Size || p.To != to.Size {
		return fmt.Errorf("%w: proof is for sizes %d to %d, checkpoints have %d and %d", ErrBadProof, p.From, p.To, from.Size, to.Size)
	}
	if p.From > p.To {
		return fmt.Errorf("%w: from %d > to %d", ErrBadRange, p.From, p.To)
	}
	if len(from.Root) != HashSize || len(to.Root) != HashSize {
		return fmt.Errorf("%w: roots are %d and %d bytes", ErrBadProof, len(from.Root), len(to.Root))
	}
	// The library accepts any root for an empty tree; there is only one.
	if p.From == 0 && !bytes.Equal(from.Root, EmptyRoot()) {
		return fmt.Errorf("%w: root of size 0 is not the empty tree's", ErrBadProof)
	}
	if err := proof.VerifyConsistency(hasher, p.From, p.To, p.Hashes, from.Root, to.Root); err != nil {
		return fmt.Errorf("%w: consistency of size %d with size %d: %v", ErrBadProof, p.From, p.To, err)
	}
	return nil
}

// StateAt reads the State of the tree of the given size from stored nodes:
// its compact range is made of complete nodes only. A store can use it to
// recover or cross-check its persisted State, or to compute the root of
// any earlier size (StateAt(…).Root()).
func StateAt(ctx context.Context, r NodeReader, size uint64) (State, error) {
	cids := compact.RangeNodes(0, size, nil)
	if len(cids) == 0 {
		return State{}, nil
	}
	ids := make([]NodeID, len(cids))
	for i, id := range cids {
		ids[i] = fromCompact(id)
	}
	hashes, err := r.Nodes(ctx, ids)
	if err != nil {
		return State{}, fmt.Errorf("tlog: reading tree state: %w", err)
	}
	st := State{Size: size, Hashes: hashes}
	if err := st.Validate(); err != nil {
		return State{}, err
	}
	return st, nil
}
