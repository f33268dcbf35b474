package shell

import (
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/wspath"
)

func TestCommandResourceIsExact(t *testing.T) {
	type seg = []any
	cases := []struct {
		name       string
		command    string
		segments   []any
		plain      bool
		constructs []any
	}{
		{"one call", "git log -1", []any{seg{"git", "log", "-1"}}, true, []any{}},
		{"semicolon splits into two plain segments", "git log; rm -rf x",
			[]any{seg{"git", "log"}, seg{"rm", "-rf", "x"}}, true, []any{}},
		{"and-list splits", "ls && curl http://x", []any{seg{"ls"}, seg{"curl", "http://x"}}, true, []any{}},
		{"or-list splits", "false || true", []any{seg{"false"}, seg{"true"}}, true, []any{}},
		{"quoted semicolon is one word", `echo "a;b"`, []any{seg{"echo", "a;b"}}, true, []any{}},
		{"single-quoted pipe is one word", `echo 'a|b'`, []any{seg{"echo", "a|b"}}, true, []any{}},
		{"escaped operator is a literal", `echo a\;b`, []any{seg{"echo", "a;b"}}, true, []any{}},
		{"ansi-c quote is a literal", `printf $'a\tb'`, []any{seg{"printf", "a\tb"}}, true, []any{}},
		{"pipeline of three", "a | b | c", []any{seg{"a"}, seg{"b"}, seg{"c"}}, true, []any{}},
		{"multi-line script", "git status\ngit diff --stat\n\nwc -l README.md",
			[]any{seg{"git", "status"}, seg{"git", "diff", "--stat"}, seg{"wc", "-l", "README.md"}}, true, []any{}},
		{"test brackets are plain words", "[ -f go.mod ] && echo yes",
			[]any{seg{"[", "-f", "go.mod", "]"}, seg{"echo", "yes"}}, true, []any{}},
		{"eval is plain but its own segment", `eval "rm -rf x"`, []any{seg{"eval", "rm -rf x"}}, true, []any{}},

		{"command substitution", "echo $(whoami)", []any{seg{"echo", "$(whoami)"}, seg{"whoami"}}, false,
			[]any{"command_substitution"}},
		{"backticks", "echo `whoami`", []any{seg{"echo", "`whoami`"}, seg{"whoami"}}, false,
			[]any{"command_substitution"}},
		{"substitution inside double quotes", `echo "user: $(id -u)"`,
			[]any{seg{"echo", `"user: $(id -u)"`}, seg{"id", "-u"}}, false, []any{"command_substitution"}},
		{"parameter", "echo $HOME", []any{seg{"echo", "$HOME"}}, false, []any{"parameter_expansion"}},
		{"redirect", "ls > out", []any{seg{"ls"}}, false, []any{"redirect"}},
		{"dup redirect", "ls 2>&1", []any{seg{"ls"}}, false, []any{"redirect"}},
		{"input redirect", "wc -l < in", []any{seg{"wc", "-l"}}, false, []any{"redirect"}},
		{"pipe-all", "ls |& cat", []any{seg{"ls"}, seg{"cat"}}, false, []any{"redirect"}},
		{"here-doc", "cat <<EOF\nx\nEOF", []any{seg{"cat"}}, false, []any{"heredoc"}},
		{"here-doc text is not a glob", "cat <<EOF\n* ? [a]\nEOF", []any{seg{"cat"}}, false, []any{"heredoc"}},
		{"here-doc expansions are found", "cat <<EOF\n$(ls *.go) $HOME\nEOF", []any{seg{"cat"}, seg{"ls", "*.go"}}, false,
			[]any{"command_substitution", "glob", "heredoc", "parameter_expansion"}},
		{"here-string", "cat <<< x", []any{seg{"cat"}}, false, []any{"heredoc"}},
		{"subshell", "(ls)", []any{seg{"ls"}}, false, []any{"subshell"}},
		{"block", "{ ls; }", []any{seg{"ls"}}, false, []any{"block"}},
		{"background", "sleep 1 &", []any{seg{"sleep", "1"}}, false, []any{"background"}},
		{"assignment prefix", "A=1 ls", []any{seg{"ls"}}, false, []any{"assignment"}},
		{"bare assignment", "A=1", []any{}, false, []any{"assignment"}},
		{"export", "export A=1", []any{}, false, []any{"assignment"}},
		{"function", "f() { ls; }", []any{seg{"ls"}}, false, []any{"block", "function"}},
		{"glob star", "ls *.go", []any{seg{"ls", "*.go"}}, false, []any{"glob"}},
		{"glob question mark", "ls a?.txt", []any{seg{"ls", "a?.txt"}}, false, []any{"glob"}},
		{"glob bracket", "ls [ab].txt", []any{seg{"ls", "[ab].txt"}}, false, []any{"glob"}},
		{"tilde", "ls ~", []any{seg{"ls", "~"}}, false, []any{"tilde"}},
		{"brace expansion", "echo {a,b}", []any{seg{"echo", "{a,b}"}}, false, []any{"brace_expansion"}},
		{"if", "if true; then ls; fi", []any{seg{"true"}, seg{"ls"}}, false, []any{"if"}},
		{"for loop with variable program", "for c in echo id; do $c hi; done",
			[]any{seg{"$c", "hi"}}, false, []any{"loop", "parameter_expansion"}},
		{"while loop", "while false; do ls; done", []any{seg{"false"}, seg{"ls"}}, false, []any{"loop"}},
		{"case", "case x in x) ls;; esac", []any{seg{"ls"}}, false, []any{"case"}},
		{"double brackets", "[[ -f x ]] && ls", []any{seg{"ls"}}, false, []any{"test"}},
		{"arithmetic", "echo $((1+2))", []any{seg{"echo", "$((1+2))"}}, false, []any{"arithmetic"}},
		{"process substitution", "diff <(ls) b", []any{seg{"diff", "<(ls)", "b"}, seg{"ls"}}, false,
			[]any{"process_substitution"}},
		{"negation", "! ls", []any{seg{"ls"}}, false, []any{"other"}},
		{"constructs are listed once, sorted", "echo $A $(ls) > x; echo $B",
			[]any{seg{"echo", "$A", "$(ls)"}, seg{"ls"}, seg{"echo", "$B"}}, false,
			[]any{"command_substitution", "parameter_expansion", "redirect"}},
		{"nested anywhere", "f() { echo `ls *.go`; }",
			[]any{seg{"echo", "`ls *.go`"}, seg{"ls", "*.go"}}, false,
			[]any{"block", "command_substitution", "function", "glob"}},
	}
	sh := newTestShell(t, Options{})
	env, _ := testEnv(t, "acme", "s-1")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := mustPrepare(t, bashTool(sh), env, map[string]any{"command": c.command})
			r := commandResource(t, plan)
			want := map[string]any{
				"type": "command", "command": c.command, "segments": c.segments, "plain": c.plain,
				"constructs": c.constructs, "cwd": ".", "background": false,
			}
			if !reflect.DeepEqual(map[string]any(r), want) {
				t.Errorf("resource\n got %#v\nwant %#v", map[string]any(r), want)
			}
		})
	}
}

func TestPrepareAppliesDefaults(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, _ := testEnv(t, "acme", "s-1")
	plan := mustPrepare(t, bashTool(sh), env, map[string]any{"command": "true"})
	want := map[string]any{"command": "true", "timeout_ms": float64(30000), "background": false, "cwd": "."}
	if !reflect.DeepEqual(plan.Args, want) {
		t.Errorf("args = %#v, want %#v", plan.Args, want)
	}
}

func TestPrepareRejectsBadCommands(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, dir := testEnv(t, "acme", "s-1")
	writeFiles(t, dir, map[string]string{"file.txt": "x"})
	noSession := otherEnv(env, "acme", "")
	cases := []struct {
		name          string
		env           bool
		args          map[string]any
		pointer, rule string
	}{
		{"unterminated quote", true, map[string]any{"command": `echo "a`}, "/command", "does not parse as a shell command"},
		{"dangling operator", true, map[string]any{"command": "ls &&"}, "/command", "does not parse as a shell command"},
		{"only a comment", true, map[string]any{"command": "# nothing"}, "/command", "contains no command"},
		{"cwd climbing out", true, map[string]any{"command": "ls", "cwd": "../x"}, "/cwd", "must stay inside the workspace"},
		{"absolute cwd", true, map[string]any{"command": "ls", "cwd": "/etc"}, "/cwd", "must stay inside the workspace"},
		{"missing cwd", true, map[string]any{"command": "ls", "cwd": "nope"}, "/cwd", "folder does not exist"},
		{"cwd is a file", true, map[string]any{"command": "ls", "cwd": "file.txt"}, "/cwd", "must be a folder"},
		{"cwd below a file", true, map[string]any{"command": "ls", "cwd": "file.txt/x"}, "/cwd", wspath.RuleNotDirComp},
		{"cwd climbing out below a missing folder", true, map[string]any{"command": "ls", "cwd": "nope/../../x"}, "/cwd", "must stay inside the workspace"},
		{"cwd with a component over 255 bytes", true, map[string]any{"command": "ls", "cwd": strings.Repeat("a", 256)}, "/cwd", wspath.RuleTooLong},
		{"cwd over 4095 bytes", true, map[string]any{"command": "ls", "cwd": strings.Repeat("./", 2048)}, "/cwd", wspath.RuleTooLong},
		{"timeout over the ceiling", true, map[string]any{"command": "ls", "timeout_ms": float64(120001)}, "/timeout_ms", "between"},
		{"background without a session", false, map[string]any{"command": "ls", "background": true}, "", "requires a session_id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := env
			if !c.env {
				e = noSession
			}
			_, err := bashTool(sh).Prepare(t.Context(), e, c.args)
			argErr(t, err, c.pointer, c.rule)
		})
	}
}

func TestCwdSymlinkEscapeIsRefused(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, dir := testEnv(t, "acme", "s-1")
	outside := t.TempDir()
	if err := symlinkAt(outside, dir, "out"); err != nil {
		t.Fatal(err)
	}
	if err := symlinkAt("../..", dir, "up"); err != nil {
		t.Fatal(err)
	}
	for _, cwd := range []string{"out", "up"} {
		_, err := bashTool(sh).Prepare(t.Context(), env, map[string]any{"command": "ls", "cwd": cwd})
		argErr(t, err, "/cwd", "must stay inside the workspace")
	}
}
