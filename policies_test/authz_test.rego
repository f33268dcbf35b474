package toolgate.authz_test

import data.toolgate.authz
import data.toolgate.fixtures_test.listing
import data.toolgate.fixtures_test.read
import data.toolgate.fixtures_test.request
import data.toolgate.fixtures_test.walk
import data.toolgate.fixtures_test.write

# decide evaluates the decision for a request by alice.
decide(tenant, roles, tool, resources) := d if {
	d := authz.decision with input as request(tenant, roles, tool, resources)
}

test_reads[note] if {
	some note, c in {
		"developer reads anywhere": {"roles": ["developer"], "r": read("notes/todo.txt"), "want": true},
		"viewer reads docs": {"roles": ["viewer"], "r": read("docs/guide.md"), "want": true},
		"viewer reads nested src": {"roles": ["viewer"], "r": read("src/pkg/app.py"), "want": true},
		"viewer reads README.md": {"roles": ["viewer"], "r": read("README.md"), "want": true},
		"viewer may not read notes": {"roles": ["viewer"], "r": read("notes/todo.txt"), "want": false},
		"viewer's README.md glob is not a prefix": {"roles": ["viewer"], "r": read("README.md.bak"), "want": false},
		"dir/** does not cover a sibling with the same prefix": {"roles": ["viewer"], "r": read("docs-old/a.md"), "want": false},
		"unknown role reads nothing": {"roles": ["intern"], "r": read("docs/guide.md"), "want": false},
	}
	decide("acme", c.roles, "read-file", [c.r]).allow == c.want
}

test_listings_and_walks[note] if {
	some note, c in {
		"viewer lists docs: dir/** covers the folder itself": {"roles": ["viewer"], "r": listing("docs"), "want": true},
		"viewer greps src": {"roles": ["viewer"], "r": walk("src"), "want": true},
		"viewer may not list the workspace root": {"roles": ["viewer"], "r": listing("."), "want": false},
		"viewer may not grep the workspace root": {"roles": ["viewer"], "r": walk("."), "want": false},
		"developer greps the workspace root": {"roles": ["developer"], "r": walk("."), "want": true},
		"developer lists notes": {"roles": ["developer"], "r": listing("notes"), "want": true},
	}
	decide("acme", c.roles, "grep", [c.r]).allow == c.want
}

test_writes[note] if {
	some note, c in {
		"developer writes src": {"tenant": "acme", "roles": ["developer"], "r": write("src/app.py"), "want": true},
		"developer writes docs": {"tenant": "acme", "roles": ["developer"], "r": write("docs/new.md"), "want": true},
		"developer may not write outside write globs": {"tenant": "acme", "roles": ["developer"], "r": write("README.md"), "want": false},
		"read access does not grant write": {"tenant": "acme", "roles": ["developer"], "r": write("build/out.txt"), "want": false},
		"viewer may not write": {"tenant": "acme", "roles": ["viewer"], "r": write("docs/new.md"), "want": false},
		"globex developer writes anywhere": {"tenant": "globex", "roles": ["developer"], "r": write("secrets/key"), "want": true},
	}
	decide(c.tenant, c.roles, "write-file", [c.r]).allow == c.want
}

test_protected_beats_everything[note] if {
	some note, c in {
		"read of the secrets folder's files": {"tool": "read-file", "r": read("secrets/db.env")},
		"listing of the secrets folder": {"tool": "glob", "r": listing("secrets")},
		"grep of the secrets folder": {"tool": "grep", "r": walk("secrets")},
		"read of a top-level .env": {"tool": "read-file", "r": read(".env")},
		"read of a nested .env": {"tool": "read-file", "r": read("src/config/.env")},
		"write of a .env inside a writable folder": {"tool": "write-file", "r": write("src/.env")},
		"write into secrets": {"tool": "write-file", "r": write("secrets/new")},
	}
	d := decide("acme", ["developer"], c.tool, [c.r])
	d.allow == false
	some reason in d.reasons
	reason == sprintf("access to %s is not allowed: the path is protected", [c.r.path])
}

test_every_resource_must_be_allowed if {
	d := decide("acme", ["viewer"], "read-file", [read("docs/a.md"), read("notes/b.md")])
	d.allow == false
	d.reasons == ["read of notes/b.md is not allowed for your roles"]
}

test_approval_write[note] if {
	some note, c in {
		"a write to release needs a human": {"roles": ["developer"], "r": write("release/VERSION"), "allow": true, "approval": true},
		"a write elsewhere does not": {"roles": ["developer"], "r": write("src/app.py"), "allow": true, "approval": false},
		"a read of release does not": {"roles": ["developer"], "r": read("release/VERSION"), "allow": true, "approval": false},
		"a denied write is denied, not held": {"roles": ["viewer"], "r": write("release/VERSION"), "allow": false, "approval": false},
	}
	d := decide("acme", c.roles, "write-file", [c.r])
	d.allow == c.allow
	d.approval_required == c.approval
}

test_approval_has_a_reason if {
	d := decide("acme", ["developer"], "write-file", [write("release/VERSION")])
	"approval required: writes to release/** need a human" in d.reasons
}

test_exclude_paths[note] if {
	protected := ["secrets", "secrets/**", "**/.env", ".env"]
	some note, c in {
		"a recursive read skips protected paths": {"tenant": "acme", "r": walk("."), "want": {"timeout_ms": 30000, "exclude_paths": protected}},
		"a listing skips protected paths": {"tenant": "acme", "r": listing("src"), "want": {"timeout_ms": 30000, "exclude_paths": protected}},
		"a single-file read needs no exclusions": {"tenant": "acme", "r": read("src/app.py"), "want": {"timeout_ms": 30000}},
		"a write needs no exclusions": {"tenant": "acme", "r": write("src/app.py"), "want": {"timeout_ms": 30000}},
		"a tenant without protected paths has none": {"tenant": "globex", "r": walk("."), "want": {"timeout_ms": 30000}},
	}
	decide(c.tenant, ["developer"], "grep", [c.r]).obligations == c.want
}

test_output_caps[note] if {
	some note, c in {
		"viewers get an output cap": {"roles": ["viewer"], "want": {"timeout_ms": 30000, "max_output_bytes": 32768}},
		"developers do not": {"roles": ["developer"], "want": {"timeout_ms": 30000}},
		"a cap of any role applies": {"roles": ["developer", "viewer"], "want": {"timeout_ms": 30000, "max_output_bytes": 32768}},
		"unknown roles get only the timeout": {"roles": ["intern"], "want": {"timeout_ms": 30000}},
	}
	decide("acme", c.roles, "read-file", [read("docs/guide.md")]).obligations == c.want
}

test_smallest_output_cap_wins if {
	d := decide("acme", ["a", "b"], "read-file", [read("x")]) with data.toolgate.tenants.acme.roles as {
		"a": {"tools": ["read-file"], "read": ["**"], "max_output_bytes": 100},
		"b": {"tools": ["read-file"], "read": ["**"], "max_output_bytes": 50},
	}
	d.obligations.max_output_bytes == 50
}

test_rate_limits_per_role_and_principal if {
	d := decide("acme", ["a", "b", "c"], "read-file", [read("x")]) with data.toolgate.tenants.acme.roles as {
		"a": {"tools": ["read-file"], "read": ["**"], "rate_limit": {"rate": 2, "burst": 10}},
		"b": {"tools": ["read-file"], "read": ["**"], "rate_limit": {"rate": 0.5, "burst": 1}},
		"c": {"tools": ["read-file"], "read": ["**"]},
	}
	d.obligations.rate_limit == [
		{"key": "role/a/alice", "rate": 2, "burst": 10},
		{"key": "role/b/alice", "rate": 0.5, "burst": 1},
	]
}

test_no_rate_limit_without_a_role_that_sets_one if {
	d := decide("acme", ["developer"], "read-file", [read("docs/guide.md")])
	not d.obligations.rate_limit
}

test_malformed_requests_are_denied[note] if {
	some note, c in {
		"a resource type this pack does not cover": {
			"r": {"type": "url", "url": "https://example.com/", "host": "example.com"},
			"reason": "this policy only allows file resources",
		},
		"a resource without a type": {"r": {"path": "docs/a.md", "access": "read"}, "reason": "this policy only allows file resources"},
		"a file without a path": {"r": {"type": "file", "access": "read"}, "reason": "a file resource has no path"},
		"a file whose path is not a string": {"r": {"type": "file", "path": 7, "access": "read"}, "reason": "a file resource has no path"},
		"a file access the pack does not know": {"r": {"type": "file", "path": "docs/a.md", "access": "delete"}, "reason": "file access must be read, list or write"},
		"a file without an access": {"r": {"type": "file", "path": "docs/a.md"}, "reason": "file access must be read, list or write"},
	}
	d := decide("acme", ["developer"], "read-file", [c.r])
	d.allow == false
	c.reason in d.reasons
}

test_tool_must_be_offered[note] if {
	some note, c in {
		"tool not in any role": {"tenant": "acme", "roles": ["developer"], "tool": "unlisted-tool"},
		"unknown tenant": {"tenant": "initech", "roles": ["developer"], "tool": "read-file"},
		"viewer calling write-file": {"tenant": "acme", "roles": ["viewer"], "tool": "write-file"},
	}
	d := decide(c.tenant, c.roles, c.tool, [])
	d.allow == false
	sprintf("tool %s is not available to you", [c.tool]) in d.reasons
}

test_request_without_tool_name_is_denied if {
	d := authz.decision with input as {"tenant": "acme", "principal": {"roles": ["developer"]}, "resources": []}
	d.allow == false
	d.message == "this tool is not available to you"
}

test_no_resources_needs_only_the_tool if {
	d := decide("acme", ["developer"], "glob", [])
	d.allow == true
	d.reasons == ["allowed: developer may use glob"]
}

test_allowed_reasons_name_role_and_glob if {
	d := decide("acme", ["viewer"], "read-file", [read("docs/guide.md")])
	d == {
		"allow": true,
		"approval_required": false,
		"reasons": ["allowed: viewer may read docs/**", "allowed: viewer may use read-file"],
		"obligations": {"timeout_ms": 30000, "max_output_bytes": 32768},
	}
}

test_allowed_write_reasons if {
	d := decide("acme", ["developer"], "edit-file", [write("src/app.py")])
	d.reasons == ["allowed: developer may use edit-file", "allowed: developer may write src/**"]
}

test_denial_message_is_the_first_reason if {
	d := decide("acme", ["viewer"], "write-file", [write("notes/a.md")])
	d.reasons == ["tool write-file is not available to you", "write to notes/a.md is not allowed for your roles"]
	d.message == "tool write-file is not available to you"
}

# Every way to be denied explains itself: reasons are non-empty and the
# model-facing message is the first of them.
test_every_denial_has_reasons[note] if {
	some note, c in {
		"unknown tenant": {"tenant": "initech", "roles": ["developer"], "tool": "read-file", "r": read("docs/a.md")},
		"read": {"tenant": "acme", "roles": ["viewer"], "tool": "read-file", "r": read("notes/a.md")},
		"listing": {"tenant": "acme", "roles": ["viewer"], "tool": "glob", "r": listing(".")},
		"write": {"tenant": "acme", "roles": ["developer"], "tool": "write-file", "r": write("README.md")},
		"protected": {"tenant": "acme", "roles": ["developer"], "tool": "read-file", "r": read("secrets/k")},
		"malformed": {"tenant": "acme", "roles": ["developer"], "tool": "read-file", "r": {"type": "file"}},
	}
	d := decide(c.tenant, c.roles, c.tool, [c.r])
	d.allow == false
	count(d.reasons) > 0
	d.message == d.reasons[0]
}

test_allowed_decisions_carry_no_message if {
	d := decide("acme", ["developer"], "read-file", [read("docs/a.md")])
	d.allow
	not "message" in object.keys(d)
}

# approve decides a held write to release/ again with an approver.
approve(approver) := d if {
	held := request("acme", ["developer"], "write-file", [write("release/VERSION")])
	d := authz.decision with input as object.union(held, {"approval": approver})
}

test_approvals[note] if {
	some note, c in {
		"another approver may approve": {"approver": {"id": "bob", "roles": ["approver"]}, "allow": true},
		"nobody approves their own call": {"approver": {"id": "alice", "roles": ["approver"]}, "allow": false},
		"an approver needs the approver role": {"approver": {"id": "bob", "roles": ["developer"]}, "allow": false},
		"an approver without roles is refused": {"approver": {"id": "bob"}, "allow": false},
	}
	approve(c.approver).allow == c.allow
}

test_self_approval_says_why if {
	d := approve({"id": "alice", "roles": ["approver"]})
	d.message == "you cannot approve your own call"
}

# asked is an ask-user call by alice, a developer.
asked := object.union(request("acme", ["developer"], "ask-user", []), {"action": "user.ask", "args": {"question": "Deploy now?"}})

test_developers_may_ask_the_user if {
	d := authz.decision with input as asked
	d.allow
	d.approval_required == false
}

# answer decides the ask-user call again with someone other than the asker.
answer(answerer) := d if {
	d := authz.decision with input as object.union(asked, {"answer": answerer})
}

test_answers_by_someone_else[note] if {
	some note, c in {
		"the answerer role may answer": {"answerer": {"id": "support", "roles": ["answerer"]}, "allow": true},
		"another developer may not": {"answerer": {"id": "bob", "roles": ["developer"]}, "allow": false},
		"an approver may not": {"answerer": {"id": "bob", "roles": ["approver"]}, "allow": false},
		"an answerer without roles is refused": {"answerer": {"id": "bob"}, "allow": false},
	}
	answer(c.answerer).allow == c.allow
}

test_a_refused_answer_says_why if {
	d := answer({"id": "bob", "roles": ["developer"]})
	d.message == "answering another principal's question needs the answerer role"
}
