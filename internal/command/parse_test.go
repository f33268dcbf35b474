package command

import (
	"sync"
	"testing"
)

// Commands are prepared concurrently (a batch prepares its calls at once):
// analysis must share no state. Run with -race.
func TestAnalyzeIsSafeConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := Parse("sleep 1 && echo 'a b' done")
			if err != nil {
				t.Error(err)
				return
			}
			if a := Analyze(f, "sleep 1 && echo 'a b' done"); !a.Plain || len(a.Segments) != 2 || a.Segments[1][1] != "a b" {
				t.Errorf("analysis %+v", a)
			}
		}()
	}
	wg.Wait()
}

func TestArgvMatching(t *testing.T) {
	const home = "/workspace"
	cases := []struct {
		command string
		argv    []string
		want    bool
	}{
		{"git log -1", []string{"git", "log", "-1"}, true},
		{"git log -1", []string{"git", "log"}, false},
		{"git log -1", []string{"git", "log", "-1", "x"}, false},
		{`echo "a;b"`, []string{"echo", "a;b"}, true},
		{`echo "a;b"`, []string{"echo", "a", "b"}, false},
		{"ls *.go", []string{"ls", "a.go", "b.go"}, true},
		{"ls *.go", []string{"ls", "*.go"}, true}, // no match: the word stays
		{"ls *.go", []string{"ls"}, false},
		{"ls *.go", []string{"ls", "a.go", "x.txt"}, false},
		{"ls *.go", []string{"ls", "dir/a.go"}, false},
		{"ls '*'.go", []string{"ls", "a.go"}, false}, // quoted: literal
		{"cp *.go dst/", []string{"cp", "a.go", "b.go", "dst/"}, true},
		{"cp *.go dst/", []string{"cp", "dst/"}, false},
		{"touch {a,b}.txt", []string{"touch", "a.txt", "b.txt"}, true},
		{"touch {a,b}.txt", []string{"touch", "a.txt"}, false},
		{"ls ~/x", []string{"ls", home + "/x"}, true},
		{"ls ~/x", []string{"ls", "/root/x"}, false},
		{"$c hi", []string{"id", "hi"}, false},
		{"ls $d", []string{"ls", "$d"}, false},
		{"ls $d", []string{"ls"}, false},
	}
	for _, c := range cases {
		f, err := Parse(c.command)
		if err != nil {
			t.Fatal(err)
		}
		set := NewApproved(Analyze(f, c.command).Words, home)
		if got := set.Match(c.argv); got != c.want {
			t.Errorf("%q matches %q = %v, want %v", c.command, c.argv, got, c.want)
		}
	}
}
