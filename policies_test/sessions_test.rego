# Tests of the session-scoped tools: background processes and tasks.
package toolgate.sessions_test

import data.toolgate.authz
import data.toolgate.availability
import data.toolgate.fixtures_test.availability_input
import data.toolgate.fixtures_test.command
import data.toolgate.fixtures_test.process
import data.toolgate.fixtures_test.read
import data.toolgate.fixtures_test.request
import data.toolgate.fixtures_test.task
import data.toolgate.fixtures_test.task_list
import data.toolgate.fixtures_test.url

decide(tenant, roles, tool, resources) := d if {
	d := authz.decision with input as request(tenant, roles, tool, resources)
}

test_process_tools_judge_the_started_segments[note] if {
	some note, c in {
		"output of an allowed process": {
			"tool": "process-output", "r": process("sleep 30; echo done", [["sleep", "30"], ["echo", "done"]]),
			"allow": true,
		},
		"input to an allowed process": {
			"tool": "process-input", "r": process("python3 -i", [["python3", "-i"]]),
			"allow": true,
		},
		"stop of an allowed process": {
			"tool": "process-stop", "r": process("sleep 30", [["sleep", "30"]]),
			"allow": true,
		},
		"a process that was approved may be read without a second approval": {
			"tool": "process-output", "r": process("git push", [["git", "push"]]),
			"allow": true,
		},
		"a process with a forbidden segment is denied": {
			"tool": "process-output", "r": process("sleep 1; rm -rf x", [["sleep", "1"], ["rm", "-rf", "x"]]),
			"allow": false,
		},
		"a process no rule of the caller matches is denied": {
			"tool": "process-stop", "r": process("make", [["make"]]),
			"allow": false,
		},
		"a process without segments is denied": {
			"tool": "process-stop", "r": process("", []),
			"allow": false,
		},
	}
	d := decide("acme", ["developer"], c.tool, [c.r])
	d.allow == c.allow
	d.approval_required == false
}

test_process_denials[note] if {
	some note, c in {
		"forbidden": {"r": process("rm -rf x", [["rm", "-rf", "x"]]), "message": "command rm -rf x is forbidden"},
		"unmatched": {"r": process("make", [["make"]]), "message": "command make is not allowed for your roles"},
		"no segments": {"r": object.remove(process("make", []), ["segments"]), "message": "the command runs nothing this policy can check"},
		"malformed": {"r": process("make", [[1]]), "message": "a command segment is not a list of words"},
	}
	d := decide("acme", ["developer"], "process-input", [c.r])
	d.allow == false
	d.message == c.message
}

test_globex_processes[note] if {
	some note, c in {
		"an allowed process, although globex denies shell constructs": {"r": process("sleep 30", [["sleep", "30"]]), "reasons": ["allowed: developer may run sleep", "allowed: developer may use process-output"]},
		"a process globex's rules do not approve": {"r": process("git push", [["git", "push"]]), "reasons": ["command git push is not allowed for your roles"]},
	}
	decide("globex", ["developer"], "process-output", [c.r]).reasons == c.reasons
}

test_allowed_process_decision if {
	d := decide("acme", ["developer"], "process-output", [process("git push", [["git", "push"]])])
	d == {
		"allow": true,
		"approval_required": false,
		"reasons": ["allowed: developer may run git push after approval", "allowed: developer may use process-output"],
		"obligations": {"timeout_ms": 30000},
	}
}

test_process_tools_are_not_offered_to_viewers[note] if {
	some note, tool in {"output": "process-output", "input": "process-input", "stop": "process-stop"}
	d := decide("acme", ["viewer"], tool, [process("ls", [["ls"]])])
	d.allow == false
	sprintf("tool %s is not available to you", [tool]) in d.reasons
}

test_task_tools[note] if {
	some note, c in {
		"task-create": {"tool": "task-create", "r": task_list},
		"task-list": {"tool": "task-list", "r": task_list},
		"task-update": {"tool": "task-update", "r": task},
		"task-get": {"tool": "task-get", "r": task},
	}
	developer := decide("acme", ["developer"], c.tool, [c.r])
	developer == {
		"allow": true,
		"approval_required": false,
		"reasons": [sprintf("allowed: developer may use %s", [c.tool])],
		"obligations": {"timeout_ms": 30000},
	}
	viewer := decide("acme", ["viewer"], c.tool, [c.r])
	viewer.allow == false
	viewer.reasons == [sprintf("tool %s is not available to you", [c.tool])]
}

test_tools_carry_only_their_resource_type[note] if {
	some note, c in {
		"task-get with a task list": {"tool": "task-get", "r": task_list, "reasons": ["this policy only allows task resources"]},
		"task-create with a task": {"tool": "task-create", "r": task, "reasons": ["this policy only allows task_list resources"]},
		"process-stop with a task": {"tool": "process-stop", "r": task, "reasons": ["the call carries no process resource", "this policy only allows process resources"]},
	}
	d := decide("acme", ["developer"], c.tool, [c.r])
	d.allow == false
	d.reasons == c.reasons
}

test_file_tools_carry_only_file_resources if {
	d := decide("acme", ["developer"], "read-file", [task])
	d.reasons == ["this policy only allows file resources"]
}

# Without its resource nothing would judge a command, fetch or process call.
# A task call's resource only names the session, which the tool checks.
test_tools_must_carry_what_they_act_on[note] if {
	some note, c in {
		"bash": {"tool": "bash", "type": "command"},
		"fetch": {"tool": "fetch", "type": "url"},
		"process-output": {"tool": "process-output", "type": "process"},
		"process-input": {"tool": "process-input", "type": "process"},
		"process-stop": {"tool": "process-stop", "type": "process"},
	}
	d := decide("acme", ["developer"], c.tool, [])
	d.allow == false
	d.reasons == [sprintf("the call carries no %s resource", [c.type])]
}

# A tool this pack does not name (an upstream tool a "*" role is offered)
# may carry file resources only, so the rules of commands, processes and
# URLs can never be skipped by a tool they do not run for.
test_unnamed_tools_carry_only_file_resources[note] if {
	some note, c in {
		"a file": {"r": read("src/a.go"), "reasons": ["allowed: admin may read **", "allowed: admin may use deploy"]},
		"a command": {"r": command("rm -rf x", [["rm", "-rf", "x"]]), "reasons": ["this policy only allows file resources"]},
		"a process": {"r": process("ls", [["ls"]]), "reasons": ["this policy only allows file resources"]},
		"a url": {"r": url("docs.python.org", "public"), "reasons": ["this policy only allows file resources"]},
		"a task": {"r": task, "reasons": ["this policy only allows file resources"]},
		"a service": {"r": {"type": "service", "name": "billing"}, "reasons": ["this policy only allows file resources"]},
	}
	d := decide("initech", ["admin"], "deploy", [c.r]) with data.toolgate.tenants.initech as {"roles": {"admin": {
		"tools": ["*"],
		"read": ["**"],
		"commands": {"allow": [["rm"], ["ls"]]},
		"fetch": {"hosts": ["*.python.org"]},
	}}}
	d.reasons == c.reasons
}

test_issue3_tools_are_offered[note] if {
	some note, c in {
		"developer is offered bash": {"tenant": "acme", "roles": ["developer"], "tool": "bash", "want": true},
		"developer is offered fetch": {"tenant": "acme", "roles": ["developer"], "tool": "fetch", "want": true},
		"developer is offered process-output": {"tenant": "acme", "roles": ["developer"], "tool": "process-output", "want": true},
		"developer is offered task-list": {"tenant": "acme", "roles": ["developer"], "tool": "task-list", "want": true},
		"globex developer is offered bash": {"tenant": "globex", "roles": ["developer"], "tool": "bash", "want": true},
		"viewer is not offered bash": {"tenant": "acme", "roles": ["viewer"], "tool": "bash", "want": false},
		"viewer is not offered fetch": {"tenant": "acme", "roles": ["viewer"], "tool": "fetch", "want": false},
		"viewer is not offered process-stop": {"tenant": "acme", "roles": ["viewer"], "tool": "process-stop", "want": false},
		"viewer is not offered task-create": {"tenant": "acme", "roles": ["viewer"], "tool": "task-create", "want": false},
	}
	availability.allow == c.want with input as availability_input(c.tenant, c.roles, c.tool)
}
