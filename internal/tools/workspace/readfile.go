package workspace

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/internal/tools"
	"github.com/toolgate/toolgate/internal/wspath"
)

// read-file limits.
const (
	readDefaultLimit  = 2000
	readMaxLimit      = 10000
	readMaxLineRunes  = 2000
	readMaxOutput     = 64 << 10
	readCountMaxBytes = 64 << 20 // past this, the notice says "more than"
	binarySniffBytes  = 8 << 10
)

const readFileSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "path": {
      "type": "string", "minLength": 1, "maxLength": 4096,
      "description": "File to read, relative to the workspace root, with '/' as separator."
    },
    "offset": {
      "type": "integer", "minimum": 1, "maximum": 2147483647, "default": 1,
      "description": "1-based line number to start reading at. Default 1."
    },
    "limit": {
      "type": "integer", "minimum": 1, "maximum": 10000, "default": 2000,
      "description": "Maximum number of lines to return. Default 2000."
    }
  },
  "required": ["path"],
  "additionalProperties": false
}`

// ReadFile is the read-file tool: numbered lines of a text file.
type ReadFile struct{ spec tools.Spec }

// NewReadFile returns the read-file tool.
func NewReadFile() *ReadFile {
	return &ReadFile{spec: tools.Spec{
		Name: "read-file",
		Description: "Read a text file from the workspace. Returns lines numbered like `cat -n` " +
			"(line number, tab, text). Use offset and limit to page through long files; lines " +
			"longer than 2000 characters are cut.",
		InputSchema: readFileSchema,
		Kind:        tools.KindBuiltin,
		Action:      "fs.read",
		Effects:     []string{"fs.read"},
		Annotations: tools.Annotations{ReadOnly: true, Idempotent: true},
		Limits:      tools.Limits{Timeout: 30 * time.Second, MaxOutputBytes: readMaxOutput},
	}}
}

// readArtifact is what read-file runs.
type readArtifact struct {
	target wspath.Resolved
	offset int
	limit  int
}

// Spec returns the published description.
func (t *ReadFile) Spec() *tools.Spec { return &t.spec }

// Prepare resolves the file and applies the defaults.
func (t *ReadFile) Prepare(_ context.Context, env *tools.Env, args map[string]any) (tools.Plan, error) {
	root, err := workspaceRoot(env)
	if err != nil {
		return tools.Plan{}, err
	}
	p, err := requiredString(args, "path")
	if err != nil {
		return tools.Plan{}, err
	}
	offset, err := intArg(args, "offset", 1, 1, 1<<31-1)
	if err != nil {
		return tools.Plan{}, err
	}
	limit, err := intArg(args, "limit", readDefaultLimit, 1, readMaxLimit)
	if err != nil {
		return tools.Plan{}, err
	}
	r, err := resolvePath(root, p, wspath.MustExist)
	if err != nil {
		return tools.Plan{}, err
	}
	out := copyArgs(args)
	out["offset"] = float64(offset)
	out["limit"] = float64(limit)
	return tools.Plan{
		Args:      out,
		Resources: []tools.Resource{wspath.AddLinks(tools.Resource{"type": "file", "path": r.Rel, "access": "read"}, r.Info)},
		Artifact:  readArtifact{target: r, offset: offset, limit: limit},
	}, nil
}

// Run reads the prepared file, if it is still the same file.
func (t *ReadFile) Run(ctx context.Context, env *tools.Env, artifact any, lim tools.Limits) (tools.Result, error) {
	a, ok := artifact.(readArtifact)
	if !ok {
		return tools.Result{}, fmt.Errorf("workspace: read-file: artifact of type %T", artifact)
	}
	root, err := workspaceRoot(env)
	if err != nil {
		return tools.Result{}, err
	}
	f, err := openPrepared(root, a.target, lim, os.O_RDONLY)
	if err != nil {
		return tools.Result{}, err
	}
	defer f.Close()

	// A small file needs no 64 KiB buffer; Peek below then sees all of it.
	br := bufio.NewReaderSize(f, int(max(4<<10, min(64<<10, a.target.Info.Size()+1))))
	head, err := br.Peek(binarySniffBytes)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return tools.Result{}, fmt.Errorf("workspace: read: %w", err)
	}
	if len(head) == 0 {
		return tools.Result{Content: "[empty file]", Data: map[string]any{"lines": 0, "truncated": false}}, nil
	}
	if bytes.IndexByte(head, 0) >= 0 {
		return tools.Result{}, &tools.ModelError{Message: "file appears to be binary; read-file shows text files only"}
	}
	return renderLines(ctx, br, a.offset, a.limit, outputCap(lim, readMaxOutput))
}

// renderLines formats lines [offset, offset+limit) of br as `cat -n` does,
// within max bytes, and closes with a notice when it stopped early.
func renderLines(ctx context.Context, br *bufio.Reader, offset, limit, max int) (tools.Result, error) {
	budget := bodyBudget(max)
	var b strings.Builder
	keep := make([]byte, 0, readMaxLineRunes*4+len(lineCutMarker))
	lineNo, shown, last := 0, 0, 0
	stopped := false // stopped before the end of the file
	for {
		if lineNo%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return tools.Result{}, err
			}
		}
		keepMax := 0
		if lineNo+1 >= offset {
			keepMax = cap(keep)
		}
		line, full, ok, err := readLine(br, keep, keepMax)
		if err != nil {
			return tools.Result{}, fmt.Errorf("workspace: read: %w", err)
		}
		if !ok {
			break
		}
		lineNo++
		if lineNo < offset {
			continue
		}
		if shown == limit {
			stopped = true
			break
		}
		text, cut := cutRunes(line, readMaxLineRunes)
		cut = cut || full > len(line)
		size := 7 + len(text) + 1
		if cut {
			size += len(lineCutMarker)
		}
		if b.Len()+size > budget {
			stopped = true
			break
		}
		writeNumber(&b, lineNo)
		b.Write(text)
		if cut {
			b.WriteString(lineCutMarker)
		}
		b.WriteByte('\n')
		shown++
		last = lineNo
	}

	data := map[string]any{"lines": shown, "truncated": stopped}
	if !stopped {
		if shown == 0 {
			msg := fmt.Sprintf("[offset %d is past the end of the file (%d lines)]", offset, lineNo)
			return tools.Result{Content: capString(msg, max), Data: data}, nil
		}
		return tools.Result{Content: b.String(), Data: data, Bytes: b.Len()}, nil
	}

	// lineNo counts the line that did not fit (or was past the limit);
	// count the rest, up to a bound, for the notice.
	total, exact, err := countLines(ctx, br, lineNo)
	if err != nil {
		return tools.Result{}, err
	}
	of := strconv.Itoa(total)
	if !exact {
		of = "more than " + of
	}
	if shown == 0 {
		b.WriteString(fmt.Sprintf("[truncated: line %d does not fit in the output limit; the file has %s lines]", offset, of))
	} else {
		b.WriteString(fmt.Sprintf("[truncated: showing lines %d-%d of %s; use offset to read more]", offset, last, of))
	}
	return tools.Result{Content: capString(b.String(), max), Data: data, Bytes: b.Len(), Truncated: true}, nil
}

// readLine reads one line without its newline, keeping at most keepMax
// bytes of it in keep. full is the line's real length; ok is false at the
// end of the input.
func readLine(br *bufio.Reader, keep []byte, keepMax int) (line []byte, full int, ok bool, err error) {
	keep = keep[:0]
	read := 0
	for {
		frag, err := br.ReadSlice('\n')
		read += len(frag)
		body := frag
		if err == nil {
			body = frag[:len(frag)-1]
		}
		full += len(body)
		if room := keepMax - len(keep); room > 0 {
			keep = append(keep, body[:min(room, len(body))]...)
		}
		switch err {
		case nil:
			return keep, full, true, nil
		case bufio.ErrBufferFull:
			continue
		case io.EOF:
			return keep, full, read > 0, nil
		default:
			return nil, 0, false, err
		}
	}
}

// countLines counts the lines left in br, added to seen, reading at most
// readCountMaxBytes; exact is false when it stopped counting.
func countLines(ctx context.Context, br *bufio.Reader, seen int) (total int, exact bool, err error) {
	buf := make([]byte, 64<<10)
	read := 0
	var lastByte byte = '\n'
	for read < readCountMaxBytes {
		if err := ctx.Err(); err != nil {
			return 0, false, err
		}
		n, rerr := br.Read(buf)
		if n > 0 {
			seen += bytes.Count(buf[:n], []byte{'\n'})
			lastByte = buf[n-1]
			read += n
		}
		if rerr == io.EOF {
			if lastByte != '\n' {
				seen++
			}
			return seen, true, nil
		}
		if rerr != nil {
			return 0, false, fmt.Errorf("workspace: read: %w", rerr)
		}
	}
	return seen, false, nil
}

// writeNumber writes n right-aligned in six columns and a tab, as
// fmt's "%6d\t" would, without the formatting machinery.
func writeNumber(b *strings.Builder, n int) {
	var tmp [20]byte
	s := strconv.AppendInt(tmp[:0], int64(n), 10)
	for i := len(s); i < 6; i++ {
		b.WriteByte(' ')
	}
	b.Write(s)
	b.WriteByte('\t')
}

// openPrepared opens a prepared, existing target read-only or read-write
// and checks on the descriptor that it is still the prepared file. It
// refuses, before opening, anything but a regular file and any target the
// call's exclusions cover.
func openPrepared(root *os.Root, r wspath.Resolved, lim tools.Limits, flag int) (*os.File, error) {
	excl, err := newExcluder(lim.ExcludePaths)
	if err != nil {
		return nil, err
	}
	if excl.covers(r.Rel) {
		return nil, &tools.ModelError{Message: "path is excluded by policy"}
	}
	switch {
	case r.Info.IsDir():
		return nil, &tools.ModelError{Message: "path is a directory, not a file; use glob to list files"}
	case !r.Info.Mode().IsRegular():
		return nil, &tools.ModelError{Message: "path is not a regular file"}
	}
	// O_NONBLOCK: a FIFO swapped in after prepare must not block the open;
	// the identity check below rejects it.
	f, err := root.OpenFile(r.Rel, flag|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, openErr(root, r, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("workspace: fstat: %w", err)
	}
	if flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		// Checked before identity, so a prepared (approved) target swapped
		// for a hard link to another file is refused with the reason.
		if err := checkLinks(st); err != nil {
			f.Close()
			return nil, err
		}
	}
	if !wspath.SameIdentity(r.Info, st) {
		f.Close()
		return nil, errChanged("file is not the prepared one")
	}
	return f, nil
}

// checkLinks refuses to write a file with more than one hard link: a
// write through one name changes the file under every other name,
// protected ones included, and policy judged only this one.
func checkLinks(fi fs.FileInfo) error {
	if n := wspath.Links(fi); n > 1 {
		return &tools.ModelError{Message: wspath.LinksMessage(n)}
	}
	return nil
}

// recheckLinks re-reads the link count on the open descriptor right
// before a write: a link made since the open is refused too.
func recheckLinks(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("workspace: fstat: %w", err)
	}
	return checkLinks(st)
}

// workspaceRoot returns the tenant's root.
func workspaceRoot(env *tools.Env) (*os.Root, error) {
	if env == nil || env.Workspace == nil || env.Workspace.Root() == nil {
		return nil, errNoWorkspace
	}
	return env.Workspace.Root(), nil
}
