package task

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/internal/tools"
)

type getTool struct{ base }

// getArtifact names the task to read.
type getArtifact struct {
	scoped
	id string
}

// Prepare checks that the task exists in the session. The task resource
// names its owner; policy decides whether the caller may read it.
func (t *getTool) Prepare(ctx context.Context, env *tools.Env, args map[string]any) (tools.Plan, error) {
	tenant, session, err := scope(env)
	if err != nil {
		return tools.Plan{}, err
	}
	id, err := idArg(args, "task_id")
	if err != nil {
		return tools.Plan{}, err
	}
	cur, err := t.store.Get(ctx, tenant, session, id)
	if errors.Is(err, ErrNotFound) {
		return tools.Plan{}, notFound("/task_id")
	} else if err != nil {
		return tools.Plan{}, err
	}
	return tools.Plan{
		Args:      copyArgs(args),
		Resources: []tools.Resource{taskResource(session, cur)},
		Artifact:  getArtifact{scoped: scoped{tenant, session}, id: id},
	}, nil
}

// Concealed is the answer for an id that is not a task of the session.
func (t *getTool) Concealed() *tools.ArgError { return notFound("/task_id") }

// taskResource is the task resource of task-get and task-update.
func taskResource(session string, cur Task) tools.Resource {
	return tools.Resource{"type": "task", "id": cur.ID, "session": session, "owner": cur.Owner}
}

// Run reads the task as it is now.
func (t *getTool) Run(ctx context.Context, env *tools.Env, artifact any, lim tools.Limits) (tools.Result, error) {
	a, ok := artifact.(getArtifact)
	if !ok {
		return tools.Result{}, fmt.Errorf("task: task-get: artifact of type %T", artifact)
	}
	if err := a.runScope(env); err != nil {
		return tools.Result{}, err
	}
	cur, err := t.store.Get(ctx, a.tenant, a.session, a.id)
	if isConcurrentChange(err) {
		return tools.Result{}, errConflict(err)
	}
	if err != nil {
		return tools.Result{}, fmt.Errorf("task: get: %w", err)
	}
	return renderTask(cur, lim)
}
