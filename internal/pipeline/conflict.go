package pipeline

import (
	"fmt"

	"github.com/toolgate/toolgate/internal/prepare"
)

// target is one thing a call touches, as far as ordering within a batch is
// concerned.
type target struct {
	key   string
	write bool
}

// targets lists what a prepared call touches: files by their resolved
// path (writing when access is write), processes and tasks by id, a
// session's task list, and "the command runner" for commands, whose
// effects no resource fully describes. Other resources (urls, skills)
// order nothing.
func targets(prep *prepare.Prepared) []target {
	doc := prep.Document()
	res, _ := doc["resources"].([]any)
	readOnly := prep.Spec().Annotations.ReadOnly
	var out []target
	for _, v := range res {
		r, _ := v.(map[string]any)
		switch r["type"] {
		case "file":
			out = append(out, target{key: fmt.Sprintf("file:%v", r["path"]), write: r["access"] == "write"})
		case "process", "task":
			out = append(out, target{key: fmt.Sprintf("%v:%v", r["type"], r["id"]), write: !readOnly})
		case "task_list":
			out = append(out, target{key: fmt.Sprintf("task_list:%v", r["session"]), write: !readOnly})
		case "command":
			out = append(out, target{key: "command", write: true})
		}
	}
	return out
}

// conflicts returns, for each prepared call that is not final yet, the
// earlier such calls it must wait for: those sharing a target with it where at least one of
// the two writes. Waiting on every such earlier call (not only the last)
// keeps request order even when reads sit between two writes.
func conflicts(calls []*call, final []bool) [][]int {
	deps := make([][]int, len(calls))
	type seen struct {
		idx   int
		write bool
	}
	byKey := map[string][]seen{}
	for i, c := range calls {
		if c.prepared == nil || final[i] {
			continue
		}
		ts := targets(c.prepared)
		added := map[int]bool{}
		for _, t := range ts {
			for _, s := range byKey[t.key] {
				if (s.write || t.write) && !added[s.idx] && s.idx != i {
					deps[i] = append(deps[i], s.idx)
					added[s.idx] = true
				}
			}
		}
		for _, t := range ts {
			byKey[t.key] = append(byKey[t.key], seen{i, t.write})
		}
	}
	return deps
}
