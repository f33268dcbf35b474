package tlog

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
)

// HashSize is the size in bytes of every hash in the tree, of an entry (an
// event's SHA-256 hash) and of a root.
const HashSize = sha256.Size

// ErrBadState reports a serialized or in-memory State that is not a valid
// compact range: a wrong hash count for its size, or a hash of the wrong
// length.
var ErrBadState = errors.New("tlog: invalid tree state")

// ErrBadEntry reports an entry that is not HashSize bytes long.
var ErrBadEntry = errors.New("tlog: entry is not a 32-byte hash")

// hasher is RFC 6962 hashing over SHA-256: leaf = SHA-256(0x00 || data),
// node = SHA-256(0x01 || left || right). Proof verification uses it as is.
var hasher = rfc6962.DefaultHasher

// rangeFactory builds trees with nodeHash, the same function as
// hasher.HashChildren without its per-call hash state: integration hashes
// about two nodes per entry.
var rangeFactory = &compact.RangeFactory{Hash: nodeHash}

// nodeHash is SHA-256(0x01 || left || right) for 32-byte children.
func nodeHash(left, right []byte) []byte {
	if len(left) != HashSize || len(right) != HashSize {
		return hasher.HashChildren(left, right)
	}
	var buf [1 + 2*HashSize]byte
	buf[0] = 0x01
	copy(buf[1:], left)
	copy(buf[1+HashSize:], right)
	h := sha256.Sum256(buf[:])
	return h[:]
}

// LeafHash returns the RFC 6962 leaf hash of an entry: SHA-256(0x00 ||
// entry). For an audit event the entry is the 32 raw bytes of its SHA-256
// event hash; the result is the tree node at level 0.
func LeafHash(entry []byte) []byte {
	if len(entry) != HashSize {
		return hasher.HashLeaf(entry)
	}
	var buf [1 + HashSize]byte
	copy(buf[1:], entry)
	h := sha256.Sum256(buf[:])
	return h[:]
}

// EmptyRoot returns the root hash of the empty tree, SHA-256 of nothing.
func EmptyRoot() []byte {
	return hasher.EmptyRoot()
}

// NodeID names a complete (perfect) subtree of a tenant's tree: the node at
// Level covers the 2^Level leaves [Index<<Level, (Index+1)<<Level). Level 0
// nodes are leaf hashes, Index is then the entry's log index. A node's hash
// never changes once the node is complete, so a store can key a table on
// (Level, Index) and never update a row.
type NodeID struct {
	Level uint8
	Index uint64
}

// String formats the id as "level/index" for errors and logs.
func (id NodeID) String() string {
	return fmt.Sprintf("%d/%d", id.Level, id.Index)
}

func fromCompact(id compact.NodeID) NodeID {
	return NodeID{Level: uint8(id.Level), Index: id.Index}
}

// Node is a complete tree node and its hash, as a store persists it.
type Node struct {
	ID   NodeID
	Hash []byte
}

// State is the compact-range state of a tree of Size leaves: the roots of
// the perfect subtrees that make up [0, Size), largest (leftmost) first, one
// per set bit of Size. It is all an integrator needs to append more leaves
// and to compute the root; a store persists it (MarshalBinary) next to the
// tree size. The zero State is the empty tree.
type State struct {
	Size   uint64
	Hashes [][]byte
}

// stateVersion is the first byte of a marshalled State.
const stateVersion = 1

// Validate reports whether s is a well-formed compact range: exactly one
// HashSize-byte hash per set bit of Size.
func (s State) Validate() error {
	if got, want := len(s.Hashes), bits.OnesCount64(s.Size); got != want {
		return fmt.Errorf("%w: size %d needs %d hashes, have %d", ErrBadState, s.Size, want, got)
	}
	for i, h := range s.Hashes {
		if len(h) != HashSize {
			return fmt.Errorf("%w: hash %d is %d bytes", ErrBadState, i, len(h))
		}
	}
	return nil
}

// Root returns the RFC 6962 root hash of the tree s describes (EmptyRoot
// for size 0). Root does not report the right-border nodes it hashes on the
// way: they belong to incomplete subtrees and must never be stored.
func (s State) Root() ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if s.Size == 0 {
		return EmptyRoot(), nil
	}
	r, err := rangeFactory.NewRange(0, s.Size, s.Hashes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadState, err)
	}
	return r.GetRootHash(nil)
}

// MarshalBinary encodes s as one version byte (1), the size as 8 bytes
// big-endian, then the hashes in order, 32 bytes each.
func (s State) MarshalBinary() ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	b := make([]byte, 0, 1+8+len(s.Hashes)*HashSize)
	b = append(b, stateVersion)
	b = binary.BigEndian.AppendUint64(b, s.Size)
	for _, h := range s.Hashes {
		b = append(b, h...)
	}
	return b, nil
}

// UnmarshalBinary decodes what MarshalBinary wrote, rejecting any other
// version, length or hash count.
func (s *State) UnmarshalBinary(b []byte) error {
	if len(b) < 9 || b[0] != stateVersion {
		return fmt.Errorf("%w: not a version %d encoding", ErrBadState, stateVersion)
	}
	size := binary.BigEndian.Uint64(b[1:9])
	rest := b[9:]
	n := bits.OnesCount64(size)
	if len(rest) != n*HashSize {
		return fmt.Errorf("%w: size %d needs %d hash bytes, have %d", ErrBadState, size, n*HashSize, len(rest))
	}
	hashes := make([][]byte, n)
	for i := range hashes {
		hashes[i] = append([]byte(nil), rest[i*HashSize:(i+1)*HashSize]...)
	}
	*s = State{Size: size, Hashes: hashes}
	return nil
}

// Integration is the result of appending a batch of entries to a tree.
type Integration struct {
	// State is the new compact range; persist it in the same transaction
	// as Nodes and the new size.
	State State
	// Root is the new tree's root hash.
	Root []byte
	// Nodes are every node that became complete: the leaf hash of each new
	// entry (level 0) and every parent they completed, in the order they
	// were completed. Nodes already complete before the batch are not
	// repeated; incomplete right-border nodes are never included.
	Nodes []Node
}

// Integrate appends entries (in log order; each the 32-byte SHA-256 event
// hash) to the tree prev describes, and returns the new state, root and
// the newly completed nodes. The first entry gets log index prev.Size.
// prev is not modified. An empty batch returns prev's root and no nodes.
func Integrate(prev State, entries [][]byte) (Integration, error) {
	if err := prev.Validate(); err != nil {
		return Integration{}, err
	}
	for i, e := range entries {
		if len(e) != HashSize {
			return Integration{}, fmt.Errorf("%w: entry %d (log index %d) is %d bytes", ErrBadEntry, i, prev.Size+uint64(i), len(e))
		}
	}
	// compact.Range appends into its hash slice in place: work on a copy so
	// the caller's State stays as it was.
	hashes := make([][]byte, len(prev.Hashes), len(prev.Hashes)+bits.Len64(prev.Size+uint64(len(entries))))
	copy(hashes, prev.Hashes)
	r, err := rangeFactory.NewRange(0, prev.Size, hashes)
	if err != nil {
		return Integration{}, fmt.Errorf("%w: %v", ErrBadState, err)
	}
	// A batch completes one leaf per entry plus fewer than one parent per
	// entry on average, and at most bits.Len64(size) more at its end.
	nodes := make([]Node, 0, 2*len(entries)+bits.Len64(prev.Size))
	visit := func(id compact.NodeID, h []byte) {
		nodes = append(nodes, Node{ID: fromCompact(id), Hash: h})
	}
	for _, e := range entries {
		if err := r.Append(LeafHash(e), visit); err != nil {
			return Integration{}, fmt.Errorf("%w: %v", ErrBadState, err)
		}
	}
	next := State{Size: r.End(), Hashes: r.Hashes()}
	root, err := next.Root()
	if err != nil {
		return Integration{}, err
	}
	return Integration{State: next, Root: root, Nodes: nodes}, nil
}

// RootOf returns the root hash of the tree whose entries are exactly
// entries, in order. Unlike Integrate it keeps no nodes, so it runs over a
// whole export in memory proportional to log2 of its size.
func RootOf(entries [][]byte) ([]byte, error) {
	r := rangeFactory.NewEmptyRange(0)
	for i, e := range entries {
		if len(e) != HashSize {
			return nil, fmt.Errorf("%w: entry %d is %d bytes", ErrBadEntry, i, len(e))
		}
		if err := r.Append(LeafHash(e), nil); err != nil {
			return nil, err
		}
	}
	return State{Size: r.End(), Hashes: r.Hashes()}.Root()
}
