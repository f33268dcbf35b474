# Input documents for the pack's tests, shaped like the gateway's.
package toolgate.fixtures_test

# availability_input is the availability input: no arguments, no resources.
availability_input(tenant, roles, tool) := {
	"tenant": tenant,
	"principal": {"id": "alice", "roles": roles, "groups": [], "claims": {}},
	"client": {"id": "platform-a"},
	"session_id": "s-1",
	"tool": {
		"name": tool,
		"kind": "builtin",
		"effects": [],
		"annotations": {"read_only": false, "destructive": false, "idempotent": false, "open_world": false},
	},
}

# request is the authorization input: the full request document.
request(tenant, roles, tool, resources) := object.union(availability_input(tenant, roles, tool), {
	"version": 1,
	"call_id": "c-1",
	"action": "fs.read",
	"resources": resources,
	"args": {},
	"digest": "sha256:0000",
})

read(path) := {"type": "file", "path": path, "access": "read"}

# walk is a recursive read: grep over a folder.
walk(path) := {"type": "file", "path": path, "access": "read", "recursive": true}

listing(path) := {"type": "file", "path": path, "access": "list"}

write(path) := {"type": "file", "path": path, "access": "write"}
