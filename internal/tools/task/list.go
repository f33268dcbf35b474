package task

import (
	"context"
	"fmt"

	"github.com/toolgate/toolgate/internal/tools"
)

type listTool struct{ base }

// listArtifact is the normalized task-list request; status "" means all.
type listArtifact struct {
	scoped
	status string
}

// Prepare checks the filter.
func (t *listTool) Prepare(_ context.Context, env *tools.Env, args map[string]any) (tools.Plan, error) {
	tenant, session, err := scope(env)
	if err != nil {
		return tools.Plan{}, err
	}
	status, _, err := statusArg(args, "status")
	if err != nil {
		return tools.Plan{}, err
	}
	return tools.Plan{
		Args:      copyArgs(args),
		Resources: []tools.Resource{{"type": "task_list", "session": session}},
		Artifact:  listArtifact{scoped: scoped{tenant, session}, status: status},
	}, nil
}

// Run lists the session's tasks in creation order.
func (t *listTool) Run(ctx context.Context, env *tools.Env, artifact any, lim tools.Limits) (tools.Result, error) {
	a, ok := artifact.(listArtifact)
	if !ok {
		return tools.Result{}, fmt.Errorf("task: task-list: artifact of type %T", artifact)
	}
	if err := a.runScope(env); err != nil {
		return tools.Result{}, err
	}
	all, err := t.store.List(ctx, a.tenant, a.session)
	if err != nil {
		return tools.Result{}, fmt.Errorf("task: list: %w", err)
	}
	if a.status != "" {
		kept := make([]Task, 0, len(all))
		for _, x := range all {
			if x.Status == a.status {
				kept = append(kept, x)
			}
		}
		all = kept
	}
	return renderList(all, lim)
}
