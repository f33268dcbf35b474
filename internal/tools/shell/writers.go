package shell

import (
	"path"
	"strings"
)

// Access kinds of a command's file resources.
const (
	// accessCommand is a literal argument read as a path: policy judges it
	// like a read.
	accessCommand = "command"
	// accessWrite is an argument the program is known to write (create,
	// overwrite, remove, move): policy judges it like write-file.
	accessWrite = "write"
	// accessList is the working folder: the command can list it.
	accessList = "list"
	// accessRead is a file a redirection reads (< FILE): judged like
	// read-file.
	accessRead = "read"
)

// argUse is one path a command names and how its program uses it.
type argUse struct {
	word   string // as the argv gives it, relative to the working folder
	access string // accessCommand or accessWrite
}

// parsedArgs is one argv split the way GNU getopt_long (or the program's
// own parser) would split it.
type parsedArgs struct {
	opts     map[string]bool // canonical names of the options seen
	values   []optValue      // option values, in order
	operands []string        // non-option arguments, in order
}

type optValue struct{ name, value string }

// has reports whether any of the canonical options was given.
func (p *parsedArgs) has(names ...string) bool {
	for _, n := range names {
		if p.opts[n] {
			return true
		}
	}
	return false
}

// program is what the scan knows about one program's arguments: which
// options take a value and which arguments it writes. The table below is
// the one place that says so; a program not in it keeps every argument
// access "command".
type program struct {
	short    string            // short options that take a value: "-oFILE" or "-o FILE"
	optional string            // short options whose value may only be attached: sed's "-i.bak"
	long     []string          // long options that take a value: "--output=F" or "--output F"
	alias    map[string]string // short letter → canonical (long) name
	writes   []string          // canonical options whose value is written
	oldStyle bool              // tar: a first word without a dash is a cluster of letters
	goStyle  bool              // go: "-name value" / "-name=value", no clusters
	operands func(p *parsedArgs) []string
	extra    func(p *parsedArgs) []argUse // paths written that the argv does not spell
	// valueAccess, when set, decides the access of option values instead
	// of writes (tar: the archive is written only when creating).
	valueAccess func(p *parsedArgs, name string) string
	// keys are the KEY=VALUE operands whose value names a file (dd).
	keys map[string]string
}

// Operand classifiers.
func allCommand(p *parsedArgs) []string { return fill(len(p.operands), accessCommand) }
func allWrite(p *parsedArgs) []string   { return fill(len(p.operands), accessWrite) }

func fill(n int, access string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = access
	}
	return out
}

// lastWritten: SOURCE... DEST, or SOURCE... with -t DIR (written).
func lastWritten(p *parsedArgs) []string {
	out := allCommand(p)
	if !p.has("target-directory") && len(out) >= 2 {
		out[len(out)-1] = accessWrite
	}
	return out
}

// nthWritten: the n-th operand (0-based) is written, e.g. uniq IN OUT.
func nthWritten(n int) func(p *parsedArgs) []string {
	return func(p *parsedArgs) []string {
		out := allCommand(p)
		if len(out) > n {
			out[n] = accessWrite
		}
		return out
	}
}

// writers is the table of programs whose written paths the scan knows.
// docs/tools.md "`bash`" and policies/README.md list it; keep them in
// step.
var writers = map[string]*program{
	"sort": {
		short: "kotST", long: []string{"key", "output", "field-separator", "buffer-size", "temporary-directory",
			"compress-program", "files0-from", "parallel", "batch-size", "sort", "random-source"},
		alias:    map[string]string{"o": "output", "T": "temporary-directory", "k": "key", "t": "field-separator", "S": "buffer-size"},
		writes:   []string{"output", "temporary-directory"},
		operands: allCommand,
	},
	"tee": {operands: allWrite},
	"cp": {
		short: "St", long: []string{"target-directory", "suffix"},
		alias: map[string]string{"t": "target-directory", "S": "suffix"}, writes: []string{"target-directory"},
		operands: lastWritten,
	},
	"mv": {
		short: "St", long: []string{"target-directory", "suffix"},
		alias: map[string]string{"t": "target-directory", "S": "suffix"}, writes: []string{"target-directory"},
		operands: allWrite, // the sources are removed
	},
	"install": {
		short: "gmoSt", long: []string{"group", "mode", "owner", "suffix", "target-directory", "strip-program"},
		alias:  map[string]string{"t": "target-directory", "d": "directory", "S": "suffix", "m": "mode", "o": "owner", "g": "group"},
		writes: []string{"target-directory"},
		operands: func(p *parsedArgs) []string {
			if p.has("directory") {
				return allWrite(p)
			}
			return lastWritten(p)
		},
	},
	"ln": {
		short: "St", long: []string{"target-directory", "suffix"},
		alias: map[string]string{"t": "target-directory", "S": "suffix"}, writes: []string{"target-directory"},
		operands: lastWritten,
		extra: func(p *parsedArgs) []argUse {
			// ln TARGET: the link is made in the working folder.
			if len(p.operands) == 1 && !p.has("target-directory") {
				return []argUse{{path.Base(p.operands[0]), accessWrite}}
			}
			return nil
		},
	},
	"touch":    {short: "dtr", long: []string{"date", "reference", "time"}, alias: map[string]string{"r": "reference", "d": "date"}, operands: allWrite},
	"mkdir":    {short: "m", long: []string{"mode"}, operands: allWrite},
	"rm":       {operands: allWrite},
	"rmdir":    {operands: allWrite},
	"unlink":   {operands: allWrite},
	"shred":    {short: "nsu", long: []string{"iterations", "size", "random-source"}, operands: allWrite},
	"truncate": {short: "rs", long: []string{"reference", "size"}, alias: map[string]string{"r": "reference", "s": "size"}, operands: allWrite},
	"sed": {
		short: "efl", optional: "i", long: []string{"expression", "file", "line-length"},
		alias: map[string]string{"e": "expression", "f": "file", "i": "in-place", "l": "line-length"},
		operands: func(p *parsedArgs) []string {
			out := allCommand(p)
			if !p.has("in-place") {
				return out
			}
			for i := range out {
				// Without -e/-f the first operand is the script.
				if i > 0 || p.has("expression", "file") {
					out[i] = accessWrite
				}
			}
			return out
		},
	},
	"dd": {operands: allCommand, keys: map[string]string{"of": accessWrite, "if": accessCommand}},
	"tar": {
		short: "bfgCHIKLNTVX", oldStyle: true,
		long: []string{"file", "directory", "files-from", "exclude-from", "blocking-factor", "format",
			"listed-incremental", "use-compress-program", "starting-file", "newer", "label", "tape-length"},
		alias: map[string]string{"f": "file", "C": "directory", "T": "files-from", "X": "exclude-from",
			"c": "create", "x": "extract", "r": "append", "u": "update", "A": "catenate", "t": "list",
			"g": "listed-incremental", "I": "use-compress-program", "concatenate": "catenate", "get": "extract"},
		valueAccess: tarValueAccess,
		operands: func(p *parsedArgs) []string {
			if p.has("extract") {
				return allWrite(p) // members land on these names
			}
			return allCommand(p)
		},
		extra: func(p *parsedArgs) []argUse {
			if p.has("extract") && !p.has("directory") {
				return []argUse{{".", accessWrite}} // extracts into the working folder
			}
			return nil
		},
	},
	"uniq":  {short: "fsw", long: []string{"skip-fields", "skip-chars", "check-chars"}, operands: nthWritten(1)},
	"split": {short: "abCln", long: []string{"suffix-length", "bytes", "line-bytes", "lines", "number", "separator", "additional-suffix", "filter", "numeric-suffixes", "hex-suffixes"}, operands: nthWritten(1), extra: splitDefault},
	"go": {
		goStyle: true,
		long: []string{"o", "C", "modfile", "coverprofile", "cpuprofile", "memprofile", "blockprofile", "mutexprofile",
			"trace", "outputdir", "exec", "tags", "run", "skip", "bench", "benchtime", "count", "timeout", "p",
			"ldflags", "gcflags", "asmflags", "mod", "pkgdir", "overlay", "covermode", "coverpkg", "parallel",
			"cpu", "list", "fuzz", "fuzztime", "shuffle", "toolexec", "vet", "buildmode", "compiler", "installsuffix"},
		writes:   []string{"o", "coverprofile", "cpuprofile", "memprofile", "blockprofile", "mutexprofile", "trace", "outputdir"},
		operands: allCommand,
	},
}

// splitDefault: split without PREFIX writes xaa, xab… in the working folder.
func splitDefault(p *parsedArgs) []argUse {
	if len(p.operands) < 2 {
		return []argUse{{"x", accessWrite}}
	}
	return nil
}

// argumentUses lists the paths one simple command names (everything after
// argv[0] that is not an option, option values, attached ones included)
// with how its program uses each.
func argumentUses(argv []string) []argUse {
	if len(argv) < 2 {
		return nil
	}
	prog := writers[path.Base(argv[0])]
	if prog == nil {
		return genericUses(argv[1:])
	}
	p := prog.parse(argv[1:])
	var out []argUse
	writes := map[string]bool{}
	for _, w := range prog.writes {
		writes[w] = true
	}
	for _, v := range p.values {
		acc := accessCommand
		switch {
		case prog.valueAccess != nil:
			acc = prog.valueAccess(p, v.name)
		case writes[v.name]:
			acc = accessWrite
		}
		out = append(out, argUse{v.value, acc})
	}
	access := prog.operands(p)
	for i, op := range p.operands {
		if prog.keys != nil {
			if k, v, ok := strings.Cut(op, "="); ok {
				acc, known := prog.keys[k]
				if !known {
					acc = accessCommand
				}
				out = append(out, argUse{v, acc})
				continue
			}
		}
		out = append(out, argUse{op, access[i]})
	}
	if prog.extra != nil {
		out = append(out, prog.extra(p)...)
	}
	return out
}

// tarValueAccess: the archive is written when tar creates or appends to
// it, the -C folder when it extracts into it.
func tarValueAccess(p *parsedArgs, name string) string {
	switch name {
	case "file":
		if p.has("create", "append", "update", "catenate") {
			return accessWrite
		}
	case "directory":
		if p.has("extract") {
			return accessWrite
		}
	case "listed-incremental":
		return accessWrite
	}
	return accessCommand
}

// genericUses is the scan of a program the table does not know: every
// argument that is not an option is a path, so is the value of
// --option=value, and so is the attached value of a short option that
// looks like a path (contains "/" or "."): "-fsecrets/db.env". Everything
// is access "command".
func genericUses(args []string) []argUse {
	var out []argUse
	endOpts := false
	for _, tok := range args {
		switch {
		case endOpts || tok == "-" || !strings.HasPrefix(tok, "-"):
			out = append(out, argUse{tok, accessCommand})
		case tok == "--":
			endOpts = true
		case strings.Contains(tok, "="):
			_, v, _ := strings.Cut(tok, "=")
			out = append(out, argUse{v, accessCommand})
		case !strings.HasPrefix(tok, "--") && len(tok) > 2 && strings.ContainsAny(tok[2:], "/."):
			out = append(out, argUse{tok[2:], accessCommand})
		}
	}
	return out
}

// parse splits args as the program's own option parser would.
func (prog *program) parse(args []string) *parsedArgs {
	p := &parsedArgs{opts: map[string]bool{}}
	canon := func(name string) string {
		if c, ok := prog.alias[name]; ok {
			return c
		}
		return name
	}
	takesLong := func(name string) bool {
		for _, l := range prog.long {
			if l == name {
				return true
			}
		}
		return false
	}
	endOpts := false
	for i := 0; i < len(args); i++ {
		tok := args[i]
		next := func() (string, bool) {
			if i+1 < len(args) {
				i++
				return args[i], true
			}
			return "", false
		}
		if i == 0 && prog.oldStyle && tok != "" && !strings.HasPrefix(tok, "-") && isLetters(tok) {
			// tar cf ARCHIVE DIR: the letters' values follow in order.
			var pending []string
			for j := 0; j < len(tok); j++ {
				name := canon(tok[j : j+1])
				p.opts[name] = true
				if strings.IndexByte(prog.short, tok[j]) >= 0 {
					pending = append(pending, name)
				}
			}
			for _, name := range pending {
				if v, ok := next(); ok {
					p.values = append(p.values, optValue{name, v})
				}
			}
			continue
		}
		switch {
		case endOpts || tok == "-" || !strings.HasPrefix(tok, "-"):
			p.operands = append(p.operands, tok)
		case tok == "--":
			endOpts = true
		case prog.goStyle || strings.HasPrefix(tok, "--"):
			name, v, hasV := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(tok, "-"), "-"), "=")
			name = canon(name)
			p.opts[name] = true
			switch {
			case hasV:
				p.values = append(p.values, optValue{name, v})
			case takesLong(name):
				if v, ok := next(); ok {
					p.values = append(p.values, optValue{name, v})
				}
			}
		default: // a cluster of short options: -abc, -oFILE, -o FILE
			for j := 1; j < len(tok); j++ {
				c := tok[j]
				name := canon(tok[j : j+1])
				p.opts[name] = true
				if strings.IndexByte(prog.optional, c) >= 0 {
					break // the rest is its value (sed -i.bak), never a path
				}
				if strings.IndexByte(prog.short, c) >= 0 {
					if j+1 < len(tok) {
						p.values = append(p.values, optValue{name, tok[j+1:]})
					} else if v, ok := next(); ok {
						p.values = append(p.values, optValue{name, v})
					}
					break
				}
			}
		}
	}
	return p
}

// isLetters reports a word made only of ASCII letters.
func isLetters(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}
