# Shared helpers of the default pack: who the caller is in its tenant, which
# tools its roles offer, and how paths, commands and hosts match their rules.
# Availability and authorization both use them, so they can never disagree
# about which tools a caller is offered.
package toolgate.lib

# tenant is the caller's tenant configuration; undefined for an unknown tenant.
tenant := data.toolgate.tenants[input.tenant]

# roles maps each of the caller's roles that its tenant defines to the role's
# configuration. A role the tenant does not define grants nothing.
roles[name] := role if {
	some name in input.principal.roles
	role := tenant.roles[name]
}

# tool_grants names the caller's roles that offer the requested tool.
tool_grants contains name if {
	some name, role in roles
	offers(role, input.tool.name)
}

# tool_offered holds when at least one of the caller's roles offers the tool.
tool_offered if count(tool_grants) > 0

# offers(role, tool) holds when the role's tool list names the tool, or "*".
offers(role, _) if "*" in role.tools

offers(role, tool) if tool in role.tools

# choice_offered holds when the availability question is about a tool as a
# whole (no input.choice), or about one of a tool's choices that the
# caller's roles offer. Skills are the only choices: a skill is offered
# when one of the caller's roles lists it in roles.<name>.skills (or "*").
choice_offered if not input.choice

choice_offered if {
	input.choice.type == "skill"
	count(skill_grants(input.choice.name)) > 0
}

# skill_grants(skill) names the caller's roles that offer the skill.
skill_grants(skill) := {name |
	some name, role in roles
	offers_skill(role, skill)
}

offers_skill(role, _) if "*" in role.skills

offers_skill(role, skill) if skill in role.skills

# protected(path) holds when the path matches one of the tenant's protected
# globs: nobody may read, list or write it, whatever their roles grant.
protected(path) if {
	some pattern in tenant.protected
	path_matches(pattern, path)
}

# path_matches(pattern, path) matches a workspace-relative path against a glob
# with "/" as the only separator: "*" stays inside one folder, "**" crosses
# folders. "dir/**" also covers the folder "dir" itself, because listing or
# searching it shows nothing the pattern does not already grant.
path_matches(pattern, path) if glob.match(pattern, ["/"], path)

path_matches(pattern, path) if {
	endswith(pattern, "/**")
	path == trim_suffix(pattern, "/**")
}

# command_matches(rule, argv) holds when the command rule is a prefix of the
# argv of one simple command, token by token: [git, log] matches
# git log -1 but neither git logx nor gitlog. Strings are never compared by
# prefix, and an empty rule matches nothing (it would match every command).
command_matches(rule, argv) if {
	is_array(rule)
	n := count(rule)
	n > 0
	n <= count(argv)
	array.slice(argv, 0, n) == rule
}

# host_matches(pattern, host) matches a host name against a glob with "." as
# the only separator: "*.github.com" covers api.github.com, but neither
# github.com nor a.b.github.com.
host_matches(pattern, host) if glob.match(pattern, ["."], host)
