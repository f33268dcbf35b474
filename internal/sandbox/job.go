package sandbox

import (
	"encoding/json"
	"os"
)

// Run is what runs in a jail: one program, or a payload of the helper
// (Main's payloads, e.g. the shell interpreter) with its data. Paths are
// the jail's.
type Run struct {
	// Program is the absolute path of the program; Args its argv
	// (Args[0] is the name it sees).
	Program string
	Args    []string
	// Env is the environment of the program or payload.
	Env []string
	// Dir is the working folder; "" means the workspace.
	Dir string
	// Payload, when set, names a payload of the helper that runs instead
	// of Program, given Data.
	Payload string
	Data    []byte
}

// Job is one run in a jail of its own.
type Job struct {
	Jail Jail
	Run  Run
	// Stdin is the run's standard input; nil means /dev/null.
	Stdin *os.File
	// Stdout receives its standard output; Stderr its standard error,
	// nil meaning Stdout (one stream).
	Stdout, Stderr *os.File
}

// Exit is how a jail ended.
type Exit struct {
	// Code is the run's exit status in the shell's convention (128+N for
	// a death by signal N); 126 when it never started.
	Code int
	// OOM reports that the jail's memory limit ended one of its
	// processes (only with a per-jail memory cgroup).
	OOM bool
	// Report is the payload's report line, unparsed: untrusted input.
	Report []byte
	// Failed reports that the run never started: the jail could not be
	// built or the run could not be started (Diagnostics says why).
	Failed bool
	// Diagnostics is what the helper said when something failed (a jail
	// that could not be built, a crash): for logs and audit, never for
	// the model.
	Diagnostics string
}

// jobSpec is what the gateway hands the helper through a sealed memory
// file: the jail to build and what to run in it. Nothing of it appears on
// any command line (the host's ps shows none of it, the jail's
// /proc/1/cmdline neither).
type jobSpec struct {
	Jail jailSpec `json:"jail"`
	// The run.
	Program string          `json:"program,omitempty"`
	Args    []string        `json:"args,omitempty"`
	Env     []string        `json:"env,omitempty"`
	Dir     string          `json:"dir"`
	Payload string          `json:"payload,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
	// Stderr is where the run's standard error goes: "stdout" (one
	// stream), "diag" (the helper's own fd 2, the caller's stderr) or
	// "own" (fd 6).
	Stderr string `json:"stderr"`
}

// jailSpec is the jail as the helper builds it: everything the gateway
// resolved on the host (which files may be mapped executable and with
// which rights), so that the helper only mounts.
type jailSpec struct {
	// Workspace is the host folder; MountAt where it appears in the jail.
	Workspace string `json:"workspace"`
	MountAt   string `json:"mount_at"`
	// WSWritable makes the whole workspace writable (hidden paths
	// excepted); otherwise only Writable globs are.
	WSWritable bool     `json:"ws_writable,omitempty"`
	Hide       []string `json:"hide,omitempty"`
	Writable   []string `json:"writable,omitempty"`
	// ExecFiles are files that stay mappable executable (each a bind
	// mount of its own): the approved programs, their interpreters and
	// the libraries they need outside ExecTrees. Paths under MountAt are
	// the workspace's.
	ExecFiles []string `json:"exec_files,omitempty"`
	// ExecTrees are folders mapped executable as a whole: the system
	// library folders and the exec_paths trees. NoExec are programs
	// inside them that are not (a noexec bind mount each).
	ExecTrees []string `json:"exec_trees,omitempty"`
	NoExec    []string `json:"no_exec,omitempty"`
	// ExecRights are the paths given Landlock's execute right.
	ExecRights []string `json:"exec_rights,omitempty"`
	// WorkspaceExec are workspace globs (relative) whose matches are
	// executable: exec_paths under MountAt.
	WorkspaceExec []string `json:"workspace_exec,omitempty"`
	// TmpExec keeps /tmp executable (exec_paths under /tmp).
	TmpExec bool   `json:"tmp_exec,omitempty"`
	Network bool   `json:"network,omitempty"`
	Limits  Limits `json:"limits"`
	// UID and GID are the user to become (a root gateway); -1 to stay.
	UID int `json:"uid"`
	GID int `json:"gid"`
}
