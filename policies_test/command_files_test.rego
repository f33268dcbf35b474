# The file resources of bash beyond its read arguments (issue 12): the paths
# its programs are known to write (access "write"), its working folder
# (access "list"), and hard-linked files (links > 1) for every tool.
package toolgate.command_files_test

import data.toolgate.authz
import data.toolgate.fixtures_test.argument
import data.toolgate.fixtures_test.command
import data.toolgate.fixtures_test.listing
import data.toolgate.fixtures_test.read
import data.toolgate.fixtures_test.request
import data.toolgate.fixtures_test.write

# outside_write is a written argument that leaves the workspace.
outside_write(path) := {"type": "file", "path": path, "access": "write", "outside": true}

# linked is a file resource of a file with n hard links.
linked(r, n) := object.union(r, {"links": n})

bash_call(tenant, roles, text, argv, files) := d if {
	doc := request(tenant, roles, "bash", array.concat([command(text, [argv])], files))
	d := authz.decision with input as doc
}

# Writes through bash meet the write globs, the protected globs and
# approval_write exactly as write-file does.
test_command_writes[note] if {
	some note, c in {
		"sort -oFILE into a protected file": {
			"tenant": "acme",
			"argv": ["sort", "-osecrets/db.env", "README.md"],
			"files": [argument("README.md"), write("secrets/db.env"), listing(".")],
			"reasons": [
				"access to secrets/db.env is not allowed: the path is protected",
				"write to secrets/db.env is not allowed for your roles",
			],
			"approval": false,
		},
		"sort --output= into a path that needs approval": {
			"tenant": "acme",
			"argv": ["sort", "--output=release/VERSION", "x"],
			"files": [write("release/VERSION"), argument("x"), listing(".")],
			"reasons": [
				"allowed: developer may list **",
				"allowed: developer may read **",
				"allowed: developer may run sort",
				"allowed: developer may use bash",
				"allowed: developer may write release/**",
				"approval required: writes to release/** need a human",
			],
			"approval": true,
		},
		"sort -o into a write glob": {
			"tenant": "acme",
			"argv": ["sort", "-o", "notes/out", "notes/a"],
			"files": [argument("notes/a"), write("notes/out"), listing(".")],
			"reasons": [
				"allowed: developer may list **",
				"allowed: developer may read **",
				"allowed: developer may run sort",
				"allowed: developer may use bash",
				"allowed: developer may write notes/**",
			],
			"approval": false,
		},
		"a write no write glob covers": {
			"tenant": "acme",
			"argv": ["sort", "-o", "README.md", "notes/a"],
			"files": [argument("notes/a"), write("README.md"), listing(".")],
			"reasons": ["write to README.md is not allowed for your roles"],
			"approval": false,
		},
		"a write outside the workspace, even with write **": {
			"tenant": "globex",
			"argv": ["cat", "/etc/passwd"],
			"files": [outside_write("/etc/passwd"), listing(".")],
			"reasons": ["command argument /etc/passwd is outside the workspace"],
			"approval": false,
		},
	}
	d := bash_call(c.tenant, ["developer"], concat(" ", c.argv), c.argv, c.files)
	d.reasons == c.reasons
	d.allow == startswith(c.reasons[0], "allowed")
	d.approval_required == c.approval
}

# The working folder is a listing: a protected one is denied, and it needs
# a read glob like any listing.
test_command_working_folder[note] if {
	some note, c in {
		"the workspace root": {
			"roles": ["developer"],
			"cwd": ".",
			"reasons": ["allowed: developer may list **", "allowed: developer may run ls", "allowed: developer may use bash"],
		},
		"a protected folder": {
			"roles": ["developer"],
			"cwd": "secrets",
			"reasons": ["access to secrets is not allowed: the path is protected"],
		},
		"a folder no read glob covers": {
			"roles": ["reader"],
			"cwd": ".",
			"reasons": ["listing of . is not allowed for your roles"],
		},
		"a folder a narrow read glob covers": {
			"roles": ["reader"],
			"cwd": "src",
			"reasons": ["allowed: reader may list src/**", "allowed: reader may run ls", "allowed: reader may use bash"],
		},
	}
	cmd := object.union(command("ls", [["ls"]]), {"cwd": c.cwd})
	d := authz.decision with input as request("acme", c.roles, "bash", [cmd, listing(c.cwd)])
		with data.toolgate.tenants.acme.roles.reader as {"tools": ["bash"], "read": ["src/**"], "commands": {"allow": [["ls"]]}}
	d.reasons == c.reasons
}

# A file with several hard links is denied for every tool and access kind,
# protected globs or not: its other name may be a protected file.
test_hard_links[note] if {
	some note, c in {
		"read-file": {"tool": "read-file", "rs": [linked(read("notes/innocent"), 2)]},
		"write-file": {"tool": "write-file", "rs": [linked(write("notes/innocent"), 2)]},
		"edit-file": {"tool": "edit-file", "rs": [linked(write("notes/innocent"), 2)]},
		"grep of a file": {"tool": "grep", "rs": [linked(read("notes/innocent"), 2)]},
		"a bash argument": {"tool": "bash", "rs": [
			command("cat notes/innocent", [["cat", "notes/innocent"]]),
			linked(argument("notes/innocent"), 2),
			listing("."),
		]},
		"a bash write": {"tool": "bash", "rs": [
			command("sort -o notes/innocent x", [["sort", "-o", "notes/innocent", "x"]]),
			linked(write("notes/innocent"), 2),
			argument("x"),
			listing("."),
		]},
	}
	some tenant in ["acme", "globex"]
	d := authz.decision with input as request(tenant, ["developer"], c.tool, c.rs)
	not d.allow
	d.reasons == ["access to notes/innocent is not allowed: the file has 2 hard links"]
}

# links 1, or no links member, is an ordinary file.
test_single_link_is_ordinary[note] if {
	some note, r in {
		"no links member": read("notes/a"),
		"links 1": linked(read("notes/a"), 1),
	}
	d := authz.decision with input as request("acme", ["developer"], "read-file", [r])
	d.allow
}

# redirect is the file resource of a redirection's target.
redirect(path, access) := {"type": "file", "path": path, "access": access, "redirect": true}

# Redirection targets are judged like the file tools' targets (issue 21):
# a read like read-file, a write like write-file; a command whose only
# constructs are redirections and here-documents hides nothing else.
test_redirect_targets[note] if {
	some note, c in {
		"< a protected file": {
			"tenant": "acme", "text": "wc -l < secrets/db.env", "argv": ["wc", "-l"],
			"files": [redirect("secrets/db.env", "read"), listing(".")],
			"constructs": ["redirect"],
			"allow": false, "approval": false,
			"reason": "access to secrets/db.env is not allowed: the path is protected",
		},
		"> a read-only path": {
			"tenant": "acme", "text": "echo x > README.md", "argv": ["echo", "x"],
			"files": [redirect("README.md", "write"), listing(".")],
			"constructs": ["redirect"],
			"allow": false, "approval": false,
			"reason": "write to README.md is not allowed for your roles",
		},
		">> a protected path": {
			"tenant": "acme", "text": "echo y >> secrets/db.env", "argv": ["echo", "y"],
			"files": [object.union(redirect("secrets/db.env", "write"), {"mode": "append"}), listing(".")],
			"constructs": ["redirect"],
			"allow": false, "approval": false,
			"reason": "access to secrets/db.env is not allowed: the path is protected",
		},
		"> a write path runs without a human": {
			"tenant": "acme", "text": "sort in.txt > notes/out", "argv": ["sort", "in.txt"],
			"files": [argument("in.txt"), redirect("notes/out", "write"), listing(".")],
			"constructs": ["redirect"],
			"allow": true, "approval": false,
			"reason": "allowed: developer may write notes/**",
		},
		"a here-document into a write path": {
			"tenant": "acme", "text": "cat > notes/a <<EOF\nx\nEOF", "argv": ["cat"],
			"files": [redirect("notes/a", "write"), listing(".")],
			"constructs": ["heredoc", "redirect"],
			"allow": true, "approval": false,
			"reason": "allowed: developer may run cat",
		},
		"> a path that needs approval": {
			"tenant": "acme", "text": "echo 2 > release/VERSION", "argv": ["echo", "2"],
			"files": [redirect("release/VERSION", "write"), listing(".")],
			"constructs": ["redirect"],
			"allow": true, "approval": true,
			"reason": "approval required: writes to release/** need a human",
		},
		"< a file a viewer-like role cannot read": {
			"tenant": "globex", "text": "cat < ../x", "argv": ["cat"],
			"files": [object.union(redirect("../x", "read"), {"outside": true}), listing(".")],
			"constructs": ["redirect"],
			"allow": false, "approval": false,
			"reason": "command argument ../x is outside the workspace",
		},
		"a redirect beside an opaque construct still needs a human": {
			"tenant": "acme", "text": "echo $(pwd) > notes/d", "argv": ["echo", "$(pwd)"],
			"files": [redirect("notes/d", "write"), listing(".")],
			"constructs": ["command_substitution", "redirect"],
			"allow": true, "approval": true,
			"reason": "approval required: commands with shell constructs (command_substitution) need a human",
		},
	}
	doc := request(c.tenant, ["developer"], "bash", array.concat([object.union(command(c.text, [c.argv]), {"plain": false, "constructs": c.constructs})], c.files))
	d := authz.decision with input as doc
	d.allow == c.allow
	d.approval_required == c.approval
	c.reason in d.reasons
}

test_redirect_access_must_be_known if {
	doc := request("acme", ["developer"], "bash", [command("cat", [["cat"]]), {"type": "file", "path": "notes/a", "access": "exec", "redirect": true}, listing(".")])
	d := authz.decision with input as doc
	d.allow == false
	"a command's file resources must have access command, read, write or list" in d.reasons
}
