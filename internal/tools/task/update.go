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
// writes only if the task is still at base.Version.
type updateArtifact struct {
	scoped
	base Task
	req  updateRequest
}

// Prepare checks that the task exists in the session, that the change is
// one, and that new dependencies exist and close no cycle.
func (t *updateTool) Prepare(ctx context.Context, env *tools.Env, args map[string]any) (tools.Plan, error) {
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
	}
	if err != nil {
		return tools.Plan{}, err
	}
	req, err := t.readRequest(args)
	if err != nil {
		return tools.Plan{}, err
	}
	next := req.apply(cur)
	if len(next.BlockedBy) > t.opts.MaxDependencies {
		return tools.Plan{}, &tools.ArgError{Pointer: "/add_blocked_by",
			Rule: "a task may be blocked by at most " + strconv.Itoa(t.opts.MaxDependencies) + " tasks"}
	}
	if added := NewDeps(cur.BlockedBy, next.BlockedBy); len(added) > 0 {
		if err := t.checkDeps(ctx, tenant, session, id, req.add, added); err != nil {
			return tools.Plan{}, err
		}
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
		Resources: []tools.Resource{{"type": "task", "id": id, "session": session}},
		Artifact:  updateArtifact{scoped: scoped{tenant, session}, base: cur, req: req},
	}, nil
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
// tasks: each must exist, and none may lead back to the task.
func (t *updateTool) checkDeps(ctx context.Context, tenant, session, id string, add, added []string) error {
	all, err := t.store.List(ctx, tenant, session)
	if err != nil {
		return err
	}
	edges := make(map[string][]string, len(all))
	for _, x := range all {
		edges[x.ID] = x.BlockedBy
	}
	for i, d := range add {
		if _, ok := edges[d]; !ok {
			return notFound("/add_blocked_by/" + strconv.Itoa(i))
		}
	}
	if CreatesCycle(edges, id, added) {
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
