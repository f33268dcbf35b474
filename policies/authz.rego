# Authorization entrypoint: data.toolgate.authz.decision.
#
# Input: the full request document (tool, action, typed resources, args).
# A call is allowed when nothing in deny fires:
#   - the tool must be offered to the caller (the availability rule, checked
#     again in case a call did not come through the tool list);
#   - every file resource needs a role glob: read/list need "read", write
#     needs "write";
#   - protected paths are denied for everyone, even with "**";
#   - resources this pack does not understand are denied.
# Writes that match approval_write wait for a human. Broad reads (recursive or
# folder listings) carry the tenant's protected globs as exclude_paths, which
# the tool enforces while walking.
package toolgate.authz

import data.toolgate.lib

# Access kinds that need a "read" glob, and how messages name them.
read_verbs := {"read": "read", "list": "listing"}

allow := count(deny) == 0

decision := object.union(
	{
		"allow": allow,
		"approval_required": approval_required,
		"reasons": reasons,
		"obligations": obligations,
	},
	denial,
)

# denial carries the model-facing message of a denied call: its first reason.
default denial := {}

denial := {"message": sort(deny)[0]} if not allow

reasons := sort(deny) if not allow

reasons := sort(grants | approvals) if allow

default approval_required := false

approval_required if {
	allow
	count(approvals) > 0
}

obligations := object.union_n([{"timeout_ms": 30000}, output_cap, exclusions])

# Deny reasons are shown to the model: they name only the tool and the
# workspace-relative paths the request itself carries.

deny contains tool_denial if not lib.tool_offered

# tool_denial stays defined without a tool name, so the deny above cannot
# vanish with it.
default tool_denial := "this tool is not available to you"

tool_denial := sprintf("tool %s is not available to you", [input.tool.name]) if is_string(input.tool.name)

deny contains "this policy only allows file resources" if {
	some r in input.resources
	not r.type == "file"
}

# object.get, not r.path: a call on an undefined ref is undefined even
# under "not", which would let a resource without a path through.
deny contains "a file resource has no path" if {
	some r in files
	not is_string(object.get(r, "path", null))
}

deny contains "file access must be read, list or write" if {
	some r in files
	not object.get(r, "access", null) in {"read", "list", "write"}
}

deny contains sprintf("%s of %s is not allowed for your roles", [verb, r.path]) if {
	some r in targets
	verb := read_verbs[r.access]
	not readable(r)
}

deny contains sprintf("write to %s is not allowed for your roles", [r.path]) if {
	some r in targets
	r.access == "write"
	not writable(r)
}

deny contains sprintf("access to %s is not allowed: the path is protected", [r.path]) if {
	some r in targets
	lib.protected(r.path)
}

# files are the request's file resources; targets are those with a path, the
# only ones any glob is matched against.
files contains r if {
	some r in input.resources
	r.type == "file"
}

targets contains r if {
	some r in files
	is_string(r.path)
}

readable(r) if read_grants[r]

writable(r) if write_grants[r]

# read_grants and write_grants map each resource to the reasons that allow it:
# "allowed: ROLE may ACCESS GLOB".
read_grants[r] contains sprintf("allowed: %s may %s %s", [name, r.access, pattern]) if {
	some r in targets
	read_verbs[r.access]
	some name, role in lib.roles
	some pattern in role.read
	lib.path_matches(pattern, r.path)
}

write_grants[r] contains sprintf("allowed: %s may write %s", [name, pattern]) if {
	some r in targets
	r.access == "write"
	some name, role in lib.roles
	some pattern in role.write
	lib.path_matches(pattern, r.path)
}

grants contains sprintf("allowed: %s may use %s", [name, input.tool.name]) if {
	some name in lib.tool_grants
}

grants contains reason if {
	some resource_reasons in read_grants
	some reason in resource_reasons
}

grants contains reason if {
	some resource_reasons in write_grants
	some reason in resource_reasons
}

approvals contains sprintf("approval required: writes to %s need a human", [pattern]) if {
	some r in targets
	r.access == "write"
	some pattern in lib.tenant.approval_write
	lib.path_matches(pattern, r.path)
}

# output_cap applies the smallest max_output_bytes of the caller's roles.
default output_cap := {}

output_cap := {"max_output_bytes": min(caps)} if {
	caps := {n | some role in lib.roles; n := role.max_output_bytes}
	count(caps) > 0
}

# exclusions hand the tenant's protected globs to tools that walk folders
# (recursive reads and listings), so protected entries are skipped rather
# than the whole call denied.
default exclusions := {}

exclusions := {"exclude_paths": lib.tenant.protected} if {
	count(lib.tenant.protected) > 0
	some r in targets
	read_verbs[r.access]
	broad(r)
}

broad(r) if r.recursive == true

broad(r) if r.access == "list"
