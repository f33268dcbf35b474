# Tests of owners: only the principal that started a process or created a
# task, or a supervisor, may touch it; anyone else is denied as if it did
# not exist (conceal).
package toolgate.owners_test

import data.toolgate.authz
import data.toolgate.availability
import data.toolgate.fixtures_test.availability_input
import data.toolgate.fixtures_test.owned_by
import data.toolgate.fixtures_test.process
import data.toolgate.fixtures_test.request
import data.toolgate.fixtures_test.task
import data.toolgate.fixtures_test.task_list

decide(roles, tool, resources) := d if {
	d := authz.decision with input as request("acme", roles, tool, resources)
}

sleep := process("sleep 30", [["sleep", "30"]])

# The resources of the owned tools, each as alice (the caller) owns it.
owned := {
	"process-output": sleep,
	"process-input": sleep,
	"process-stop": sleep,
	"task-get": task,
	"task-update": task,
}

test_the_owner_may_touch_its_processes_and_tasks[tool] if {
	some tool, r in owned
	d := decide(["developer"], tool, [r])
	d.allow == true
	not d.conceal
}

test_another_principal_is_denied_as_if_it_did_not_exist[tool] if {
	some tool, r in owned
	d := decide(["developer"], tool, [owned_by(r, "bob")])
	d.allow == false
	d.conceal == true
	d.reasons == [sprintf("%s %s belongs to another principal", [r.type, r.id])]
}

test_concealed_denial_decision if {
	d := decide(["developer"], "process-stop", [owned_by(sleep, "bob")])
	d == {
		"allow": false,
		"approval_required": false,
		"conceal": true,
		"message": "process proc_ABCDEFGHIJKLMNOP belongs to another principal",
		"reasons": ["process proc_ABCDEFGHIJKLMNOP belongs to another principal"],
		"obligations": {"timeout_ms": 30000},
	}
}

test_a_supervisor_may_touch_other_principals_processes_and_tasks[tool] if {
	some tool, r in owned
	d := decide(["developer", "supervisor"], tool, [owned_by(r, "bob")])
	d.allow == true
	not d.conceal
	sprintf("allowed: supervisor may use %s", [tool]) in d.reasons
}

# supervise widens whose processes a caller may touch, not which commands:
# a process is judged by the command rules of the caller's roles.
test_a_supervisor_is_still_bound_by_command_rules if {
	d := decide(["supervisor"], "process-output", [owned_by(sleep, "bob")])
	d.allow == false
	not d.conceal
	d.reasons == ["command sleep 30 is not allowed for your roles"]
}

# Fail closed: a resource that names no owner is nobody's to touch, and
# nothing tells it apart from a missing id.
test_a_resource_without_owner_is_denied_for_everyone[note] if {
	some note, c in {
		"developer, process": {"roles": ["developer"], "tool": "process-input", "r": object.remove(sleep, ["owner"])},
		"supervisor, process": {"roles": ["developer", "supervisor"], "tool": "process-input", "r": object.remove(sleep, ["owner"])},
		"supervisor, task": {"roles": ["developer", "supervisor"], "tool": "task-get", "r": object.remove(task, ["owner"])},
		"owner not a string": {"roles": ["developer", "supervisor"], "tool": "task-update", "r": owned_by(task, 7)},
	}
	d := decide(c.roles, c.tool, [c.r])
	d.allow == false
	d.conceal == true
	d.reasons == [sprintf("a %s resource names no owner", [c.r.type])]
}

test_a_resource_without_id_is_named_so if {
	d := decide(["developer"], "task-get", [object.remove(owned_by(task, "bob"), ["id"])])
	d.reasons == ["task without an id belongs to another principal"]
}

test_task_lists[note] if {
	some note, c in {
		"own tasks": {"roles": ["developer"], "r": task_list, "allow": true},
		"another principal's, developer": {"roles": ["developer"], "r": owned_by(task_list, "bob"), "reasons": ["the tasks of another principal are not yours to list"]},
		"another principal's, supervisor": {"roles": ["developer", "supervisor"], "r": owned_by(task_list, "bob"), "allow": true},
		"every principal's, developer": {"roles": ["developer"], "r": all_owners, "reasons": ["the tasks of every principal are not yours to list"]},
		"every principal's, supervisor": {"roles": ["developer", "supervisor"], "r": all_owners, "allow": true},
		"nobody's": {"roles": ["developer", "supervisor"], "r": object.remove(task_list, ["owner"]), "reasons": ["a task_list resource names no owner"]},
		"all_owners not true": {"roles": ["developer", "supervisor"], "r": object.union(object.remove(task_list, ["owner"]), {"all_owners": "yes"}), "reasons": ["a task_list resource names no owner"]},
	}
	d := decide(c.roles, "task-list", [c.r])
	d.allow == object.get(c, "allow", false)
	object.get(c, "reasons", d.reasons) == d.reasons

	# Listing is denied plainly: the denial is the same whether the other
	# principal has tasks or not, so there is nothing to conceal.
	not d.conceal
}

all_owners := {"type": "task_list", "session": "s-1", "all_owners": true}

test_task_create_adds_to_the_callers_own_list if {
	decide(["developer"], "task-create", [task_list]).allow == true
	decide(["developer"], "task-create", [owned_by(task_list, "bob")]).reasons == ["the tasks of another principal are not yours to list"]
}

test_the_supervisor_role_is_offered_only_its_tools[note] if {
	some note, c in {
		"process-output": {"tool": "process-output", "want": true},
		"task-list": {"tool": "task-list", "want": true},
		"not bash": {"tool": "bash", "want": false},
		"not task-create": {"tool": "task-create", "want": false},
	}
	availability.allow == c.want with input as availability_input("acme", ["supervisor"], c.tool)
}
