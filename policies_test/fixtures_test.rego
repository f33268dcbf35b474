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

# command is the resource bash produces for a plain command: segments are
# the argv of each simple command.
command(text, segments) := {
	"type": "command",
	"command": text,
	"segments": segments,
	"plain": true,
	"constructs": [],
	"cwd": ".",
	"background": false,
}

# argument is the file resource bash adds for a literal argument inside the
# workspace; outside one that leaves it (absolute, or climbing out).
argument(path) := {"type": "file", "path": path, "access": "command"}

outside(path) := {"type": "file", "path": path, "access": "command", "outside": true}

# shell_command is a command with shell constructs: not plain, and its
# non-literal words appear in segments as their source text.
shell_command(text, segments, constructs) := object.union(command(text, segments), {"plain": false, "constructs": constructs})

# process is the resource of process-output, -input and -stop: the process,
# the principal that started it (the caller, alice, of request) and the
# segments it was started with.
process(text, segments) := {"type": "process", "id": "proc_ABCDEFGHIJKLMNOP", "owner": "alice", "command": text, "segments": segments}

# task is the resource of task-get and task-update: a task alice created.
task := {"type": "task", "id": "task_abcdefghijkl", "session": "s-1", "owner": "alice"}

# task_list is the resource of task-create and task-list: alice's tasks.
task_list := {"type": "task_list", "session": "s-1", "owner": "alice"}

# owned_by(r, owner) is a process or task resource of another owner.
owned_by(r, owner) := object.union(r, {"owner": owner})

# addresses are sample addresses of each class (192.0.2.1 for a class the
# pack does not know).
addresses := {
	"public": "93.184.216.34",
	"private": "10.0.0.5",
	"loopback": "127.0.0.1",
	"link_local": "169.254.1.1",
	"metadata": "169.254.169.254",
	"unspecified": "0.0.0.0",
	"multicast": "224.0.0.1",
	"reserved": "240.0.0.1",
}

# url is the resource fetch produces for GET https://HOST/ when HOST
# resolves to one address of class.
url(host, class) := {
	"type": "url",
	"url": sprintf("https://%s/", [host]),
	"scheme": "https",
	"host": host,
	"port": 443,
	"path": "/",
	"method": "GET",
	"addresses": [{"ip": object.get(addresses, class, "192.0.2.1"), "class": class}],
	"address_class": class,
}
