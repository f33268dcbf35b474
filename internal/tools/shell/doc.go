// Package shell implements the bash tool and the process tools that manage
// the programs bash starts in the background: process-output,
// process-input and process-stop.
//
// # What policy sees
//
// Prepare parses the command once with mvdan.cc/sh/v3/syntax (Bash
// variant) into a "command" resource: the command as given, its segments
// (the argv of every simple command), whether it is plain, the constructs
// that made it not plain, the confined working folder and whether it runs
// in the background. A command is plain only when every statement is a call
// of literal words (unquoted literals without glob, tilde or brace syntax,
// single-quoted, $'…', or double-quoted without expansions) joined by &&,
// ||, ;, | or newlines. For a command that is not plain, segments lists
// every simple command found anywhere in the program (inside loops,
// functions, substitutions…) in source order; a word that is not a literal
// appears as its source text, e.g. ["echo","$(whoami)"].
//
// # What runs
//
// Run executes the parsed *syntax.File that prepare built — the command
// string is never parsed again — with mvdan.cc/sh/v3/interp. Every program
// the interpreter would execute passes through an exec handler that checks
// its argv against the approved segments: literal words must be equal;
// filename-generation words (globs, brace expansions, ~) may expand the way
// the shell expands them (a glob word matches one or more fields that match
// its pattern); any other expansion ($VAR, $(…), arithmetic) never matches,
// so a program whose argv depends on one is refused. A refused program does
// not run: the output gets "[refused: a command that policy did not
// approve]", its status is 126 and data.refused lists its argv[0].
//
// Interp builtins (echo, printf, test, cd, read…) never reach the exec
// handler and run inside the gateway process; a call handler, which sees
// every call, refuses eval, source, ".", exec, trap, builtin and command
// unless that call is itself an approved segment (and code they run is
// checked again). Redirect targets and sourced files are opened through the
// tenant's os.Root (escapes fail with "outside the workspace", /dev/null is
// allowed) and globbing only lists folders inside the workspace. Programs
// are resolved against the fixed PATH of the allowlisted environment, not
// one the script assigned, and a program started while the interpreter's
// folder lies outside the workspace is refused.
//
// Not intercepted: children of an approved program (what xargs, make or
// sh -c run) — that is what the OS confinement hook (Options.Confine) is
// for; builtins that only look (test -e and cd may stat paths outside the
// workspace; pwd and $HOME print the workspace's host path, as any shell
// would); a script without a shebang line is not run as a shell script (it
// fails with status 126) because that would bypass the handlers.
//
// # Results
//
// The timeout is min(timeout_ms, the policy-tightened call limit, the
// caller's deadline) less a tenth (at most 1 s) kept to kill and report.
// Combined stdout+stderr is capped at Limits.MaxOutputBytes (or the
// tightened limit), keeping head and tail around "[... N bytes omitted
// ...]"; "[exit code: N]" ends the content. A non-zero exit is an ordinary
// result; a timeout is one too, with "[timed out after Xs; process group
// killed]", exit code 124 and data.timed_out. Data: exit_code, truncated,
// timed_out, refused (argv[0] of each refused program), refused_files
// (refused opens).
//
// # Processes
//
// Every executed program gets its own process group. When its leader exits
// the rest of the group is killed, so nothing a call started outlives it;
// on timeout or cancel the whole group is killed. Background commands run
// under a Supervisor scoped to (tenant, session), with quotas, a retained
// output ring addressed by absolute byte cursors, stdin fed by
// process-input, and stop escalating SIGTERM → SIGKILL. Close ends every
// process tree.
package shell
