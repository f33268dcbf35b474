package toolgate.availability_test

import data.toolgate.availability
import data.toolgate.fixtures_test.availability_input

test_tool_offered_by_roles[note] if {
	some note, c in {
		"developer is offered write-file": {"tenant": "acme", "roles": ["developer"], "tool": "write-file", "want": true},
		"developer is offered grep": {"tenant": "acme", "roles": ["developer"], "tool": "grep", "want": true},
		"viewer is offered read-file": {"tenant": "acme", "roles": ["viewer"], "tool": "read-file", "want": true},
		"viewer is not offered write-file": {"tenant": "acme", "roles": ["viewer"], "tool": "write-file", "want": false},
		"viewer is not offered edit-file": {"tenant": "acme", "roles": ["viewer"], "tool": "edit-file", "want": false},
		"a tool no role lists is not offered": {"tenant": "acme", "roles": ["developer"], "tool": "unlisted-tool", "want": false},
		"an unknown tenant is offered nothing": {"tenant": "initech", "roles": ["developer"], "tool": "read-file", "want": false},
		"an unknown role is offered nothing": {"tenant": "acme", "roles": ["intern"], "tool": "read-file", "want": false},
		"no roles, no tools": {"tenant": "acme", "roles": [], "tool": "read-file", "want": false},
		"roles are per tenant": {"tenant": "globex", "roles": ["viewer"], "tool": "read-file", "want": false},
		"one known role is enough": {"tenant": "acme", "roles": ["intern", "viewer"], "tool": "grep", "want": true},
		"roles add up": {"tenant": "acme", "roles": ["viewer", "developer"], "tool": "write-file", "want": true},
	}
	availability.allow == c.want with input as availability_input(c.tenant, c.roles, c.tool)
}

test_wildcard_offers_every_tool if {
	availability.allow with input as availability_input("initech", ["admin"], "bash")
		with data.toolgate.tenants as {"initech": {"roles": {"admin": {"tools": ["*"]}}}}
}

test_missing_principal_is_offered_nothing if {
	not_offered := availability.allow with input as {"tenant": "acme", "tool": {"name": "read-file"}}
	not_offered == false
}
