package command

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"mvdan.cc/sh/v3/syntax"
)

// Spec is what the interpreter in the jail runs: the command exactly as it
// was decided, and what the decision covers. The gateway writes it; the
// jail's interpreter parses Source again with the same parser and refuses
// to run anything unless its own parse prints to Digest and yields
// Segments: nothing is parsed twice differently.
//
// Paths are the jail's: Workspace is where the tenant's workspace is
// mounted inside the jail.
type Spec struct {
	Source   string     `json:"source"`
	Digest   string     `json:"digest"`
	Segments [][]string `json:"segments"`
	// Workspace is the workspace root, Dir the working folder and Home
	// the HOME the command runs with (for ~), all absolute.
	Workspace string `json:"workspace"`
	Dir       string `json:"dir"`
	Home      string `json:"home"`
	// DirDev and DirIno are the working folder's identity when the call
	// was prepared; the interpreter refuses to start in another folder.
	DirDev uint64 `json:"dir_dev"`
	DirIno uint64 `json:"dir_ino"`
	// Env is the environment (NAME=VALUE); Path the PATH programs are
	// looked up in, whatever the script assigns to PATH.
	Env  []string `json:"env"`
	Path string   `json:"path"`
	// Pins are the programs that may run.
	Pins Pins `json:"pins"`
	// Redirects are the absolute paths a redirection may open (every way
	// the decided targets resolve); /dev/null is always allowed.
	Redirects []string `json:"redirects"`
}

// Digest returns "sha256:" + hex of f printed by the shell package's own
// printer: two parses of one source agree exactly when their digests do.
func Digest(f *syntax.File) (string, error) {
	var buf bytes.Buffer
	if err := syntax.NewPrinter().Print(&buf, f); err != nil {
		return "", err
	}
	sum := sha256.Sum256(buf.Bytes())
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// errMismatch is why an interpreter refuses a spec its own parse does not
// reproduce.
var errMismatch = errors.New("the command parses differently in the jail than when it was decided")

// parseSpec parses s.Source and checks it against the decision.
func parseSpec(s *Spec) (*syntax.File, Analysis, error) {
	f, err := Parse(s.Source)
	if err != nil {
		return nil, Analysis{}, fmt.Errorf("%w: %v", errMismatch, err)
	}
	d, err := Digest(f)
	if err != nil || d != s.Digest {
		return nil, Analysis{}, errMismatch
	}
	a := Analyze(f, s.Source)
	if !slices.EqualFunc(a.Segments, s.Segments, slices.Equal[[]string]) {
		return nil, Analysis{}, errMismatch
	}
	return f, a, nil
}

// PayloadName is the name of the shell interpreter among the jail
// helper's payloads (sandbox.Payloads).
const PayloadName = "shell"

// Notices the interpreter writes into a command's output when it refuses
// something. They never name a host path.
const (
	RefusedNotice    = "[refused: a command that policy did not approve]\n"
	RefusedDirNotice = "[refused: a command whose working folder is outside the workspace]\n"
	RefusedPinNotice = "[refused: a program that is not the one resolved when the call was decided]\n"
)

// Report is what the interpreter tells the gateway when it ends, on its
// report descriptor: the programs it refused (argv[0]) and how many
// redirects it refused to open. The gateway treats it as untrusted input
// (bounded, strictly decoded): it only feeds the model-facing result.
type Report struct {
	Refused      []string `json:"refused,omitempty"`
	RefusedOpens int      `json:"refused_opens,omitempty"`
	Error        string   `json:"error,omitempty"`
}
