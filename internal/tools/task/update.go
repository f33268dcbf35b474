package task

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/toolgate/toolgate/internal/tools"
)

type updateTool struct{ base }

// updateRequest is a normalized task-update request: nil fields stay.
type updateRequest struct {
	subject, description, status *string
	add, remove                  []string
}

// apply returns base with the request's changes.
func (r updateRequest) apply(base Task) Task {
	next := base.Clone()
	if r.subject != nil {
		next.Subject = *r.subject
	}
	if r.description != nil {
		next.Description = *r.description
	}
	if r.status != nil {
		next.Status = *r.status
	}
	next.BlockedBy = slices.DeleteFunc(next.BlockedBy, func(id string) bool { return slices.Contains(r.remove, id) })
	for _, id := range r.add {
		if !slices.Contains(next.BlockedBy, id) {
			next.BlockedBy = append(next.BlockedBy, id)
		}
	}
	return next
}

// updateArtifact is the request and the task as it was when prepared; Run
// writes only if the task is still at base.Version. deferred is a refusal
// Prepare found for a task of another principal (see Prepare): Run
// answers it, nothing is written.
type updateArtifact struct {
	scoped
	base     Task
	req      updateRequest
	deferred *tools.ArgError
}

// Prepare checks the change (before it looks the task up), that the task
// exists in the session, and that new dependencies are tasks of the task's
// owner and close no cycle. The task resource names the owner.
//
// What the last checks find depends on the task. For a task of another
// principal they must not answer before policy has decided, or the answer
// would tell the task from a missing one: they are deferred to Run, which
// answers them only if policy allowed the call.
func (t *updateTool) Prepare(ctx context.Context, env *tools.Env, args map[string]any) (tools.Plan, error) {
	tenant, session, err := scope(env)
	if err != nil {
		return tools.Plan{}, err
	}
	id, err := idArg(args, "task_id")
	if err != nil {
		return tools.Plan{}, err
	}
	req, err := t.readRequest(args)
	if err != nil {
		return tools.Plan{}, err
	}
	cur, err := t.store.Get(ctx, tenant, session, id)
	if errors.Is(err, ErrNotFound) {
		return tools.Plan{}, notFound("/task_id")
	}
	if err != nil {
		return tools.Plan{}, err
	}
	var deferred *tools.ArgError
	if err := t.checkChange(ctx, tenant, session, cur, req); err != nil {
		var ae *tools.ArgError
		if !errors.As(err, &ae) || cur.Owner == env.Principal {
			return tools.Plan{}, err
		}
		deferred = ae
	}

	out := copyArgs(args)
	if _, ok := args["add_blocked_by"]; ok {
		out["add_blocked_by"] = idsToArgs(req.add)
	}
	if _, ok := args["remove_blocked_by"]; ok {
		out["remove_blocked_by"] = idsToArgs(req.remove)
	}
	return tools.Plan{
		Args:      out,
		Resources: []tools.Resource{taskResource(session, cur)},
		Artifact:  updateArtifact{scoped: scoped{tenant, session}, base: cur, req: req, deferred: deferred},
	}, nil
}

// Concealed is the answer for an id that is not a task of the session.
func (t *updateTool) Concealed() *tools.ArgError { return notFound("/task_id") }

// checkChange checks what req does to cur against the session's tasks:
// the number of dependencies, and new ones (see checkDeps).
func (t *updateTool) checkChange(ctx context.Context, tenant, session string, cur Task, req updateRequest) error {
	next := req.apply(cur)
	if len(next.BlockedBy) > t.opts.MaxDependencies {
		return &tools.ArgError{Pointer: "/add_blocked_by",
			Rule: "a task may be blocked by at most " + strconv.Itoa(t.opts.MaxDependencies) + " tasks"}
	}
	if added := NewDeps(cur.BlockedBy, next.BlockedBy); len(added) > 0 {
		return t.checkDeps(ctx, tenant, session, cur, req.add, added)
	}
	return nil
}

// readRequest reads the optional changes; at least one must be given.
func (t *updateTool) readRequest(args map[string]any) (updateRequest, error) {
	var req updateRequest
	if s, ok, err := textArg(args, "subject", t.opts.MaxSubject, true); err != nil {
		return req, err
	} else if ok {
		req.subject = &s
	}
	if s, ok, err := textArg(args, "description", t.opts.MaxDescription, false); err != nil {
		return req, err
	} else if ok {
		req.description = &s
	}
	if s, ok, err := statusArg(args, "status"); err != nil {
		return req, err
	} else if ok {
		req.status = &s
	}
	var err error
	if req.add, _, err = idsArg(args, "add_blocked_by", t.opts.MaxDependencies); err != nil {
		return req, err
	}
	if req.remove, _, err = idsArg(args, "remove_blocked_by", t.opts.MaxDependencies); err != nil {
		return req, err
	}
	if req.subject == nil && req.description == nil && req.status == nil && len(req.add) == 0 && len(req.remove) == 0 {
		return req, &tools.ArgError{Pointer: "",
			Rule: "must change at least one of subject, description, status, add_blocked_by, remove_blocked_by"}
	}
	for i, id := range req.remove {
		if slices.Contains(req.add, id) {
			return req, &tools.ArgError{Pointer: "/remove_blocked_by/" + strconv.Itoa(i), Rule: "is also in add_blocked_by"}
		}
	}
	return req, nil
}

// checkDeps checks the dependencies a change adds against the session's
// tasks: each must be a task of the task's owner (a principal's tasks wait
// only for its own; any other id is not found), and none may lead back to
// the task.
func (t *updateTool) checkDeps(ctx context.Context, tenant, session string, cur Task, add, added []string) error {
	all, err := t.store.List(ctx, tenant, session)
	if err != nil {
		return err
	}
	edges := make(map[string][]string, len(all))
	owners := make(map[string]string, len(all))
	for _, x := range all {
		edges[x.ID] = x.BlockedBy
		owners[x.ID] = x.Owner
	}
	for i, d := range add {
		if owner, ok := owners[d]; !ok || owner != cur.Owner {
			return notFound("/add_blocked_by/" + strconv.Itoa(i))
		}
	}
	if CreatesCycle(edges, cur.ID, added) {
		return &tools.ArgError{Pointer: "/add_blocked_by", Rule: "cycle: the task would wait, directly or through others, for itself"}
	}
	return nil
}

// Run writes the change if the task is still as prepared.
func (t *updateTool) Run(ctx context.Context, env *tools.Env, artifact any, lim tools.Limits) (tools.Result, error) {
	a, ok := artifact.(updateArtifact)
	if !ok {
		return tools.Result{}, fmt.Errorf("task: task-update: artifact of type %T", artifact)
	}
	if err := a.runScope(env); err != nil {
		return tools.Result{}, err
	}
	if a.deferred != nil {
		// Policy allowed a change to another principal's task that
		// Prepare refused: the same feedback, now that it may be given.
		return tools.Result{}, &tools.ModelError{Message: "invalid arguments: " + a.deferred.Error()}
	}
	next := a.req.apply(a.base)
	next.Updated = t.nowMS()
	stored, err := t.store.Update(ctx, a.tenant, a.session, next)
	if isConcurrentChange(err) {
		return tools.Result{}, errConflict(err)
	}
	if err != nil {
		return tools.Result{}, fmt.Errorf("task: update: %w", err)
	}
	return renderTask(stored, lim)
}
