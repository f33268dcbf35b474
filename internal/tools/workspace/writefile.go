package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"time"

	"github.com/toolgate/toolgate/internal/tools"
	"github.com/toolgate/toolgate/internal/wspath"
)

// write-file limits.
const (
	writeMaxOutput = 16 << 10
	newFilePerm    = 0o644
	newDirPerm     = 0o755
)

const writeFileSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "path": {
      "type": "string", "minLength": 1, "maxLength": 4096,
      "description": "File to write, relative to the workspace root, with '/' as separator. Missing parent directories are created."
    },
    "content": {
      "type": "string", "maxLength": 1048576,
      "description": "The complete new content of the file. An existing file is overwritten."
    }
  },
  "required": ["path", "content"],
  "additionalProperties": false
}`

// WriteFile is the write-file tool: create or overwrite a file.
type WriteFile struct{ spec tools.Spec }

// NewWriteFile returns the write-file tool.
func NewWriteFile() *WriteFile {
	return &WriteFile{spec: tools.Spec{
		Name: "write-file",
		Description: "Create a file in the workspace, or overwrite it, with the given content. " +
			"Missing parent directories are created. Prefer edit-file to change part of an existing file.",
		InputSchema: writeFileSchema,
		Kind:        tools.KindBuiltin,
		Action:      "fs.write",
		Effects:     []string{"fs.write"},
		Annotations: tools.Annotations{Destructive: true, Idempotent: true},
		Limits:      tools.Limits{Timeout: 30 * time.Second, MaxOutputBytes: writeMaxOutput},
	}}
}

// writeArtifact is what write-file runs.
type writeArtifact struct {
	target  wspath.Resolved
	content string
}

// Spec returns the published description.
func (t *WriteFile) Spec() *tools.Spec { return &t.spec }

// Prepare resolves the target, or its deepest existing ancestor when it
// does not exist yet.
func (t *WriteFile) Prepare(_ context.Context, env *tools.Env, args map[string]any) (tools.Plan, error) {
	root, err := workspaceRoot(env)
	if err != nil {
		return tools.Plan{}, err
	}
	p, err := requiredString(args, "path")
	if err != nil {
		return tools.Plan{}, err
	}
	content, err := requiredString(args, "content")
	if err != nil {
		return tools.Plan{}, err
	}
	r, err := resolvePath(root, p, wspath.MayBeMissing)
	if err != nil {
		return tools.Plan{}, err
	}
	if err := checkWritable(r); err != nil {
		return tools.Plan{}, err
	}
	return tools.Plan{
		Args:      copyArgs(args),
		Resources: []tools.Resource{wspath.AddLinks(tools.Resource{"type": "file", "path": r.Rel, "access": "write"}, r.Info)},
		Artifact:  writeArtifact{target: r, content: content},
	}, nil
}

// checkWritable refuses targets that are not (or would not be) a regular
// file.
func checkWritable(r wspath.Resolved) error {
	switch {
	case r.Info == nil:
		return nil
	case r.Info.IsDir():
		return &tools.ArgError{Pointer: "/path", Rule: "is a directory, not a file"}
	case !r.Info.Mode().IsRegular():
		return &tools.ArgError{Pointer: "/path", Rule: "is not a regular file"}
	}
	return nil
}

// Run writes the content to the prepared target.
func (t *WriteFile) Run(ctx context.Context, env *tools.Env, artifact any, lim tools.Limits) (tools.Result, error) {
	a, ok := artifact.(writeArtifact)
	if !ok {
		return tools.Result{}, fmt.Errorf("workspace: write-file: artifact of type %T", artifact)
	}
	root, err := workspaceRoot(env)
	if err != nil {
		return tools.Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return tools.Result{}, err
	}
	var f *os.File
	if a.target.Info != nil {
		// Open without O_TRUNC: nothing may change before the identity
		// check on the descriptor has passed.
		f, err = openPrepared(root, a.target, lim, os.O_WRONLY)
		if err == nil {
			// The link count again, right before the first change.
			if err = recheckLinks(f); err == nil {
				err = checkRoom(env, int64(len(a.content))-fileSize(f))
			}
			if err == nil {
				err = f.Truncate(0)
			}
		}
	} else if err = checkRoom(env, int64(len(a.content))); err == nil {
		f, err = createPrepared(root, a.target, lim, env.Workspace)
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		return tools.Result{}, err
	}
	defer remeasure(env)
	if _, err := f.WriteString(a.content); err != nil {
		f.Close()
		return tools.Result{}, quotaErr(fmt.Errorf("workspace: write: %w", err))
	}
	if err := f.Close(); err != nil {
		return tools.Result{}, quotaErr(fmt.Errorf("workspace: close: %w", err))
	}
	msg := "wrote " + strconv.Itoa(len(a.content)) + " bytes to " + a.target.Rel
	return tools.Result{
		Content: capString(msg, outputCap(lim, writeMaxOutput)),
		Data:    map[string]any{"bytes": len(a.content), "path": a.target.Rel},
		Bytes:   len(msg),
	}, nil
}

// createPrepared creates a file that did not exist at prepare time. It
// opens the prepared ancestor directory, checks its identity on the handle,
// creates the missing directories one by one below it, and creates the file
// with O_EXCL: anything that appeared meanwhile is a changed target, and
// nothing is followed or overwritten.
//
// What it creates belongs to the workspace's owner (ws.Owner), when set.
func createPrepared(root *os.Root, r wspath.Resolved, lim tools.Limits, ws *tools.Workspace) (*os.File, error) {
	excl, err := newExcluder(lim.ExcludePaths)
	if err != nil {
		return nil, err
	}
	if excl.covers(r.Rel) {
		return nil, &tools.ModelError{Message: "path is excluded by policy"}
	}
	dir, err := root.OpenRoot(r.Parent)
	if err != nil {
		return nil, openErr(root, r, err)
	}
	st, err := dir.Stat(".")
	if err != nil || !wspath.SameIdentity(r.ParentInfo, st) {
		dir.Close()
		return nil, errChanged("parent directory is not the prepared one")
	}
	for _, name := range r.Missing[:len(r.Missing)-1] {
		sub, err := mkdirChild(dir, name, ws)
		dir.Close()
		if err != nil {
			return nil, err
		}
		dir = sub
	}
	defer dir.Close()
	name := r.Missing[len(r.Missing)-1]
	f, err := dir.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, newFilePerm)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, errChanged("file appeared after prepare")
		}
		return nil, fmt.Errorf("workspace: create: %w", err)
	}
	if uid, gid, ok := ws.Owner(); ok {
		if err := f.Chown(uid, gid); err != nil {
			f.Close()
			return nil, fmt.Errorf("workspace: chown: %w", err)
		}
	}
	return f, nil
}

// mkdirChild creates directory name in dir and opens it. A directory of
// that name that appeared meanwhile (another call writing into the same
// new folder) is used as it is — policy decided the path, and two calls
// creating one folder is no conflict — but anything else there (a
// symlink, a file) or a directory swapped after the check is a changed
// target. Only what it created is given the workspace's owner.
func mkdirChild(dir *os.Root, name string, ws *tools.Workspace) (*os.Root, error) {
	created := true
	if err := dir.Mkdir(name, newDirPerm); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("workspace: mkdir: %w", err)
		}
		created = false
	}
	li, err := dir.Lstat(name)
	if err != nil {
		return nil, fmt.Errorf("workspace: lstat: %w", err)
	}
	if !li.IsDir() {
		if created {
			return nil, errChanged("created directory was replaced")
		}
		return nil, errChanged("something other than a directory appeared after prepare")
	}
	sub, err := dir.OpenRoot(name)
	if err != nil {
		return nil, fmt.Errorf("workspace: open directory: %w", err)
	}
	st, err := sub.Stat(".")
	if err != nil || !wspath.SameIdentity(li, st) {
		sub.Close()
		return nil, errChanged("created directory was replaced")
	}
	if uid, gid, ok := ws.Owner(); ok && created {
		if err := sub.Chown(".", uid, gid); err != nil {
			sub.Close()
			return nil, fmt.Errorf("workspace: chown: %w", err)
		}
	}
	return sub, nil
}

// fileSize is the size of the open file f (0 when it cannot be read).
func fileSize(f *os.File) int64 {
	fi, err := f.Stat()
	if err != nil {
		return 0
	}
	return fi.Size()
}
