package tools

import (
	"fmt"
	"os"
)

// Registry is the ordered set of tools a gateway offers. It is built once
// at start and read concurrently afterwards.
type Registry struct {
	order  []Tool
	byName map[string]Tool
}

// NewRegistry returns a registry of tools in declaration order. Names must
// be valid and unique.
func NewRegistry(ts ...Tool) (*Registry, error) {
	r := &Registry{byName: make(map[string]Tool, len(ts))}
	for _, t := range ts {
		if err := r.Add(t); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Add appends a tool. It is not safe to call once the registry is shared.
func (r *Registry) Add(t Tool) error {
	name := t.Spec().Name
	if !ValidName(name) {
		return fmt.Errorf("tool name %q: must be %s", name, NameRule)
	}
	if _, dup := r.byName[name]; dup {
		return fmt.Errorf("tool %q declared twice", name)
	}
	r.order = append(r.order, t)
	r.byName[name] = t
	return nil
}

// Lookup returns the tool named name.
func (r *Registry) Lookup(name string) (Tool, bool) {
	t, ok := r.byName[name]
	return t, ok
}

// All returns the tools in declaration order. The slice must not be modified.
func (r *Registry) All() []Tool { return r.order }

// Workspace is a tenant's confined folder, opened once at start.
type Workspace struct {
	root  *os.Root
	dir   string
	quota Quota // nil: none
	// owner, when set, is who every file and folder the tools create
	// belongs to: the command jail's user, so that nothing in the
	// workspace is root's (see SetOwner).
	owner    [2]int
	hasOwner bool
}

// SetOwner makes uid:gid the owner of what the tools create from now on.
// The gateway sets it to the command jail's user before serving.
func (w *Workspace) SetOwner(uid, gid int) { w.owner, w.hasOwner = [2]int{uid, gid}, true }

// Owner returns the owner set by SetOwner.
func (w *Workspace) Owner() (uid, gid int, ok bool) { return w.owner[0], w.owner[1], w.hasOwner }

// OpenWorkspace opens dir as a workspace root. dir must be an existing
// directory.
func OpenWorkspace(dir string) (*Workspace, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &Workspace{root: root, dir: dir}, nil
}

// Root is the os.Root every file operation of the tenant goes through.
func (w *Workspace) Root() *os.Root { return w.root }

// Dir is the host path of the workspace. It must never reach a response.
func (w *Workspace) Dir() string { return w.dir }

// Close releases the root.
func (w *Workspace) Close() error { return w.root.Close() }
