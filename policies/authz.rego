# Authorization entrypoint: data.toolgate.authz.decision.
#
# Input: the full request document (tool, action, typed resources, args).
# A call is allowed when nothing in deny fires:
#   - the tool must be offered to the caller (the availability rule, checked
#     again in case a call did not come through the tool list);
#   - every resource must be of a type its tool produces (file for the
#     file tools and for tools this pack does not name), and bash, fetch
#     and the process tools must carry the resource they act on;
#   - file resources: read/list (and bash's literal arguments, access
#     "command", and its working folder, access "list") need a "read" glob,
#     write (write-file, edit-file, and the paths bash's programs are known
#     to write) needs a "write" glob, protected paths are denied for
#     everyone, even with "**"; files with more than one hard link are
#     denied; arguments outside the workspace are denied;
#   - command and process resources: every simple command (segment) needs a
#     matching command rule of the caller's roles, and none may be forbidden;
#   - url resources: never a metadata address, a non-public address only for
#     the tenant's allow_private_hosts, http only with allow_http, and the
#     host must match a fetch glob of the caller's roles;
#   - upstream tools (tool.kind "upstream", and "mcp" for MCP upstreams) may
#     carry service resources only, each with an id listed in the services
#     of one of the caller's roles;
#   - ask-user carries no resource (the question is in input.args); someone
#     other than the asker answers only with the answerer role;
#   - process and task resources name their owner (the principal that
#     started or created them): only the owner, or a role with
#     supervise: true, may touch them, and task_list resources name whose
#     tasks a call lists. A process or task of another principal is denied
#     with "conceal": the caller gets the answer of an id that does not
#     exist.
# Writes that match approval_write, commands that match an approval rule,
# commands with shell constructs (where the tenant allows them at all) and
# POST fetches wait for a human. Broad reads (recursive or folder listings)
# carry the tenant's protected globs as exclude_paths, which the tool
# enforces while walking.
package toolgate.authz

import data.toolgate.lib

allow := count(deny) == 0

decision := object.union_n([
	{
		"allow": allow,
		"approval_required": approval_required,
		"reasons": reasons,
		"obligations": obligations,
	},
	denial,
	concealment,
])

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

obligations := object.union_n([time_limit, output_cap, exclusions, jail, rate_limits])

# Deny reasons are shown to the model: they name only the tool and what the
# request itself carries (paths, hosts, commands), never the pack's rules.

deny contains tool_denial if not lib.tool_offered

# tool_denial stays defined without a tool name, so the deny above cannot
# vanish with it.
default tool_denial := "this tool is not available to you"

tool_denial := sprintf("tool %s is not available to you", [input.tool.name]) if is_string(input.tool.name)

grants contains sprintf("allowed: %s may use %s", [name, input.tool.name]) if {
	some name in lib.tool_grants
}

# ---------------------------------------------------------------------------
# Approvals

# input.approval is present only when a human approves a held call: the
# approver's id and roles (the gateway decides the held document again with
# it). Nobody approves their own call, and only approvers approve.
deny contains "you cannot approve your own call" if input.approval.id == input.principal.id

deny contains "approving needs the approver role" if {
	input.approval
	not approver_role
}

# approver_role, not "not ... in input.approval.roles": "in" on an
# undefined ref is undefined even under "not".
approver_role if "approver" in input.approval.roles

# ---------------------------------------------------------------------------
# Questions (ask-user)

# input.answer is present only when someone other than the asker answers an
# ask-user question (the asker always may, without this decision): the
# answerer's id and roles, beside the ask-user call's own document. Only the
# answerer role (a support desk, the platform's relay account) answers for
# someone else; for anyone else the question does not exist.
deny contains "answering another principal's question needs the answerer role" if {
	input.answer
	not answerer_role
}

answerer_role if "answerer" in input.answer.roles

# ---------------------------------------------------------------------------
# Resource types

# resource_types names the resource types each built-in tool produces: bash
# a command and file resources (its arguments and its working folder),
# every other tool one type. A resource of another type is
# denied, so the rules of a type need to run only for the tools that
# produce it. A tool this pack does not name may carry file resources only.
resource_types := {
	"read-file": {"file"},
	"write-file": {"file"},
	"edit-file": {"file"},
	"glob": {"file"},
	"grep": {"file"},
	"bash": {"command", "file"},
	"fetch": {"url"},
	"process-output": {"process"},
	"process-input": {"process"},
	"process-stop": {"process"},
	"task-create": {"task_list"},
	"task-list": {"task_list"},
	"task-update": {"task"},
	"task-get": {"task"},
	"skill": {"skill"},
	"ask-user": set(),
}

default expected_types := {"file"}

expected_types := resource_types[input.tool.name] if not upstream

# Upstream tools declare their resource types in the gateway's config; this
# pack knows "service" (see below). Another type is denied until a rule
# judges it. MCP upstream tools (kind "mcp") are judged alike: their first
# resource is the service named after the gateway tool.
expected_types := {"service"} if upstream

upstream if input.tool.kind in {"upstream", "mcp"}

deny contains sprintf("this policy only allows %s resources", [concat(" and ", sort(expected_types))]) if {
	some r in input.resources
	not expected(r)
}

# expected, not "not r.type in expected_types": "in" on an undefined ref is
# undefined even under "not", which would let a resource without a type
# through.
expected(r) if r.type in expected_types

carries(t) if {
	some r in input.resources
	r.type == t
}

# task and task_list resources are judged by their owner (see Owners
# below); the tools themselves keep each session's tasks apart.

# The command and URL rules below are reached only through rules that name
# their tools with input.tool.name == "...": OPA's rule index then skips
# them outright for every other tool, so a file read pays nothing for
# commands and URLs. The type rule above makes that safe: any other tool
# carrying a command, process or url resource is denied for it. File rules
# apply to every call: the file tools, bash's arguments, and tools this
# pack does not name.

# ---------------------------------------------------------------------------
# Files

# Access kinds of the file tools that need a "read" glob, and how deny
# messages name them.
read_verbs := {"read": "read", "list": "listing"}

# grant_verbs are the access kinds a "read" glob grants, and how grants name
# them. "command" is a literal argument of a bash command, read as a path:
# it needs a "read" glob too, so that "cat secrets/db.env" meets the same
# rules as read-file.
grant_verbs := {"read": "read", "list": "list", "command": "read"}

files contains r if {
	some r in input.resources
	r.type == "file"
}

# object.get, not r.path: a call on an undefined ref is undefined even
# under "not", which would let a resource without a path through.
deny contains "a file resource has no path" if {
	some r in files
	not is_string(object.get(r, "path", null))
}

deny contains "file access must be read, list or write" if {
	not input.tool.name == "bash"
	some r in files
	not object.get(r, "access", null) in {"read", "list", "write"}
}

# bash's file resources are its literal arguments (access "command"), the
# paths its programs are known to write ("write": sort -o, tee, cp's
# destination, ...), the targets of its redirections ("read" for < FILE,
# "write" for > FILE and >> FILE, each with "redirect": true) and its
# working folder ("list"). A "read" meets the same read globs as
# read-file, a "write" the same write globs and approval_write as
# write-file.
deny contains "a command's file resources must have access command, read, write or list" if {
	input.tool.name == "bash"
	some r in files
	not object.get(r, "access", null) in {"command", "read", "write", "list"}
}

deny contains sprintf("%s of %s is not allowed for your roles", [verb, r.path]) if {
	some r in targets
	verb := read_verbs[r.access]
	not readable(r)
}

# The shell tool marks an argument that leaves the workspace (an absolute
# path, a climb out with ..), read or written: denied whatever the globs
# say, as "**" would match it. Only bash carries such resources, so these
# rules name it and OPA's index skips them for other tools.
deny contains sprintf("command argument %s is outside the workspace", [r.path]) if {
	input.tool.name == "bash"
	some r in targets
	r.outside == true
}

deny contains sprintf("command argument %s is not readable for your roles", [r.path]) if {
	input.tool.name == "bash"
	some r in targets
	r.access == "command"
	not r.outside == true
	not readable(r)
}

deny contains sprintf("write to %s is not allowed for your roles", [r.path]) if {
	some r in targets
	r.access == "write"
	not r.outside == true
	not writable(r)
}

deny contains sprintf("access to %s is not allowed: the path is protected", [r.path]) if {
	some r in targets
	lib.protected(r.path)
}

# A file with more than one hard link is the same file under another name,
# possibly a protected one: the tools report the count as "links" (only
# when above 1) and no access kind is allowed through it. write-file and
# edit-file also refuse such a file when they run.
deny contains sprintf("access to %s is not allowed: the file has %v hard links", [r.path, r.links]) if {
	some r in targets
	is_number(r.links)
	r.links > 1
}

# targets are the file resources with a path, the only ones any glob is
# matched against.
targets contains r if {
	some r in files
	is_string(r.path)
}

readable(r) if read_grants[r]

writable(r) if write_grants[r]

# read_grants and write_grants map each resource to the reasons that allow it:
# "allowed: ROLE may ACCESS GLOB".
read_grants[r] contains sprintf("allowed: %s may %s %s", [name, verb, pattern]) if {
	some r in targets
	verb := grant_verbs[r.access]
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

# ---------------------------------------------------------------------------
# Commands and processes
#
# A command resource is what bash would run; a process resource names a
# background process and carries the segments it was started with. Both are
# judged segment by segment against the command rules of the caller's roles
# (roles.<name>.commands.allow / approval / forbidden, each a list of argv
# prefixes). A segment takes the strictest kind among all its matching
# rules: forbidden, then approval, then allow; a segment no rule matches is
# denied. For a process an approval rule is enough: the process was approved
# when it started, and whoever may approve its commands may also read, feed
# or stop it.

deny contains reason if {
	input.tool.name == "bash"
	some reason in command_denials
}

approvals contains reason if {
	input.tool.name == "bash"
	some reason in command_approvals
}

grants contains reason if {
	input.tool.name == "bash"
	some reason in command_grants
}

deny contains reason if {
	input.tool.name == "process-output"
	some reason in command_denials
}

grants contains reason if {
	input.tool.name == "process-output"
	some reason in command_grants
}

deny contains reason if {
	input.tool.name == "process-input"
	some reason in command_denials
}

grants contains reason if {
	input.tool.name == "process-input"
	some reason in command_grants
}

deny contains reason if {
	input.tool.name == "process-stop"
	some reason in command_denials
}

grants contains reason if {
	input.tool.name == "process-stop"
	some reason in command_grants
}

# main_types names the resource bash, fetch and the process tools act on:
# a call without one would leave the rules below nothing to judge.
main_types := {
	"bash": "command",
	"fetch": "url",
	"process-output": "process",
	"process-input": "process",
	"process-stop": "process",
	"skill": "skill",
}

missing_resource := sprintf("the call carries no %s resource", [t]) if {
	t := main_types[input.tool.name]
	not carries(t)
}

command_denials contains missing_resource

# runnables are the command and process resources of the call.
runnables contains r if {
	some r in input.resources
	r.type in {"command", "process"}
}

command_denials contains "the command runs nothing this policy can check" if {
	some r in runnables
	not has_segments(r)
}

has_segments(r) if {
	is_array(r.segments)
	count(r.segments) > 0
}

# A segment is one simple command's argv: a non-empty list of strings. The
# shell tool never produces anything else.
command_denials contains "a command segment is not a list of words" if {
	some r in runnables
	some argv in r.segments
	not well_formed(argv)
}

well_formed(argv) if {
	is_array(argv)
	count(argv) > 0
	every word in argv {
		is_string(word)
	}
}

# segments are the well-formed segments of the call's resources.
segments contains argv if {
	some r in runnables
	some argv in r.segments
	well_formed(argv)
}

# command_kinds are the kinds of command rules.
command_kinds := ["allow", "approval", "forbidden"]

# segment_matches maps each segment to the rules that match it, with their
# kind and role.
segment_matches[argv] contains {"kind": kind, "role": name, "rule": rule} if {
	some argv in segments
	some name, role in lib.roles
	some kind in command_kinds
	some rule in role.commands[kind]
	rule[0] == argv[0] # a cheap first cut: most rules start with another word
	lib.command_matches(rule, argv)
}

segment_kinds[argv] := {m.kind | some m in matches} if {
	some argv, matches in segment_matches
}

command_denials contains sprintf("command %s is forbidden", [command_text(argv)]) if {
	some argv, kinds in segment_kinds
	"forbidden" in kinds
}

command_denials contains sprintf("command %s is not allowed for your roles", [command_text(argv)]) if {
	some argv in segments
	not segment_kinds[argv]
}

# Only bash asks for approval: a process's segments were approved when it
# started.
command_approvals contains sprintf("approval required: command %s needs a human", [command_text(argv)]) if {
	some argv, kinds in segment_kinds
	"approval" in kinds
}

# The rules matched a segment of words, so they are words too.
command_grants contains sprintf("allowed: %s may run %s", [m.role, concat(" ", m.rule)]) if {
	some matches in segment_matches
	some m in matches
	m.kind == "allow"
}

command_grants contains sprintf("allowed: %s may run %s after approval", [m.role, concat(" ", m.rule)]) if {
	some matches in segment_matches
	some m in matches
	m.kind == "approval"
}

# command_text is how a message names a segment: its words, at most 80
# characters.
command_text(argv) := capped(concat(" ", argv))

capped(s) := s if count(s) <= 80

capped(s) := concat("", [substring(s, 0, 77), "..."]) if count(s) > 80

# A command that is not plain (substitutions, variables, loops, …) may run
# more than its segments show. The tenant's commands_non_plain decides:
# "approval" holds it for a human (its segments are still judged, so a
# forbidden or unknown command is still denied); anything else denies it.
# Redirections and here-documents hide nothing: a redirection's target is
# a file resource of its own (judged above like the file tools' targets)
# and a here-document is only text on standard input, so a command whose
# only constructs are those is judged like a plain one.
# Process resources carry no "plain": they were judged when they started.
command_denials contains sprintf("commands with shell constructs (%s) are not allowed", [constructs_text(r)]) if {
	some r in runnables
	opaque(r)
	not lib.tenant.commands_non_plain == "approval"
}

command_approvals contains sprintf("approval required: commands with shell constructs (%s) need a human", [constructs_text(r)]) if {
	some r in runnables
	opaque(r)
	lib.tenant.commands_non_plain == "approval"
}

# transparent_constructs are the constructs that hide nothing from policy.
transparent_constructs := {"redirect", "heredoc"}

# opaque(r) holds for a command resource that is not plain, unless it
# names its constructs and every one is transparent.
opaque(r) if {
	r.type == "command"
	not r.plain == true
	not only_transparent(r)
}

only_transparent(r) if {
	is_array(r.constructs)
	count(r.constructs) > 0
	every c in r.constructs {
		c in transparent_constructs
	}
}

opaque_constructs(r) := [c |
	some c in r.constructs
	not c in transparent_constructs
]

# constructs_text names what made a command not plain (beyond the
# transparent constructs); "other" when the resource does not say.
constructs_text(r) := concat(", ", names) if {
	names := [c | some c in opaque_constructs(r); is_string(c)]
	count(names) > 0
} else := "other"

# ---------------------------------------------------------------------------
# Owners: processes and tasks
#
# The tools keep processes and tasks of other sessions and tenants out of
# sight; within a session they are shared. A process resource names the
# principal that started the process, a task resource the principal that
# created the task ("owner"); a task_list resource names whose tasks the
# call lists or adds to ("owner"), or "all_owners": true for every
# principal of the session. Only the owner, or a caller with a role that
# sets supervise: true (the "supervisor" of data.yaml), may read, feed or
# stop a process, read or update a task, or list another principal's
# tasks. A resource that names no owner is denied for everyone.
#
# A process or task of another principal is denied with "conceal": true,
# so the caller gets exactly the answer of an id that does not exist (the
# audit log still records the denial and its reasons). Listing another
# principal's tasks reveals nothing by its denial (it is the same whether
# that principal has tasks or not), so it is denied plainly.

supervisor if {
	some role in lib.roles
	role.supervise == true
}

owned_types := {"process", "task"}

owner_denials contains sprintf("%s %s belongs to another principal", [r.type, resource_id(r)]) if {
	some r in input.resources
	r.type in owned_types
	is_string(r.owner)
	r.owner != input.principal.id
	not supervisor
}

owner_denials contains sprintf("a %s resource names no owner", [r.type]) if {
	some r in input.resources
	r.type in owned_types
	not is_string(object.get(r, "owner", null))
}

# resource_id is how a message names a process or task: its id, at most 80
# characters.
resource_id(r) := capped(r.id) if {
	is_string(r.id)
} else := "without an id"

deny contains reason if {
	some reason in owner_denials
}

# concealment asks the gateway to answer an owner denial as an unknown id.
default concealment := {}

concealment := {"conceal": true} if count(owner_denials) > 0

task_lists contains r if {
	some r in input.resources
	r.type == "task_list"
}

deny contains "the tasks of another principal are not yours to list" if {
	some r in task_lists
	is_string(r.owner)
	r.owner != input.principal.id
	not supervisor
}

deny contains "the tasks of every principal are not yours to list" if {
	some r in task_lists
	not is_string(object.get(r, "owner", null))
	r.all_owners == true
	not supervisor
}

deny contains "a task_list resource names no owner" if {
	some r in task_lists
	not is_string(object.get(r, "owner", null))
	not r.all_owners == true
}

# ---------------------------------------------------------------------------
# Services (upstream tools)
#
# A service resource names an application service an upstream tool acts
# on, by id (built from the arguments, e.g. {type: service, id:
# /service_id}). Its id must be listed in the services of one of the
# caller's roles ("*": every service). The denial names only the id the
# request carried: whether the service exists is the upstream's business,
# and a denied call never reaches it.

services contains r if {
	upstream
	some r in input.resources
	r.type == "service"
}

deny contains "a service resource has no id" if {
	some r in services
	not is_string(object.get(r, "id", null))
}

deny contains sprintf("service %s is not allowed for your roles", [capped(r.id)]) if {
	some r in services
	is_string(r.id)
	not service_grants[r]
}

# service_grants maps each service resource to the reasons that allow it:
# "allowed: ROLE may use service ID".
service_grants[r] contains sprintf("allowed: %s may use service %s", [name, capped(r.id)]) if {
	some r in services
	is_string(r.id)
	some name, role in lib.roles
	some listed in role.services
	listed in {"*", r.id}
}

grants contains reason if {
	some resource_reasons in service_grants
	some reason in resource_reasons
}

# ---------------------------------------------------------------------------
# URLs

deny contains reason if {
	input.tool.name == "fetch"
	some reason in fetch_denials
}

approvals contains reason if {
	input.tool.name == "fetch"
	some reason in fetch_approvals
}

grants contains reason if {
	input.tool.name == "fetch"
	some resource_reasons in fetch_grants
	some reason in resource_reasons
}

fetch_denials contains missing_resource

urls contains r if {
	some r in input.resources
	r.type == "url"
}

fetch_denials contains "a url resource has no host" if {
	some r in urls
	not is_string(object.get(r, "host", null))
}

# fetches are the url resources with a host, the only ones any rule judges.
fetches contains r if {
	some r in urls
	is_string(r.host)
}

# address_classes maps each url resource to the classes of the addresses it
# resolves to: the worst one the tool reports and each address's own, so a
# resource that leaves either out cannot pass as public.
address_classes[r] contains object.get(r, "address_class", "unknown") if {
	some r in fetches
}

address_classes[r] contains object.get(a, "class", "unknown") if {
	some r in fetches
	some a in object.get(r, "addresses", [])
	is_object(a)
}

# Cloud metadata endpoints hand out credentials: no tenant setting opens them.
fetch_denials contains sprintf("fetch of %s resolves to a metadata address", [r.host]) if {
	some r in fetches
	"metadata" in address_classes[r]
}

address_phrases := {
	"private": "a private address",
	"loopback": "a loopback address",
	"link_local": "a link-local address",
	"unspecified": "an unspecified address",
	"multicast": "a multicast address",
	"reserved": "a reserved address",
}

fetch_denials contains sprintf("fetch of %s resolves to %s", [r.host, object.get(address_phrases, class, "a non-public address")]) if {
	some r in fetches
	some class in address_classes[r]
	not class in {"public", "metadata"}
	not private_allowed(r.host)
}

# private_allowed(host) holds for the tenant's fetch.allow_private_hosts; a
# function, because "in" on an undefined list is undefined even under "not",
# which would let a tenant without the list through.
private_allowed(host) if host in lib.tenant.fetch.allow_private_hosts

# schemes are the URL schemes the tenant allows: https always, http only
# with fetch.allow_http.
schemes contains "https"

schemes contains "http" if lib.tenant.fetch.allow_http == true

fetch_denials contains sprintf("fetch of %s over %v is not allowed", [r.host, scheme]) if {
	some r in fetches
	scheme := object.get(r, "scheme", "no scheme")
	not scheme in schemes
}

fetch_denials contains sprintf("fetch of %s with method %v is not allowed", [r.host, method]) if {
	some r in fetches
	method := object.get(r, "method", "none")
	not method in {"GET", "POST"}
}

fetch_approvals contains sprintf("approval required: POST to %s needs a human", [r.host]) if {
	some r in fetches
	r.method == "POST"
}

# fetch_grants maps each url resource to the reasons that allow its host:
# "allowed: ROLE may fetch GLOB".
fetch_grants[r] contains sprintf("allowed: %s may fetch %s", [name, pattern]) if {
	some r in fetches
	some name, role in lib.roles
	some pattern in role.fetch.hosts
	lib.host_matches(pattern, r.host)
}

fetch_denials contains sprintf("fetch of %s is not allowed for your roles", [r.host]) if {
	some r in fetches
	not fetch_grants[r]
}

# ---------------------------------------------------------------------------
# Skills
#
# A skill resource names the skill, its version and the digest of the
# SKILL.md that would be served. The caller's roles must list the skill in
# roles.<name>.skills (or "*"), and where the tenant pins a skill's digest
# (skill_digests.<name>) only that exact content may be served: an edit
# nobody reviewed is denied until the pin moves.

deny contains reason if {
	input.tool.name == "skill"
	some reason in skill_denials
}

grants contains reason if {
	input.tool.name == "skill"
	some r in skills
	some name in lib.skill_grants(r.name)
	reason := sprintf("allowed: %s may load skill %s", [name, r.name])
}

skill_denials contains missing_resource

skills contains r if {
	some r in input.resources
	r.type == "skill"
}

skill_denials contains "a skill resource has no name" if {
	some r in skills
	not is_string(object.get(r, "name", null))
}

skill_denials contains sprintf("skill %s is not allowed for your roles", [r.name]) if {
	some r in skills
	is_string(r.name)
	count(lib.skill_grants(r.name)) == 0
}

skill_denials contains sprintf("skill %s is not the reviewed version", [r.name]) if {
	some r in skills
	pinned := lib.tenant.skill_digests[r.name]
	not object.get(r, "digest", null) == pinned
}

# ---------------------------------------------------------------------------
# Obligations

# time_limit bounds every call at 30 s, except a bash command started in the
# background: that call returns at once with a process id, and the process
# runs under the shell supervisor's own lifetime limit, not the call's. An
# obligation there would read as a limit on the process that nothing
# enforces, or, if a tool ever tied the process to the call, kill it at 30 s.
default time_limit := {"timeout_ms": 30000}

time_limit := {} if {
	input.tool.name == "bash"
	input.args.background == true
}

# output_cap applies the smallest max_output_bytes of the caller's roles.
default output_cap := {}

output_cap := {"max_output_bytes": min(caps)} if {
	caps := {n | some role in lib.roles; n := role.max_output_bytes}
	count(caps) > 0
}

# rate_limits gives each of the caller's roles that sets rate_limit
# ({"rate": per second, "burst": at once}) a token bucket per principal,
# key "role/<role>/<principal>", for every call of any tool: the gateway
# counts, and a call takes one token from each of its buckets
# (docs/policy-guide.md "Rate limits and quotas").
default rate_limits := {}

rate_limits := {"rate_limit": limits} if {
	limits := [limit |
		some name, role in lib.roles
		limit := {"key": sprintf("role/%s/%s", [name, input.principal.id]), "rate": role.rate_limit.rate, "burst": role.rate_limit.burst}
	]
	count(limits) > 0
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

# jail shapes the OS jail every program of a bash call runs in:
#   - exclude_paths: the tenant's protected globs do not exist inside;
#   - write_paths: the caller's write globs; the tenant's approval_write
#     globs only when the call waits for a human anyway (an approved call
#     runs with them), so that no command writes there unapproved;
#   - exec_paths: what the call's programs may start besides themselves,
#     from the tenant's exec_paths by program name (git's helpers, the Go
#     toolchain and the test binaries it builds).
default jail := {}

jail := object.union(
	{"write_paths": sort(jail_write_paths), "exec_paths": sort(jail_exec_paths)},
	jail_hidden,
) if {
	input.tool.name == "bash"
}

default jail_hidden := {}

jail_hidden := {"exclude_paths": lib.tenant.protected} if count(lib.tenant.protected) > 0

jail_write_paths contains pattern if {
	some role in lib.roles
	some pattern in role.write
	not pattern in object.get(lib.tenant, "approval_write", [])
}

jail_write_paths contains pattern if {
	count(approvals) > 0
	some role in lib.roles
	some pattern in role.write
	pattern in object.get(lib.tenant, "approval_write", [])
}

jail_exec_paths contains path if {
	some argv in segments
	some path in object.get(object.get(lib.tenant, "exec_paths", {}), argv[0], [])
}
