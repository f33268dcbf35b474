package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/toolgate/toolgate/internal/audit"
)

// auditVerify is `gateway audit verify --checkpoint FILE --key FILE
// EXPORT.ndjson`: offline, with nothing but the files, it checks that the
// export is exactly the log the signed checkpoint commits to
// (audit.VerifyExport). Exit 0 when it is, 1 with the first problem
// otherwise, 2 on usage errors.
func auditVerify(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("audit verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cpFile := fs.String("checkpoint", "", "the signed checkpoint note (GET /v1/audit/checkpoint)")
	keyFile := fs.String("key", "", "the note verifier key(s), one per line (GET /v1/audit/checkpoint/verifier)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *cpFile == "" || *keyFile == "" || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: gateway audit verify --checkpoint FILE --key FILE EXPORT.ndjson")
		return exitUsage
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "audit verify: "+format+"\n", a...)
		return exitRuntime
	}
	note, err := os.ReadFile(*cpFile)
	if err != nil {
		return fail("checkpoint: %v", err)
	}
	keyText, err := os.ReadFile(*keyFile)
	if err != nil {
		return fail("key: %v", err)
	}
	var keys []string
	for _, l := range strings.Split(string(keyText), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			keys = append(keys, l)
		}
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return fail("export: %v", err)
	}
	defer f.Close()
	cp, n, err := audit.VerifyExport(f, note, keys)
	if err != nil {
		return fail("%v", err)
	}
	fmt.Fprintf(stdout, "ok: %d events of %s are exactly the log of the checkpoint (size %d, root %x)\n", n, cp.Origin, cp.Size, cp.Root)
	return exitOK
}
