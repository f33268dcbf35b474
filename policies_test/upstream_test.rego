package toolgate.upstream_test

import data.toolgate.authz
import data.toolgate.availability
import data.toolgate.fixtures_test.read
import data.toolgate.fixtures_test.request

# upstream_request is the request document of an upstream tool call.
upstream_request(roles, tool, resources) := object.union(request("acme", roles, tool, resources), {
	"tool": {
		"name": tool,
		"kind": "upstream",
		"effects": ["maintenance.read"],
		"annotations": {"read_only": true, "destructive": false, "idempotent": true, "open_world": false},
		"schema_digest": "sha256:1111",
	},
	"action": "maintenance.read",
	"args": {"service_id": "checkout", "days": 7},
})

service(id) := {"type": "service", "id": id}

decide(roles, resources) := d if {
	d := authz.decision with input as upstream_request(roles, "maintenance-window", resources)
}

test_services[note] if {
	some note, c in {
		"developer uses a listed service": {"roles": ["developer"], "r": [service("checkout")], "want": true},
		"developer may not use an unlisted service": {"roles": ["developer"], "r": [service("payments")], "want": false},
		"oncall's * covers every service": {"roles": ["oncall"], "r": [service("payments")], "want": true},
		"one role's grant is enough": {"roles": ["developer", "oncall"], "r": [service("payments")], "want": true},
		"every service must be allowed": {"roles": ["developer"], "r": [service("checkout"), service("payments")], "want": false},
		"a role without the tool is offered nothing": {"roles": ["viewer"], "r": [service("checkout")], "want": false},
		"unknown role": {"roles": ["intern"], "r": [service("checkout")], "want": false},
		"no resources needs only the tool": {"roles": ["developer"], "r": [], "want": true},
	}
	decide(c.roles, c.r).allow == c.want
}

test_an_unlisted_service_reveals_nothing_about_existence if {
	# The pack cannot know, and does not say, whether a service exists:
	# an unknown id and a real one outside the role's list read the same.
	real := decide(["developer"], [service("payments")])
	unknown := decide(["developer"], [service("no-such-service")])
	real.message == "service payments is not allowed for your roles"
	unknown.message == "service no-such-service is not allowed for your roles"
	real.reasons == ["service payments is not allowed for your roles"]
	unknown.reasons == ["service no-such-service is not allowed for your roles"]
}

test_malformed_service_resources_are_denied[note] if {
	some note, r in {
		"no id": {"type": "service"},
		"numeric id": {"type": "service", "id": 7},
		"null id": {"type": "service", "id": null},
	}
	d := decide(["oncall"], [r])
	not d.allow
	"a service resource has no id" in d.reasons
}

test_upstream_tools_carry_only_known_types[note] if {
	some note, r in {
		"a type this pack does not judge": {"type": "ticket", "id": "T-1"},
		"a file resource": read("docs/guide.md"),
		"no type": {"id": "checkout"},
	}
	d := decide(["oncall"], [r])
	not d.allow
	"this policy only allows service resources" in d.reasons
}

test_service_grants_are_reasons if {
	d := decide(["developer", "oncall"], [service("checkout")])
	d.allow
	d.reasons == [
		"allowed: developer may use maintenance-window",
		"allowed: developer may use service checkout",
		"allowed: oncall may use maintenance-window",
		"allowed: oncall may use service checkout",
	]
}

test_long_service_ids_are_cut_in_messages if {
	id := concat("", [x | some _ in numbers.range(1, 100); x := "s"])
	d := decide(["developer"], [service(id)])
	count(d.message) < 120
}

test_availability_offers_the_upstream_tool[note] if {
	some note, c in {
		"developer": {"roles": ["developer"], "want": true},
		"oncall": {"roles": ["oncall"], "want": true},
		"viewer": {"roles": ["viewer"], "want": false},
	}
	doc := object.remove(upstream_request(c.roles, "maintenance-window", []), ["version", "call_id", "action", "resources", "args", "digest"])
	ok := availability.allow with input as doc
	ok == c.want
}

# mcp_request is the request document of an MCP upstream tool call: its
# first resource is the service named after the gateway tool.
mcp_request(roles, tool, extra) := object.union(request("acme", roles, tool, array.concat([service(tool)], extra)), {
	"tool": {
		"name": tool,
		"kind": "mcp",
		"effects": [concat("", ["mcp.", tool])],
		"annotations": {"read_only": true, "destructive": false, "idempotent": true, "open_world": false},
		"annotations_trusted": false,
		"definition_digest": "sha256:2222",
	},
	"action": concat("", ["mcp.", tool]),
	"args": {"query": "plan"},
})

test_mcp_tools_are_judged_like_upstream_tools[note] if {
	some note, c in {
		"oncall's * covers the MCP tool's service": {"roles": ["oncall"], "extra": [], "want": true},
		"developer has no grant for the MCP service": {"roles": ["developer"], "extra": [], "want": false},
		"a mapped type the pack does not judge is denied": {"roles": ["oncall"], "extra": [{"type": "topic", "words": "plan"}], "want": false},
		"a file resource is denied": {"roles": ["oncall"], "extra": [read("docs/guide.md")], "want": false},
	}

	# Offered (availability) like any tool: by name in roles.<role>.tools.
	d := authz.decision with input as mcp_request(c.roles, "notes-search-notes", c.extra)
		with data.toolgate.tenants.acme.roles.oncall.tools as ["notes-search-notes"]
		with data.toolgate.tenants.acme.roles.developer.tools as ["notes-search-notes"]
	d.allow == c.want
}
