package sandbox

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/gobwas/glob"
)

// What a jailed program may map executable.
//
// Landlock's execute right is checked on execve and on the ELF interpreter
// the kernel loads, not on mmap: the dynamic loader run as a program
// (ld.so /usr/bin/perl) maps any file executable. A noexec mount is what
// refuses that mmap(PROT_EXEC). So in the jail every mount is noexec —
// the system folders, /tmp, the workspace — except:
//   - the system library folders (where libc lives), mounted executable as
//     a whole so that the loader and dlopen (NSS, gconv, extension
//     modules) work, with every program found inside them covered by a
//     noexec mount of its own;
//   - one executable bind mount per approved program, per interpreter it
//     needs (the ELF interpreter, a #! program) and per library it loads
//     from outside those folders;
//   - the exec_paths the decision grants.
// Landlock's execute right is given to the programs, their interpreters
// and the exec_paths only.

// maxExecWalk bounds the files one exec_paths glob may expand to or one
// library folder scan may look at.
const maxExecWalk = 200_000

// execPlanner resolves, on the host, what a jail must keep executable. It
// caches what it learns of each file by identity, so a program's closure
// is computed once per gateway.
type execPlanner struct {
	libDirs    []string // real paths, mounted executable as a whole
	noExec     []string // programs inside libDirs
	searchDirs []string // the loader's default search path

	// helperNeeds are the helper binary's interpreter and the libraries
	// it loads from outside libDirs: the init and the payload are the
	// helper, so every jail keeps them executable.
	helperNeeds  map[string]bool
	helperInterp string

	mu           sync.Mutex
	cache        map[fileKey]fileDeps
	treePrograms map[string][]string // programs inside module trees
}

type fileKey struct {
	dev, ino uint64
	mtime    int64
	size     int64
}

// fileDeps is what running (or loading) one file needs: its interpreter
// and the shared objects it loads, as real paths.
type fileDeps struct {
	interp string
	libs   []string
	err    error
}

// newExecPlanner finds the system library folders from a dynamically
// linked probe program (its loader's and its libc's folders, plus extra),
// and the programs inside them.
func newExecPlanner(probe string, extra []string) (*execPlanner, error) {
	p := &execPlanner{cache: map[fileKey]fileDeps{}, treePrograms: map[string][]string{}}
	p.searchDirs = loaderSearchDirs()
	p.helperNeeds = map[string]bool{}
	real, err := filepath.EvalSymlinks(probe)
	if err != nil {
		return nil, err
	}
	info, err := readELF(real)
	if err != nil {
		return nil, err
	}
	dirs := map[string]bool{}
	if info.interp != "" {
		ri, err := filepath.EvalSymlinks(info.interp)
		if err != nil {
			return nil, fmt.Errorf("the loader of %s: %v", path.Base(probe), errnoText(err))
		}
		dirs[filepath.Dir(ri)] = true
	}
	for _, n := range info.needed {
		if lib := p.findLib(n, real, info); lib != "" {
			dirs[filepath.Dir(lib)] = true
		}
	}
	for _, d := range extra {
		if rd, err := filepath.EvalSymlinks(d); err == nil {
			dirs[rd] = true
		}
	}
	for d := range dirs {
		if reservedExecRoot(d) {
			return nil, fmt.Errorf("library folder %s cannot be executable", d)
		}
		p.libDirs = append(p.libDirs, d)
	}
	slices.Sort(p.libDirs)
	for _, d := range p.libDirs {
		progs, err := programsIn(d)
		if err != nil {
			return nil, err
		}
		p.noExec = append(p.noExec, progs...)
	}
	return p, nil
}

// setHelper records what the helper binary at self needs to run in a jail.
func (p *execPlanner) setHelper(self string) error {
	real, err := filepath.EvalSymlinks(self)
	if err != nil {
		return err
	}
	d := p.deps(real)
	if d.err != nil {
		return d.err
	}
	p.helperInterp = d.interp
	for _, lib := range d.libs {
		if !p.inLibDirs(lib) {
			p.helperNeeds[lib] = true
		}
	}
	if d.interp != "" && !p.inLibDirs(d.interp) {
		p.helperNeeds[d.interp] = true
	}
	return nil
}

// reservedExecRoot reports folders that can never be made executable.
func reservedExecRoot(p string) bool {
	return p == "/" || p == "/proc" || strings.HasPrefix(p, "/proc/") || p == "/dev" || strings.HasPrefix(p, "/dev/") ||
		p == "/sys" || strings.HasPrefix(p, "/sys/") || p == "/etc" || strings.HasPrefix(p, "/etc/")
}

// programsIn lists the programs below dir that the loader could run: ELF
// files with an interpreter and no soname (a library has one, and libc's
// entry point prints its version only).
func programsIn(dir string) ([]string, error) {
	var out []string
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			return nil
		}
		if n++; n > maxExecWalk {
			return fmt.Errorf("library folder %s has more than %d entries", dir, maxExecWalk)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if info, err := readELF(p); err == nil && info.interp != "" && info.soname == "" {
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

// elfInfo is what the loader reads of an ELF file.
type elfInfo struct {
	interp  string
	needed  []string
	runpath []string
	rpath   []string
	soname  string
}

var errNotELF = errors.New("not an ELF file")

// readELF reads the program and dynamic headers of p.
func readELF(p string) (elfInfo, error) {
	f, err := os.Open(p)
	if err != nil {
		return elfInfo{}, err
	}
	defer f.Close()
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil || string(magic[:]) != elf.ELFMAG {
		return elfInfo{}, errNotELF
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return elfInfo{}, errNotELF
	}
	defer ef.Close()
	var info elfInfo
	for _, prog := range ef.Progs {
		if prog.Type == elf.PT_INTERP {
			b, err := io.ReadAll(io.LimitReader(prog.Open(), 4096))
			if err == nil {
				info.interp = strings.TrimRight(string(b), "\x00")
			}
		}
	}
	if ef.Section(".dynamic") == nil && !hasDynamic(ef) {
		return info, nil
	}
	info.needed, _ = ef.DynString(elf.DT_NEEDED)
	info.runpath, _ = ef.DynString(elf.DT_RUNPATH)
	info.rpath, _ = ef.DynString(elf.DT_RPATH)
	if s, _ := ef.DynString(elf.DT_SONAME); len(s) > 0 {
		info.soname = s[0]
	}
	return info, nil
}

func hasDynamic(ef *elf.File) bool {
	for _, p := range ef.Progs {
		if p.Type == elf.PT_DYNAMIC {
			return true
		}
	}
	return false
}

// shebang returns the interpreter a script's "#!" line names.
func shebang(p string) string {
	f, err := os.Open(p)
	if err != nil {
		return ""
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := io.ReadFull(f, head)
	return shebangOf(head[:n])
}

// shebangOf returns the absolute program a "#!" line at the start of head
// names, "" for none.
func shebangOf(head []byte) string {
	if !bytes.HasPrefix(head, []byte("#!")) {
		return ""
	}
	line, _, _ := bytes.Cut(head[2:], []byte("\n"))
	fields := strings.Fields(string(line))
	if len(fields) > 0 && path.IsAbs(fields[0]) {
		return path.Clean(fields[0])
	}
	return ""
}

// loaderSearchDirs is the loader's default search path: the folders of
// /etc/ld.so.conf (and its includes) and the built-in ones.
func loaderSearchDirs() []string {
	var dirs []string
	seen := map[string]bool{}
	add := func(d string) {
		if d != "" && path.IsAbs(d) && !seen[d] {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	var readConf func(file string, depth int)
	readConf = func(file string, depth int) {
		if depth > 4 {
			return
		}
		f, err := os.Open(file)
		if err != nil {
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line, _, _ := strings.Cut(sc.Text(), "#")
			line = strings.TrimSpace(line)
			if inc, ok := strings.CutPrefix(line, "include "); ok {
				matches, _ := filepath.Glob(strings.TrimSpace(inc))
				for _, m := range matches {
					readConf(m, depth+1)
				}
				continue
			}
			add(line)
		}
	}
	readConf("/etc/ld.so.conf", 0)
	for _, d := range []string{"/lib64", "/usr/lib64", "/lib", "/usr/lib"} {
		add(d)
	}
	return dirs
}

// findLib resolves a DT_NEEDED name of the object at real (with info) the
// way the loader does: RPATH (without RUNPATH), RUNPATH, then the default
// search path. It returns the real path, or "" when nothing is found.
func (p *execPlanner) findLib(name, real string, info elfInfo) string {
	if strings.Contains(name, "/") {
		if r, err := filepath.EvalSymlinks(name); err == nil {
			return r
		}
		return ""
	}
	origin := filepath.Dir(real)
	var dirs []string
	expand := func(list []string) {
		for _, l := range list {
			for _, d := range strings.Split(l, ":") {
				d = strings.ReplaceAll(strings.ReplaceAll(d, "${ORIGIN}", origin), "$ORIGIN", origin)
				dirs = append(dirs, d)
			}
		}
	}
	if len(info.runpath) == 0 {
		expand(info.rpath)
	}
	expand(info.runpath)
	dirs = append(append(dirs, p.libDirs...), p.searchDirs...)
	for _, d := range dirs {
		if !path.IsAbs(d) {
			continue
		}
		c := filepath.Join(d, name)
		if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() {
			if r, err := filepath.EvalSymlinks(c); err == nil {
				return r
			}
		}
	}
	return ""
}

// deps returns what running the file at real needs (cached by identity).
func (p *execPlanner) deps(real string) fileDeps {
	fi, err := os.Stat(real)
	if err != nil {
		return fileDeps{err: err}
	}
	st := fi.Sys().(*syscall.Stat_t)
	key := fileKey{uint64(st.Dev), st.Ino, fi.ModTime().UnixNano(), fi.Size()}
	p.mu.Lock()
	d, ok := p.cache[key]
	p.mu.Unlock()
	if ok {
		return d
	}
	d = p.computeDeps(real)
	p.mu.Lock()
	if len(p.cache) > 4096 {
		clear(p.cache)
	}
	p.cache[key] = d
	p.mu.Unlock()
	return d
}

// computeDeps finds a file's interpreter and the closure of the shared
// objects it loads.
func (p *execPlanner) computeDeps(real string) fileDeps {
	var d fileDeps
	info, err := readELF(real)
	if errors.Is(err, errNotELF) {
		if s := shebang(real); s != "" {
			if r, err := filepath.EvalSymlinks(s); err == nil {
				d.interp = r
			}
		}
		return d
	}
	if err != nil {
		return fileDeps{err: err}
	}
	if info.interp != "" {
		if r, err := filepath.EvalSymlinks(info.interp); err == nil {
			d.interp = r
		}
	}
	seen := map[string]bool{real: true}
	type obj struct {
		real string
		info elfInfo
	}
	queue := []obj{{real, info}}
	for len(queue) > 0 && len(seen) < 1024 {
		o := queue[0]
		queue = queue[1:]
		for _, n := range o.info.needed {
			lib := p.findLib(n, o.real, o.info)
			if lib == "" || seen[lib] {
				continue
			}
			seen[lib] = true
			d.libs = append(d.libs, lib)
			if li, err := readELF(lib); err == nil {
				queue = append(queue, obj{lib, li})
			}
		}
	}
	return d
}

// pythonName matches the file names of Python interpreters.
var pythonName = regexp.MustCompile(`^python(3(\.[0-9]+)?)$`)

// moduleTrees are the folders of shared objects an interpreter loads at
// run time outside the system library folders: a Python's lib-dynload
// and package folders. They are executable for a jail that runs it (any
// program found in them excepted).
func (p *execPlanner) moduleTrees(real string) []string {
	m := pythonName.FindStringSubmatch(filepath.Base(real))
	if m == nil {
		return nil
	}
	prefix := filepath.Dir(filepath.Dir(real)) // /usr for /usr/bin/python3.11
	ver := m[1]
	cands := []string{
		filepath.Join(prefix, "lib", "python"+ver, "lib-dynload"),
		filepath.Join(prefix, "lib", "python"+ver, "site-packages"),
		filepath.Join(prefix, "lib", "python3", "dist-packages"),
		filepath.Join(prefix, "local", "lib", "python"+ver, "dist-packages"),
		filepath.Join(prefix, "local", "lib", "python"+ver, "site-packages"),
	}
	if prefix == "/usr" {
		cands = append(cands, "/usr/local/lib/python"+ver+"/dist-packages", "/usr/local/lib/python"+ver+"/site-packages")
	}
	var out []string
	for _, c := range cands {
		rc, err := filepath.EvalSymlinks(c)
		if err != nil || slices.Contains(out, rc) || underAny(rc, p.libDirs) {
			continue
		}
		if fi, err := os.Stat(rc); err == nil && fi.IsDir() {
			out = append(out, rc)
		}
	}
	return out
}

// programsInCached is programsIn, once per folder.
func (p *execPlanner) programsInCached(dir string) []string {
	p.mu.Lock()
	progs, ok := p.treePrograms[dir]
	p.mu.Unlock()
	if ok {
		return progs
	}
	progs, err := programsIn(dir)
	if err != nil {
		progs = nil
	}
	p.mu.Lock()
	p.treePrograms[dir] = progs
	p.mu.Unlock()
	return progs
}

// inLibDirs reports whether real is inside a library folder.
func (p *execPlanner) inLibDirs(real string) bool {
	return underAny(real, p.libDirs)
}

func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// plan turns a jail into the spec the helper builds. uid and gid are the
// user a root gateway's helper becomes (-1 otherwise).
func (p *execPlanner) plan(j Jail, uid, gid int) (jailSpec, error) {
	if err := j.validate(); err != nil {
		return jailSpec{}, err
	}
	ws := path.Clean(j.Workspace)
	mountAt := j.MountAt
	if mountAt == "" {
		mountAt = ws
	}
	s := jailSpec{
		Workspace: ws, MountAt: mountAt, Hide: j.Hide, Writable: j.WritePaths,
		WSWritable: j.WritePaths == nil, Network: j.Network, Limits: j.Limits.WithDefaults(),
		UID: uid, GID: gid, ExecTrees: slices.Clone(p.libDirs),
	}
	files := map[string]bool{}
	rights := map[string]bool{}
	for f := range p.helperNeeds {
		files[f] = true
	}
	if p.helperInterp != "" {
		rights[p.helperInterp] = true
	}
	var modTrees []string
	var addFile func(real string, right bool) error
	addFile = func(real string, right bool) error {
		if right {
			rights[real] = true
		}
		if files[real] {
			return nil
		}
		files[real] = true
		for _, t := range p.moduleTrees(real) {
			if !slices.Contains(modTrees, t) {
				modTrees = append(modTrees, t)
			}
		}
		d := p.deps(real)
		if d.err != nil {
			return nil // a program that cannot be read cannot run either
		}
		if d.interp != "" {
			// The kernel opens the interpreter with the execute check.
			if err := addFile(d.interp, true); err != nil {
				return err
			}
		}
		for _, lib := range d.libs {
			if !p.inLibDirs(lib) {
				files[lib] = true
			}
		}
		return nil
	}
	hostProgram := func(prog string) error {
		if rel, ok := hostRel(ws, prog); ok {
			// A program of the workspace: executable at its jail path.
			// The gateway never opens a workspace file: the helper reads
			// its "#!" line inside the jail.
			jp := path.Join(mountAt, rel)
			files[jp], rights[jp] = true, true
			return nil
		}
		real, err := filepath.EvalSymlinks(prog)
		if err != nil {
			return nil // not there: it cannot run
		}
		if reservedExecRoot(real) {
			return fmt.Errorf("sandbox: %q cannot be made executable", prog)
		}
		return addFile(real, true)
	}
	for _, prog := range j.Programs {
		if err := hostProgram(prog); err != nil {
			return jailSpec{}, err
		}
	}
	for _, g := range j.ExecPaths {
		prefix, tree, literal := globRoot(g)
		if prefix == "" {
			prefix = "/"
		}
		switch {
		case prefix == mountAt || strings.HasPrefix(prefix, mountAt+"/") || strings.HasPrefix(g, mountAt+"/"):
			rel := strings.TrimPrefix(strings.TrimPrefix(g, mountAt), "/")
			if rel == "" {
				rel = "**"
			}
			s.WorkspaceExec = append(s.WorkspaceExec, rel)
		case prefix == "/tmp" || strings.HasPrefix(prefix, "/tmp/"):
			// The jail's own /tmp, not the host's.
			s.TmpExec = true
			rights["/tmp"] = true
		case reservedExecRoot(prefix):
			return jailSpec{}, fmt.Errorf("sandbox: %q cannot be made executable", g)
		case literal:
			if err := hostProgram(path.Clean(g)); err != nil {
				return jailSpec{}, err
			}
		case tree:
			real, err := filepath.EvalSymlinks(prefix)
			if err != nil {
				continue
			}
			if reservedExecRoot(real) {
				return jailSpec{}, fmt.Errorf("sandbox: %q cannot be made executable", g)
			}
			s.ExecTrees = append(s.ExecTrees, real)
			rights[real] = true
		default:
			c, err := glob.Compile(g, '/')
			if err != nil {
				return jailSpec{}, err
			}
			n := 0
			_ = filepath.WalkDir(prefix, func(fp string, d fs.DirEntry, err error) error {
				if err != nil || n > maxExecWalk {
					return fs.SkipDir
				}
				n++
				if !d.IsDir() && c.Match(fp) {
					if err := hostProgram(fp); err != nil {
						return err
					}
				}
				return nil
			})
		}
	}
	for _, t := range modTrees {
		s.ExecTrees = append(s.ExecTrees, t)
		s.NoExec = append(s.NoExec, p.programsInCached(t)...)
	}
	trees := s.ExecTrees
	for f := range files {
		if underAny(f, trees) && !slices.Contains(p.noExec, f) {
			continue // executable already
		}
		s.ExecFiles = append(s.ExecFiles, f)
	}
	for _, f := range p.noExec {
		if files[f] || underAny(f, trees[len(p.libDirs):]) {
			continue // granted
		}
		s.NoExec = append(s.NoExec, f)
	}
	for r := range rights {
		s.ExecRights = append(s.ExecRights, r)
	}
	slices.Sort(s.ExecFiles)
	slices.Sort(s.ExecRights)
	if len(s.ExecFiles)+len(s.NoExec)+len(s.ExecRights)+len(s.ExecTrees) > maxJailRules {
		return jailSpec{}, fmt.Errorf("sandbox: jail has more than %d exec rules", maxJailRules)
	}
	return s, nil
}

// hostRel returns p relative to dir when p is dir or below it.
func hostRel(dir, p string) (string, bool) {
	p = path.Clean(p)
	if p == dir {
		return ".", true
	}
	if rel, ok := strings.CutPrefix(p, dir+"/"); ok {
		return rel, true
	}
	return "", false
}
