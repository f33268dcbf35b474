package task

import (
	"context"
	"fmt"

	"github.com/toolgate/toolgate/internal/tools"
)

type listTool struct{ base }

// listArtifact is the normalized task-list request; status "" means all
// statuses, all every principal's tasks (else only owner's).
type listArtifact struct {
	scoped
	status string
	owner  string
	all    bool
}

// Prepare checks the filters. The task_list resource says whose tasks the
// call would show: "owner" (the caller's id by default), or, for owner
// "*", no owner and "all_owners": true; policy decides on it.
func (t *listTool) Prepare(_ context.Context, env *tools.Env, args map[string]any) (tools.Plan, error) {
	tenant, session, err := scope(env)
	if err != nil {
		return tools.Plan{}, err
	}
	status, _, err := statusArg(args, "status")
	if err != nil {
		return tools.Plan{}, err
	}
	owner, err := ownerArg(args, env.Principal)
	if err != nil {
		return tools.Plan{}, err
	}
	_, named := args["owner"]
	all := named && owner == allOwners
	res := tools.Resource{"type": "task_list", "session": session, "owner": owner}
	if all {
		// No owner member: a rule matching "owner" against the caller's
		// id cannot mistake "every principal" for a principal named "*".
		res = tools.Resource{"type": "task_list", "session": session, "all_owners": true}
	}
	out := copyArgs(args)
	out["owner"] = owner
	return tools.Plan{
		Args:      out,
		Resources: []tools.Resource{res},
		Artifact:  listArtifact{scoped: scoped{tenant, session}, status: status, owner: owner, all: all},
	}, nil
}

// Run lists the session's tasks of the prepared owner (or of every
// principal) in creation order.
func (t *listTool) Run(ctx context.Context, env *tools.Env, artifact any, lim tools.Limits) (tools.Result, error) {
	a, ok := artifact.(listArtifact)
	if !ok {
		return tools.Result{}, fmt.Errorf("task: task-list: artifact of type %T", artifact)
	}
	if err := a.runScope(env); err != nil {
		return tools.Result{}, err
	}
	ts, err := t.store.List(ctx, a.tenant, a.session)
	if err != nil {
		return tools.Result{}, fmt.Errorf("task: list: %w", err)
	}
	kept := make([]Task, 0, len(ts))
	for _, x := range ts {
		if (a.all || x.Owner == a.owner) && (a.status == "" || x.Status == a.status) {
			kept = append(kept, x)
		}
	}
	return renderList(kept, lim)
}
