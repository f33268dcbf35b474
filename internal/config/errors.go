package config

import (
	"errors"
	"fmt"
	"sort"
)

// Error is one problem with a configuration file. Load returns either a
// single *Error or several joined with errors.Join; callers detect both
// with errors.As (cmd/gateway maps them to exit code 2).
type Error struct {
	File    string // the file as named by the caller
	Line    int    // 1-based; 0 when unknown
	Key     string // dotted key path, e.g. "tenants.acme.workspace"; empty for file-level problems
	Problem string // what is wrong
}

// Error formats the problem as "file:line: key: problem", leaving out the
// parts that are unknown.
func (e *Error) Error() string {
	s := e.File
	if e.Line > 0 {
		s += fmt.Sprintf(":%d", e.Line)
	}
	if e.Key != "" {
		s += ": " + e.Key
	}
	return s + ": " + e.Problem
}

// problems collects Errors for one file in the order they are found.
type problems struct {
	file string
	list []*Error
}

func (p *problems) add(line int, key, format string, args ...any) {
	p.list = append(p.list, &Error{File: p.file, Line: line, Key: key, Problem: fmt.Sprintf(format, args...)})
}

// err returns nil, the single Error, or all of them joined in file order so
// that a user fixing the file top to bottom meets them in sequence.
func (p *problems) err() error {
	switch len(p.list) {
	case 0:
		return nil
	case 1:
		return p.list[0]
	}
	sort.SliceStable(p.list, func(i, j int) bool { return p.list[i].Line < p.list[j].Line })
	errs := make([]error, len(p.list))
	for i, e := range p.list {
		errs[i] = e
	}
	return errors.Join(errs...)
}
