package pipeline

import (
	"fmt"
	"slices"

	"github.com/toolgate/toolgate/internal/invoke"
	"github.com/toolgate/toolgate/internal/prepare"
)

// target is one thing a call touches, as far as ordering within a batch is
// concerned.
type target struct {
	key   string
	write bool
}

// touch is what a prepared call touches: its targets, and whether it may
// read any file of the workspace (a command: which files a program opens is
// not in its arguments).
type touch struct {
	targets   []target
	readsAll  bool
	writesAny bool // some target is a file it writes
}

// touches lists what a prepared call touches: files by their resolved path
// (writing when access is write), processes and tasks by id, a session's
// task list. A command (a tool whose action is command.execute) reads the
// whole workspace and writes the files its resources say it writes
// (access "write"); two commands are not ordered otherwise, so that
// independent commands run at once. Other resources (urls, skills) order
// nothing.
func touches(prep *prepare.Prepared) touch {
	doc := prep.Document()
	res, _ := doc["resources"].([]any)
	readOnly := prep.Spec().Annotations.ReadOnly
	t := touch{readsAll: invoke.IsCommand(prep.Spec())}
	for _, v := range res {
		r, _ := v.(map[string]any)
		switch r["type"] {
		case "file":
			w := r["access"] == "write"
			t.targets = append(t.targets, target{key: fmt.Sprintf("file:%v", r["path"]), write: w})
			t.writesAny = t.writesAny || w
		case "process", "task":
			t.targets = append(t.targets, target{key: fmt.Sprintf("%v:%v", r["type"], r["id"]), write: !readOnly})
		case "task_list":
			t.targets = append(t.targets, target{key: fmt.Sprintf("task_list:%v", r["session"]), write: !readOnly})
		case "command":
			t.readsAll = true
		}
	}
	return t
}

// conflicts returns, for each prepared call that is not final yet, the
// earlier such calls it must wait for: those sharing a target with it where
// at least one of the two writes, and, between a call that reads the whole
// workspace and one that writes a file, the earlier of the two. Waiting on
// every such earlier call (not only the last) keeps request order even
// when reads sit between two writes.
func conflicts(calls []*call, final []bool) [][]int {
	deps := make([][]int, len(calls))
	type seen struct {
		idx   int
		write bool
	}
	byKey := map[string][]seen{}
	var readAll, wroteFile []int // earlier calls reading every file, writing some file
	for i, c := range calls {
		if c.prepared == nil || final[i] {
			continue
		}
		t := touches(c.prepared)
		added := map[int]bool{}
		dep := func(j int) {
			if !added[j] && j != i {
				deps[i] = append(deps[i], j)
				added[j] = true
			}
		}
		for _, tg := range t.targets {
			for _, s := range byKey[tg.key] {
				if s.write || tg.write {
					dep(s.idx)
				}
			}
		}
		if t.readsAll {
			for _, j := range wroteFile {
				dep(j)
			}
		}
		if t.writesAny {
			for _, j := range readAll {
				dep(j)
			}
		}
		for _, tg := range t.targets {
			byKey[tg.key] = append(byKey[tg.key], seen{i, tg.write})
		}
		if t.readsAll {
			readAll = append(readAll, i)
		}
		if t.writesAny {
			wroteFile = append(wroteFile, i)
		}
		slices.Sort(deps[i])
	}
	return deps
}
