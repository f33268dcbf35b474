package task

import (
	"context"
	"errors"
	"time"
)

// Status values of a task.
const (
	StatusPending    = "pending"
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"
)

// validStatus reports whether s is one of the three statuses.
func validStatus(s string) bool {
	return s == StatusPending || s == StatusInProgress || s == StatusCompleted
}

// Task is one stored task. Times are kept to the millisecond.
type Task struct {
	ID          string
	Subject     string
	Description string
	Status      string
	BlockedBy   []string // ids of tasks of the same session, in the order given
	Owner       string   // the principal that created it
	Created     time.Time
	Updated     time.Time
	// Version starts at 1 and grows by one with every update. Update takes
	// it as the version the change was prepared against.
	Version int64
}

// Clone returns t with its own BlockedBy slice.
func (t Task) Clone() Task {
	t.BlockedBy = append([]string{}, t.BlockedBy...)
	return t
}

// Store errors. Implementations return them (possibly wrapped) so that the
// tools can tell the model what happened without exposing internals.
var (
	// ErrNotFound: no such task in the (tenant, session), including a task
	// that exists in another one.
	ErrNotFound = errors.New("task: not found")
	// ErrConflict: the task's version is not the one the update expected.
	ErrConflict = errors.New("task: version conflict")
	// ErrLimit: the session already holds the maximum number of tasks.
	ErrLimit = errors.New("task: session task limit reached")
	// ErrExists: a task with this id already exists in the session.
	ErrExists = errors.New("task: id already exists")
	// ErrDependency: a blocked_by id is not a task of the session.
	ErrDependency = errors.New("task: dependency is not a task of the session")
	// ErrCycle: the dependencies would form a cycle.
	ErrCycle = errors.New("task: dependency cycle")
)

// Store persists tasks per (tenant, session). It is the consumer-side
// contract of the task tools; every implementation must pass
// tasktest.StoreSuite. No method may return, change or count a task of
// another (tenant, session): a foreign id behaves exactly like a missing
// one.
//
// The write checks must hold against concurrent writers in other processes
// too: the SQLite store (internal/store) gets that from SQLite's single
// write lock taken at BEGIN; the PostgreSQL store serializes the writes of
// one session with pg_advisory_xact_lock on the (tenant, session) pair,
// because row locks alone do not stop two creates from both seeing room
// for one more task.
type Store interface {
	// Create stores t with version 1 and returns it as stored. The checks
	// and the insert are one atomic step, also against other processes
	// sharing the database: ErrLimit when the session already holds max
	// tasks (max must be positive), ErrExists when t.ID is taken in the
	// session, ErrDependency when a BlockedBy id is not a task of the
	// session, ErrCycle when t blocks itself.
	Create(ctx context.Context, tenant, session string, t Task, max int) (Task, error)
	// Update replaces the subject, description, status, dependencies and
	// update time of task t.ID if its stored version is t.Version, and
	// returns the task as stored (version t.Version+1; owner and creation
	// time unchanged). ErrNotFound when there is no such task, ErrConflict
	// when the version differs, ErrDependency and ErrCycle as for Create,
	// judged against the session's tasks at commit time.
	Update(ctx context.Context, tenant, session string, t Task) (Task, error)
	// Get returns one task, or ErrNotFound.
	Get(ctx context.Context, tenant, session, id string) (Task, error)
	// List returns the session's tasks in creation order (an empty slice
	// when there are none).
	List(ctx context.Context, tenant, session string) ([]Task, error)
	// Count returns the number of tasks in the session.
	Count(ctx context.Context, tenant, session string) (int, error)
}
