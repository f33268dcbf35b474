package task

import "slices"

// CreatesCycle reports whether making id blocked by deps would close a
// dependency cycle, given every task's current dependencies in edges
// (task id → the ids it is blocked by). A cycle closes exactly when id is
// among deps or some dep is already, directly or transitively, blocked by
// id. The walk visits each task once, so it is linear in the session.
// Stores call it with the session's edges read in the transaction that
// writes.
func CreatesCycle(edges map[string][]string, id string, deps []string) bool {
	seen := make(map[string]bool, len(edges))
	stack := append([]string(nil), deps...)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n == id {
			return true
		}
		if seen[n] {
			continue
		}
		seen[n] = true
		stack = append(stack, edges[n]...)
	}
	return false
}

// NewDeps returns the ids of next not in prev: only new edges can close a
// cycle or name a task that does not exist.
func NewDeps(prev, next []string) []string {
	var out []string
	for _, d := range next {
		if !slices.Contains(prev, d) {
			out = append(out, d)
		}
	}
	return out
}
