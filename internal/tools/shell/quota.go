package shell

import (
	"context"
	"maps"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/tools"
)

// quotaWait bounds how long a command's result waits for the measurement
// of its workspace that follows it; a slower one only reaches the next
// call.
const quotaWait = 2 * time.Second

// quotaConfine shapes the jail of j by its workspace's quota where the
// gateway, not the kernel, keeps the workspace to it: a full workspace is
// read-only (no write paths), else no file may grow past the room left
// (the jail's file-size limit). It reports whether the command runs
// read-only.
func quotaConfine(env *tools.Env, j *job) (readOnly bool) {
	q := env.Workspace.Quota()
	if q == nil || q.Hard() {
		return false
	}
	if room := q.Room(); room > 0 {
		j.conf.FileSizeBytes = room
		return false
	}
	j.conf.Limits.WritePaths = []string{}
	return true
}

// quotaAfter has the workspace measured once a foreground command ended
// and, when the command ran read-only or the workspace is full now, says
// so in its result, on the line before the exit code.
func quotaAfter(ctx context.Context, env *tools.Env, readOnly bool, res tools.Result, err error) (tools.Result, error) {
	q := env.Workspace.Quota()
	if q == nil {
		return res, err
	}
	ticket := q.Changed()
	if err != nil {
		return res, err
	}
	wctx, cancel := context.WithTimeout(ctx, quotaWait)
	_ = q.Measured(wctx, ticket) // late: the last measurement decides
	cancel()
	if !readOnly && !q.Full() {
		return res, nil
	}
	if i := strings.LastIndex(res.Content, "[exit code: "); i >= 0 {
		res.Content = res.Content[:i] + tools.WorkspaceFullNote + "\n" + res.Content[i:]
	} else {
		res.Content += "\n" + tools.WorkspaceFullNote
	}
	res.Data = withFull(res.Data)
	return res, nil
}

// quotaStarted notes a background command started read-only in its
// result, and has the workspace measured again when the command ends.
func quotaStarted(env *tools.Env, j *job, readOnly bool, res tools.Result) tools.Result {
	q := env.Workspace.Quota()
	if q == nil {
		return res
	}
	if done := j.run.Done(); done != nil {
		go func() {
			<-done
			q.Changed()
		}()
	}
	return startedNote(readOnly, res)
}

// startedNote adds the note to the result of a background start that
// runs read-only.
func startedNote(readOnly bool, res tools.Result) tools.Result {
	if readOnly {
		res.Content += "\n" + tools.WorkspaceFullNote
		res.Data = withFull(res.Data)
	}
	return res
}

func withFull(data map[string]any) map[string]any {
	out := maps.Clone(data)
	if out == nil {
		out = map[string]any{}
	}
	out["workspace_full"] = true
	return out
}
