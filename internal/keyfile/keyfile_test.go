package keyfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestReadRefusesUnfitFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(good, 16); err != nil || string(b) != "secret" {
		t.Fatalf("good file: %q %v", b, err)
	}
	open := filepath.Join(dir, "open")
	if err := os.WriteFile(open, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte(strings.Repeat("x", 17)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want error
		msg  string
	}{
		{open, ErrInsecure, "has mode 0644; group and others must have no access (chmod 600 "},
		{big, ErrTooLarge, "is larger than 16 bytes"},
		{dir, ErrNotRegular, "is not a regular file"},
		{filepath.Join(dir, "missing"), os.ErrNotExist, "no such file"},
	} {
		_, err := Read(c.path, 16)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: %v", c.path, err)
		}
	}
}

func TestCreateExclusiveNeverReplacesAndOneWins(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "key")
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := 0
	for i := range 8 {
		wg.Go(func() {
			ok, err := CreateExclusive(path, ".key-*", []byte{byte('a' + i)})
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				created++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	fi, err := os.Stat(path)
	if created != 1 || err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != 1 {
		t.Fatalf("created %d times; %v %v", created, fi, err)
	}
	if ok, err := CreateExclusive(path, ".key-*", []byte("other")); ok || err != nil {
		t.Fatalf("an existing file was replaced: %v %v", ok, err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".key-*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}
