package toolgate.skills_test

import data.toolgate.authz
import data.toolgate.availability
import data.toolgate.fixtures_test.availability_input
import data.toolgate.fixtures_test.request

# choice is the availability input for one skill of the skill tool.
choice(roles, name) := object.union(availability_input("acme", roles, "skill"), {"choice": {
	"type": "skill", "name": name, "version": "1.0.0", "description": "d",
}})

skill(name) := {"type": "skill", "name": name, "version": "1.0.0", "digest": "sha256:aaaa"}

decide(roles, resources) := d if {
	d := authz.decision with input as request("acme", roles, "skill", resources)
}

test_skills_offered_by_roles[note] if {
	some note, c in {
		"developer is offered every skill": {"roles": ["developer"], "skill": "release-notes", "want": true},
		"viewer is offered code-review": {"roles": ["viewer"], "skill": "code-review", "want": true},
		"viewer is not offered release-notes": {"roles": ["viewer"], "skill": "release-notes", "want": false},
		"an unknown role is offered no skill": {"roles": ["intern"], "skill": "code-review", "want": false},
	}
	availability.allow == c.want with input as choice(c.roles, c.skill)
}

test_skill_tool_offered_as_a_whole if {
	availability.allow with input as availability_input("acme", ["viewer"], "skill")
}

test_a_choice_of_another_type_is_not_offered if {
	not_offered := availability.allow with input as object.union(availability_input("acme", ["developer"], "skill"), {"choice": {"type": "prompt", "name": "x"}})
	not_offered == false
}

test_skill_loads[note] if {
	some note, c in {
		"developer loads any skill": {"roles": ["developer"], "r": [skill("release-notes")], "allow": true, "reasons": ["allowed: developer may load skill release-notes", "allowed: developer may use skill"]},
		"viewer loads code-review": {"roles": ["viewer"], "r": [skill("code-review")], "allow": true, "reasons": ["allowed: viewer may load skill code-review", "allowed: viewer may use skill"]},
		"viewer may not load release-notes": {"roles": ["viewer"], "r": [skill("release-notes")], "allow": false, "reasons": ["skill release-notes is not allowed for your roles"]},
		"a call without a skill resource": {"roles": ["developer"], "r": [], "allow": false, "reasons": ["the call carries no skill resource"]},
		"a skill resource without a name": {"roles": ["developer"], "r": [{"type": "skill"}], "allow": false, "reasons": ["a skill resource has no name"]},
		"a file resource on the skill tool": {"roles": ["developer"], "r": [skill("code-review"), {"type": "file", "path": "a", "access": "read"}], "allow": false, "reasons": ["this policy only allows skill resources"]},
	}
	d := decide(c.roles, c.r)
	d.allow == c.allow
	d.reasons == c.reasons
}

test_pinned_skill_digest[note] if {
	some note, c in {
		"the pinned content is served": {"digest": "sha256:aaaa", "allow": true},
		"other content is denied": {"digest": "sha256:bbbb", "allow": false},
	}
	d := decide(["developer"], [skill("release-notes")]) with data.toolgate.tenants.acme.skill_digests as {"release-notes": c.digest}
	d.allow == c.allow
}

test_unpinned_skill_digest_message if {
	d := decide(["developer"], [skill("release-notes")]) with data.toolgate.tenants.acme.skill_digests as {"release-notes": "sha256:bbbb"}
	d.message == "skill release-notes is not the reviewed version"
}
