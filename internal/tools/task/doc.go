// Package task implements the session task list shared by the built-in
// tools task-create, task-update, task-get and task-list.
//
// Tasks belong to one (tenant, session). Every Store method takes both and
// never returns, changes or counts a task of another pair: a foreign id is
// indistinguishable from a missing one, in result and in cost (one lookup by
// primary key either way).
//
// Limits live in two places on purpose. String lengths and list sizes are in
// the published JSON Schemas, so the gateway's strict validator rejects an
// oversize argument before any tool code runs (Prepare re-checks them for
// callers that bypass the validator). What depends on stored state is
// enforced by the Store inside the write transaction, so concurrent calls and
// other replicas sharing the database cannot overshoot it: the number of
// tasks per session, the existence of every dependency, the absence of
// dependency cycles, and the version an update was prepared against.
//
// Prepare reads the store to check ids and dependencies and to capture the
// version of the task it will change; Run writes only if that version is
// still current, and otherwise reports a conflict to the model.
//
// Every task has an owner, the principal that created it. The tools do not
// judge who may touch whose task: the resources name the owner (task) or
// whose tasks a call touches (task_list), and policy decides. A denial of
// task-get or task-update may be concealed (tools.Concealer): the caller
// then gets the answer of a missing id. So that nothing else tells another
// principal's task from a missing one, Prepare checks the arguments before
// it looks a task up, and defers what it finds about another principal's
// task to Run. A principal's tasks wait only for its own: a dependency on
// another principal's task is not found.
package task
