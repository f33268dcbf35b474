package toolgate.commands_test

import data.toolgate.authz
import data.toolgate.fixtures_test.argument
import data.toolgate.fixtures_test.command
import data.toolgate.fixtures_test.outside
import data.toolgate.fixtures_test.request
import data.toolgate.fixtures_test.shell_command

# bash evaluates the decision for a bash call by alice.
bash(tenant, roles, resource) := d if {
	d := authz.decision with input as request(tenant, roles, "bash", [resource])
}

# The bypass corpus of issue 3, as the resources the shell tool produces.
test_plain_commands[note] if {
	some note, c in {
		"an allowed command": {
			"r": command("git status", [["git", "status"]]),
			"allow": true, "approval": false,
		},
		"a rule matches as a prefix of the argv": {
			"r": command("git log -1 | wc -l", [["git", "log", "-1"], ["wc", "-l"]]),
			"allow": true, "approval": false,
		},
		"a quoted separator is one word, not a second command": {
			"r": command(`echo "a;b"`, [["echo", "a;b"]]),
			"allow": true, "approval": false,
		},
		"git push needs a human": {
			"r": command("git push origin main", [["git", "push", "origin", "main"]]),
			"allow": true, "approval": true,
		},
		"one segment needing approval holds the whole call": {
			"r": command("git status && git commit -m x", [["git", "status"], ["git", "commit", "-m", "x"]]),
			"allow": true, "approval": true,
		},
		"a forbidden segment after an allowed one denies": {
			"r": command("git log; rm -rf x", [["git", "log"], ["rm", "-rf", "x"]]),
			"allow": false, "approval": false,
		},
		"a forbidden command after && denies": {
			"r": command("ls && curl https://example.com", [["ls"], ["curl", "https://example.com"]]),
			"allow": false, "approval": false,
		},
		"forbidden beats approval": {
			"r": command("git push; sudo ls", [["git", "push"], ["sudo", "ls"]]),
			"allow": false, "approval": false,
		},
		"[git, log] does not match git logx": {
			"r": command("git logx", [["git", "logx"]]),
			"allow": false, "approval": false,
		},
		"[git, log] does not match gitlog": {
			"r": command("gitlog", [["gitlog"]]),
			"allow": false, "approval": false,
		},
		"[git, status] does not match bare git": {
			"r": command("git", [["git"]]),
			"allow": false, "approval": false,
		},
		"a command no rule names": {
			"r": command("make all", [["make", "all"]]),
			"allow": false, "approval": false,
		},
		"rm with split flags is not forbidden but not allowed either": {
			"r": command("rm -r -f x", [["rm", "-r", "-f", "x"]]),
			"allow": false, "approval": false,
		},
		"a background command follows the same rules": {
			"r": object.union(command("sleep 5", [["sleep", "5"]]), {"background": true}),
			"allow": true, "approval": false,
		},
		"a forbidden background command is denied": {
			"r": object.union(command("dd if=/dev/zero", [["dd", "if=/dev/zero"]]), {"background": true}),
			"allow": false, "approval": false,
		},
	}
	d := bash("acme", ["developer"], c.r)
	d.allow == c.allow
	d.approval_required == c.approval
}

test_command_denials_name_the_command[note] if {
	some note, c in {
		"forbidden wins in a sequence": {
			"r": command("git log; rm -rf x", [["git", "log"], ["rm", "-rf", "x"]]),
			"message": "command rm -rf x is forbidden",
		},
		"forbidden curl": {
			"r": command("ls && curl https://example.com", [["ls"], ["curl", "https://example.com"]]),
			"message": "command curl https://example.com is forbidden",
		},
		"unmatched": {
			"r": command("git logx", [["git", "logx"]]),
			"message": "command git logx is not allowed for your roles",
		},
		"no segments": {
			"r": command("", []),
			"message": "the command runs nothing this policy can check",
		},
		"segments left out": {
			"r": object.remove(command("ls", []), ["segments"]),
			"message": "the command runs nothing this policy can check",
		},
		"segments that are not a list": {
			"r": command("ls", "ls"),
			"message": "the command runs nothing this policy can check",
		},
		"an empty segment": {
			"r": command("ls", [["ls"], []]),
			"message": "a command segment is not a list of words",
		},
		"a segment that is a string": {
			"r": command("ls", ["ls"]),
			"message": "a command segment is not a list of words",
		},
		"a segment with a word that is not a string": {
			"r": command("sleep 1", [["sleep", 1]]),
			"message": "a command segment is not a list of words",
		},
	}
	d := bash("acme", ["developer"], c.r)
	d.allow == false
	d.message == c.message
}

# make_with(n) is a segment of n characters: make and one long word.
make_with(n) := ["make", concat("", [x | some _ in numbers.range(1, n - 5); x := "a"])]

test_commands_are_named_in_at_most_80_characters[note] if {
	some note, c in {
		"80 characters are kept": {"n": 80, "want": concat(" ", make_with(80))},
		"81 are cut to 80": {"n": 81, "want": concat("", [substring(concat(" ", make_with(81)), 0, 77), "..."])},
		"105 are cut to 80": {"n": 105, "want": concat("", [substring(concat(" ", make_with(105)), 0, 77), "..."])},
	}
	d := bash("acme", ["developer"], command("make", [make_with(c.n)]))
	named := trim_suffix(trim_prefix(d.message, "command "), " is not allowed for your roles")
	named == c.want
	count(named) == min({80, c.n})
}

test_shell_constructs_per_tenant[note] if {
	some note, c in {
		"acme holds a command substitution for a human": {
			"tenant": "acme",
			"r": shell_command("echo $(git status)", [["echo", "$(git status)"], ["git", "status"]], ["command_substitution"]),
			"allow": true, "approval": true,
		},
		"acme holds backticks for a human": {
			"tenant": "acme",
			"r": shell_command("echo `pwd`", [["echo", "`pwd`"], ["pwd"]], ["command_substitution"]),
			"allow": true, "approval": true,
		},
		"globex denies a command substitution": {
			"tenant": "globex",
			"r": shell_command("echo $(ls)", [["echo", "$(ls)"], ["ls"]], ["command_substitution"]),
			"allow": false, "approval": false,
		},
		"acme still denies a forbidden command inside a substitution": {
			"tenant": "acme",
			"r": shell_command("echo $(rm -rf x)", [["echo", "$(rm -rf x)"], ["rm", "-rf", "x"]], ["command_substitution"]),
			"allow": false, "approval": false,
		},
		"acme still denies a command no rule names": {
			"tenant": "acme",
			"r": shell_command("$CMD x", [["$CMD", "x"]], ["parameter_expansion"]),
			"allow": false, "approval": false,
		},
		"a resource that does not say it is plain is not": {
			"tenant": "globex",
			"r": object.remove(command("ls", [["ls"]]), ["plain"]),
			"allow": false, "approval": false,
		},
	}
	d := bash(c.tenant, ["developer"], c.r)
	d.allow == c.allow
	d.approval_required == c.approval
}

test_shell_construct_reasons[note] if {
	some note, c in {
		"globex names the construct": {
			"tenant": "globex",
			"r": shell_command("echo $(ls)", [["echo", "$(ls)"], ["ls"]], ["command_substitution"]),
			"reason": "commands with shell constructs (command_substitution) are not allowed",
		},
		"globex names every construct but the transparent ones": {
			"tenant": "globex",
			"r": shell_command("ls $X > out 2>&1 &", [["ls", "$X"]], ["background", "parameter_expansion", "redirect"]),
			"reason": "commands with shell constructs (background, parameter_expansion) are not allowed",
		},
		"a resource without constructs names other": {
			"tenant": "globex",
			"r": object.remove(shell_command("ls", [["ls"]], []), ["constructs"]),
			"reason": "commands with shell constructs (other) are not allowed",
		},
		"acme's approval names the construct": {
			"tenant": "acme",
			"r": shell_command("echo `pwd`", [["echo", "`pwd`"], ["pwd"]], ["command_substitution"]),
			"reason": "approval required: commands with shell constructs (command_substitution) need a human",
		},
	}
	c.reason in bash(c.tenant, ["developer"], c.r).reasons
}

test_shell_constructs_are_denied_when_the_tenant_does_not_say if {
	d := bash("initech", ["developer"], shell_command("echo $(ls)", [["echo", "$(ls)"], ["ls"]], ["command_substitution"])) with data.toolgate.tenants.initech as {"roles": {"developer": {"tools": ["bash"], "commands": {"allow": [["echo"], ["ls"]]}}}}
	d.allow == false
	d.reasons == ["commands with shell constructs (command_substitution) are not allowed"]
}

test_globex_rules[note] if {
	some note, c in {
		"ls is allowed": {"r": command("ls -la", [["ls", "-la"]]), "allow": true},
		"true is a word, not a boolean": {"r": command("true", [["true"]]), "allow": true},
		"git is not": {"r": command("git status", [["git", "status"]]), "allow": false},
		"git push is not held, it is denied": {"r": command("git push", [["git", "push"]]), "allow": false},
	}
	d := bash("globex", ["developer"], c.r)
	d.allow == c.allow
	d.approval_required == false
}

test_strictest_kind_across_roles[note] if {
	some note, c in {
		"one role's forbidden beats another's allow": {
			"r": command("git push", [["git", "push"]]),
			"allow": false, "approval": false,
		},
		"one role's approval beats another's allow": {
			"r": command("git tag v1", [["git", "tag", "v1"]]),
			"allow": true, "approval": true,
		},
		"allow from either role": {
			"r": command("git status", [["git", "status"]]),
			"allow": true, "approval": false,
		},
	}
	d := bash("acme", ["a", "b"], c.r) with data.toolgate.tenants.acme.roles as {
		"a": {"tools": ["bash"], "commands": {"allow": [["git"]]}},
		"b": {"tools": ["bash"], "commands": {"approval": [["git", "tag"]], "forbidden": [["git", "push"]]}},
	}
	d.allow == c.allow
	d.approval_required == c.approval
}

test_rules_that_are_not_word_lists_match_nothing[note] if {
	some note, rule in {
		"an empty rule": [],
		"a string rule": "ls",
	}
	d := bash("acme", ["a"], command("ls", [["ls"]])) with data.toolgate.tenants.acme.roles as {"a": {"tools": ["bash"], "commands": {"allow": [rule]}}}
	d.message == "command ls is not allowed for your roles"
}

test_allowed_command_decision if {
	d := bash("acme", ["developer"], command("git log -1 | wc -l", [["git", "log", "-1"], ["wc", "-l"]]))
	d == {
		"allow": true,
		"approval_required": false,
		"reasons": ["allowed: developer may run git log", "allowed: developer may run wc", "allowed: developer may use bash"],
		"obligations": {
			"timeout_ms": 30000,
			"write_paths": [".cache/**", "docs/**", "notes/**", "src/**"],
			"exec_paths": ["/usr/lib/git-core/**"],
			"exclude_paths": ["secrets", "secrets/**", "**/.env", ".env"],
		},
	}
}

test_approval_decision if {
	d := bash("acme", ["developer"], command("git push origin", [["git", "push", "origin"]]))
	d == {
		"allow": true,
		"approval_required": true,
		"reasons": [
			"allowed: developer may run git push after approval",
			"allowed: developer may use bash",
			"approval required: command git push origin needs a human",
		],
		"obligations": {
			"timeout_ms": 30000,
			# A call a human approves may write where writes need approval.
			"write_paths": [".cache/**", "docs/**", "notes/**", "release/**", "src/**"],
			"exec_paths": ["/usr/lib/git-core/**"],
			"exclude_paths": ["secrets", "secrets/**", "**/.env", ".env"],
		},
	}
}

# The jail's obligations for every bash call: protected paths hidden, writes
# only where the caller's roles write (approval globs only for a held call),
# and what the call's programs may start besides themselves.
test_jail_obligations[note] if {
	some note, c in {
		"sort writes only to the role's write globs": {
			"tenant": "acme", "cmd": command("sort a", [["sort", "a"]]),
			"want": {"write_paths": [".cache/**", "docs/**", "notes/**", "src/**"], "exec_paths": [], "exclude_paths": ["secrets", "secrets/**", "**/.env", ".env"]},
		},
		"go test may start the toolchain and its test binaries": {
			"tenant": "acme", "cmd": command("go test ./...", [["go", "test", "./..."]]),
			"want": {"write_paths": [".cache/**", "docs/**", "notes/**", "src/**"], "exec_paths": ["/tmp/**", "/usr/lib/go/**", "/usr/local/go/**"], "exclude_paths": ["secrets", "secrets/**", "**/.env", ".env"]},
		},
		"a tenant without protected paths hides nothing, writes everywhere": {
			"tenant": "globex", "cmd": command("ls", [["ls"]]),
			"want": {"write_paths": ["**"], "exec_paths": []},
		},
	}
	d := bash(c.tenant, ["developer"], c.cmd)
	d.allow
	object.remove(d.obligations, ["timeout_ms"]) == c.want
}

# A role without write globs gets an empty write_paths: present, so the
# jail makes the whole workspace read-only.
test_jail_read_only_role if {
	d := bash("acme", ["a"], command("ls", [["ls"]])) with data.toolgate.tenants.acme.roles as {"a": {"tools": ["bash"], "commands": {"allow": [["ls"]]}}}
	d.allow
	d.obligations.write_paths == []
}

# Other tools carry no jail obligations.
test_no_jail_for_other_tools if {
	d := authz.decision with input as request("acme", ["developer"], "read-file", [{"type": "file", "path": "notes/a.md", "access": "read"}])
	d.allow
	not d.obligations.write_paths
}

test_viewer_may_not_run_commands if {
	d := bash("acme", ["viewer"], command("ls", [["ls"]]))
	d.allow == false
	d.message == "command ls is not allowed for your roles"
	"tool bash is not available to you" in d.reasons
}

test_background_commands_carry_no_timeout[note] if {
	some note, c in {
		"a foreground command is bounded": {"tool": "bash", "args": {"command": "ls", "background": false}, "want": {"timeout_ms": 30000}},
		"a background command is bounded by the shell tool": {"tool": "bash", "args": {"command": "ls", "background": true}, "want": {}},
		"only bash's background counts": {"tool": "grep", "args": {"background": true}, "want": {"timeout_ms": 30000}},
	}
	r := object.union(command("ls", [["ls"]]), {"background": c.args.background})
	resources := {"bash": [r], "grep": []}[c.tool]
	doc := object.union(request("acme", ["developer"], c.tool, resources), {"args": c.args})
	d := authz.decision with input as doc
	d.allow
	object.remove(d.obligations, ["write_paths", "exec_paths", "exclude_paths"]) == c.want
}

# bash also carries a file resource (access "command") for each literal
# argument, resolved like the file tools resolve paths; the file rules judge
# them like reads.
test_command_arguments[note] if {
	some note, c in {
		"an argument inside the workspace": {
			"roles": ["developer"],
			"rs": [command("cat notes/a.md", [["cat", "notes/a.md"]]), argument("notes/a.md")],
			"reasons": ["allowed: developer may read **", "allowed: developer may run cat", "allowed: developer may use bash"],
		},
		"a protected argument": {
			"roles": ["developer"],
			"rs": [command("cat secrets/db.env", [["cat", "secrets/db.env"]]), argument("secrets/db.env")],
			"reasons": ["access to secrets/db.env is not allowed: the path is protected"],
		},
		"a protected argument found through cd": {
			"roles": ["developer"],
			"rs": [command("cd src && cat .env", [["cd", "src"], ["cat", ".env"]]), argument("src"), argument(".env"), argument("src/.env")],
			"reasons": [
				"access to .env is not allowed: the path is protected",
				"access to src/.env is not allowed: the path is protected",
				"command cd src is not allowed for your roles",
			],
		},
		"an absolute argument": {
			"roles": ["developer"],
			"rs": [command("cat /etc/passwd", [["cat", "/etc/passwd"]]), outside("/etc/passwd")],
			"reasons": ["command argument /etc/passwd is outside the workspace"],
		},
		"an argument that climbs out": {
			"roles": ["developer"],
			"rs": [command("cat ../../x", [["cat", "../../x"]]), outside("../../x")],
			"reasons": ["command argument ../../x is outside the workspace"],
		},
		"an argument no read glob covers": {
			"roles": ["reader"],
			"rs": [command("cat notes/a.md", [["cat", "notes/a.md"]]), argument("notes/a.md")],
			"reasons": ["command argument notes/a.md is not readable for your roles"],
		},
		"an argument a narrow read glob covers": {
			"roles": ["reader"],
			"rs": [command("cat src/a.go", [["cat", "src/a.go"]]), argument("src/a.go")],
			"reasons": ["allowed: reader may read src/**", "allowed: reader may run cat", "allowed: reader may use bash"],
		},
	}
	d := authz.decision with input as request("acme", c.roles, "bash", c.rs)
		with data.toolgate.tenants.acme.roles.reader as {"tools": ["bash"], "read": ["src/**"], "commands": {"allow": [["cat"]]}}
	d.reasons == c.reasons
}

test_bash_file_resources_must_have_a_known_access[note] if {
	some note, r in {
		"an access bash never gives": {"type": "file", "path": "src/a.go", "access": "execute"},
		"no access": {"type": "file", "path": "src/a.go"},
	}
	d := authz.decision with input as request("acme", ["developer"], "bash", [command("cat src/a.go", [["cat", "src/a.go"]]), r])
	d.reasons == ["a command's file resources must have access command, read, write or list"]
}

test_only_bash_carries_arguments if {
	d := authz.decision with input as request("acme", ["developer"], "read-file", [argument("src/a.go")])
	d.reasons == ["file access must be read, list or write"]
}

test_bash_carries_only_command_and_file_resources if {
	d := bash("acme", ["developer"], {"type": "url", "host": "example.com"})
	d.reasons == ["the call carries no command resource", "this policy only allows command and file resources"]
}
