package sandbox

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func TestParseHelperArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    helperConfig
		wantErr string
	}{
		{
			name: "all flags and program arguments that look like flags",
			args: []string{"--write=/w1", "--write=/w2", "--read=/usr", "--net", "--argv0=ls", "--", "/usr/bin/ls", "-la", "--", "x"},
			want: helperConfig{write: []string{"/w1", "/w2"}, read: []string{"/usr"}, network: true, argv0: "ls", path: "/usr/bin/ls", args: []string{"-la", "--", "x"}},
		},
		{
			name: "no directories means nothing writable",
			args: []string{"--", "true"},
			want: helperConfig{path: "true", args: []string{}},
		},
		{name: "program without -- is refused", args: []string{"--write=/w", "ls"}, wantErr: "missing --"},
		{name: "bare program is refused", args: []string{"ls"}, wantErr: "missing --"},
		{name: "no program", args: []string{"--write=/w", "--"}, wantErr: "no program"},
		{name: "empty program", args: []string{"--", ""}, wantErr: "no program"},
		{name: "relative writable directory", args: []string{"--write=w", "--", "ls"}, wantErr: "absolute"},
		{name: "empty writable directory", args: []string{"--write=", "--", "ls"}, wantErr: "absolute"},
		{name: "relative readable directory", args: []string{"--read=usr", "--", "ls"}, wantErr: "absolute"},
		{name: "unknown flag", args: []string{"--bogus", "--", "ls"}, wantErr: "bad arguments"},
		{name: "nothing at all", args: nil, wantErr: "missing --"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseHelperArgs(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// The helper round-trips what Wrap writes: the argument encoding is a
// contract between the two halves.
func TestHelperArgsRoundTrip(t *testing.T) {
	p := Policy{WritableDirs: []string{"/srv/ws", "/srv/tmp dir"}, ReadableDirs: []string{"/usr"}, Network: true}
	args, err := helperArgs("/usr/bin/git", []string{"git", "--", "-c", "--write=/etc"}, p)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := parseHelperArgs(args[1:])
	if err != nil {
		t.Fatal(err)
	}
	want := helperConfig{
		write: p.WritableDirs, read: p.ReadableDirs, network: true, argv0: "git",
		path: "/usr/bin/git", args: []string{"--", "-c", "--write=/etc"},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("got %+v, want %+v", cfg, want)
	}
}

// Bad arguments are a failure to confine: 126, the program is not run, and
// the message names no path.
func TestHelperRefusesBadArgumentsWith126(t *testing.T) {
	var stderr bytes.Buffer
	code := runHelper([]string{"--write=relative/secret-dir", "--", "true"}, &stderr)
	if code != ExitConfineFailed {
		t.Fatalf("exit = %d, want %d", code, ExitConfineFailed)
	}
	if !strings.HasPrefix(stderr.String(), "sandbox-exec: ") || strings.Contains(stderr.String(), "secret-dir") {
		t.Fatalf("stderr = %q", stderr.String())
	}
}

func TestHelperReportsMissingProgramWith127(t *testing.T) {
	var stderr bytes.Buffer
	code := runHelper([]string{"--", "toolgate-no-such-program-7f3a"}, &stderr)
	if code != ExitNotFound {
		t.Fatalf("exit = %d, want %d", code, ExitNotFound)
	}
	if strings.Contains(stderr.String(), "toolgate-no-such-program") {
		t.Fatalf("stderr names the program: %q", stderr.String())
	}
}
