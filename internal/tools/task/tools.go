package task

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/toolgate/toolgate/internal/tools"
)

// toolTimeout bounds a whole task call; the store waits at most its busy
// timeout for the write lock.
const toolTimeout = 10 * time.Second

// Tools returns the task tools in their published order: task-create,
// task-update, task-get, task-list. They share store, which holds one task
// list per (tenant, session); each task has an owner, the principal that
// created it, which the resources show to policy.
func Tools(store Store, opts Options) []tools.Tool {
	o := opts.withDefaults()
	b := func(name, action, description, schema string, ann tools.Annotations) base {
		return base{store: store, opts: o, spec: tools.Spec{
			Name:        name,
			Description: description,
			InputSchema: schemaFor(schema, o),
			Kind:        tools.KindBuiltin,
			Action:      action,
			Effects:     []string{action},
			Annotations: ann,
			Limits:      tools.Limits{Timeout: toolTimeout, MaxOutputBytes: maxOutput},
		}}
	}
	max := strconv.Itoa(o.MaxTasks)
	return []tools.Tool{
		&createTool{b("task-create", "task.create",
			"Add a task of yours to this session's task list (at most "+max+" tasks per session). Use it to plan "+
				"multi-step work: one task per step, with blocked_by naming your tasks that must be completed "+
				"first. New tasks are pending. Returns the task as JSON, including its id.",
			createSchemaTmpl, tools.Annotations{})},
		&updateTool{b("task-update", "task.update",
			"Change a task of this session: its subject, description or status (pending, in_progress, "+
				"completed), or the tasks it waits for (add_blocked_by, remove_blocked_by). Give at least one "+
				"change. Returns the updated task as JSON.",
			updateSchemaTmpl, tools.Annotations{Idempotent: true})},
		&getTool{b("task-get", "task.read",
			"Read one task of this session, with its full description, as JSON.",
			getSchemaTmpl, tools.Annotations{ReadOnly: true, Idempotent: true})},
		&listTool{b("task-list", "task.list",
			`List your tasks of this session in creation order as JSON {"tasks":[...]}, optionally only those `+
				"with one status, or another principal's (owner) where policy allows it. A long list leaves out "+
				"descriptions; read them with task-get.",
			listSchemaTmpl, tools.Annotations{ReadOnly: true, Idempotent: true})},
	}
}

// base is what the four tools share.
type base struct {
	spec  tools.Spec
	store Store
	opts  Options
}

// Spec returns the published description.
func (b *base) Spec() *tools.Spec { return &b.spec }

// scoped is the (tenant, session) an artifact was prepared for.
type scoped struct{ tenant, session string }

// runScope checks that Run is called for the session Prepare saw.
func (s scoped) runScope(env *tools.Env) error {
	tenant, session, err := scope(env)
	if err != nil {
		return err
	}
	if tenant != s.tenant || session != s.session {
		return fmt.Errorf("task: run in another session than prepared: %w", tools.ErrTargetChanged)
	}
	return nil
}

// conflictMessage is what the model reads when the session's tasks changed
// between prepare and run in a way that makes the prepared write invalid.
const conflictMessage = "conflict: the task changed; read it again"

// errConflict is shown to the model as conflictMessage and, for audit, is a
// tools.ErrTargetChanged.
func errConflict(cause error) error {
	return fmt.Errorf("task: %w: %w (%w)", &tools.ModelError{Message: conflictMessage}, tools.ErrTargetChanged, cause)
}

// isConcurrentChange reports whether a store error means another write got
// in between prepare and run.
func isConcurrentChange(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrConflict) ||
		errors.Is(err, ErrDependency) || errors.Is(err, ErrCycle)
}

// nowMS is the clock read at the stored precision.
func (b *base) nowMS() time.Time {
	return time.UnixMilli(b.opts.Now().UnixMilli()).UTC()
}

// Compile-time checks that every tool implements tools.Tool.
var (
	_ tools.Tool = (*createTool)(nil)
	_ tools.Tool = (*updateTool)(nil)
	_ tools.Tool = (*getTool)(nil)
	_ tools.Tool = (*listTool)(nil)
)
