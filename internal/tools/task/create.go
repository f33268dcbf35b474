package task

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/toolgate/toolgate/internal/tools"
)

// idAttempts bounds the redraws of an id that is already taken (60 random
// bits: a redraw is practically never needed).
const idAttempts = 3

type createTool struct{ base }

// createArtifact is the normalized task-create request.
type createArtifact struct {
	scoped
	subject, description string
	blockedBy            []string
}

// Prepare checks the fields and that every dependency is a task of the
// caller in the session: a principal's tasks wait only for its own, so a
// task of another principal is not found, exactly like a missing id. The
// id is drawn at Run: policy sees the task list (the caller's: owner), not
// the id.
func (t *createTool) Prepare(ctx context.Context, env *tools.Env, args map[string]any) (tools.Plan, error) {
	tenant, session, err := scope(env)
	if err != nil {
		return tools.Plan{}, err
	}
	subject, ok, err := textArg(args, "subject", t.opts.MaxSubject, true)
	if err != nil {
		return tools.Plan{}, err
	}
	if !ok {
		return tools.Plan{}, &tools.ArgError{Pointer: "/subject", Rule: "is required"}
	}
	description, _, err := textArg(args, "description", t.opts.MaxDescription, false)
	if err != nil {
		return tools.Plan{}, err
	}
	deps, _, err := idsArg(args, "blocked_by", t.opts.MaxDependencies)
	if err != nil {
		return tools.Plan{}, err
	}
	for i, d := range deps {
		dep, err := t.store.Get(ctx, tenant, session, d)
		if errors.Is(err, ErrNotFound) || err == nil && dep.Owner != env.Principal {
			return tools.Plan{}, notFound("/blocked_by/" + strconv.Itoa(i))
		} else if err != nil {
			return tools.Plan{}, err
		}
	}
	out := copyArgs(args)
	out["description"] = description
	out["blocked_by"] = idsToArgs(deps)
	return tools.Plan{
		Args:      out,
		Resources: []tools.Resource{{"type": "task_list", "session": session, "owner": env.Principal}},
		Artifact: createArtifact{
			scoped:  scoped{tenant, session},
			subject: subject, description: description, blockedBy: deps,
		},
	}, nil
}

// Run stores the task, unless the session is full.
func (t *createTool) Run(ctx context.Context, env *tools.Env, artifact any, lim tools.Limits) (tools.Result, error) {
	a, ok := artifact.(createArtifact)
	if !ok {
		return tools.Result{}, fmt.Errorf("task: task-create: artifact of type %T", artifact)
	}
	if err := a.runScope(env); err != nil {
		return tools.Result{}, err
	}
	now := t.nowMS()
	for range idAttempts {
		id := t.opts.NewID()
		if !ValidID(id) {
			return tools.Result{}, errors.New("task: NewID returned an id of the wrong form")
		}
		stored, err := t.store.Create(ctx, a.tenant, a.session, Task{
			ID: id, Subject: a.subject, Description: a.description, Status: StatusPending,
			BlockedBy: a.blockedBy, Owner: env.Principal, Created: now, Updated: now,
		}, t.opts.MaxTasks)
		switch {
		case err == nil:
			return renderTask(stored, lim)
		case errors.Is(err, ErrExists):
			continue
		case errors.Is(err, ErrLimit):
			return tools.Result{}, &tools.ModelError{
				Message: "limit_exceeded: a session may hold at most " + strconv.Itoa(t.opts.MaxTasks) + " tasks"}
		case isConcurrentChange(err):
			return tools.Result{}, errConflict(err)
		default:
			return tools.Result{}, fmt.Errorf("task: create: %w", err)
		}
	}
	return tools.Result{}, errors.New("task: create: no unused id after redraws")
}
