package tlog_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/tlog"
)

func TestKeyFileCreatedPrivateOnFirstUse(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "new", "audit-signing.key")
	s, err := tlog.LoadOrCreateSigner(path, tlog.KeyName)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %04o, want 0600", fi.Mode().Perm())
	}
	if di, _ := os.Stat(filepath.Dir(path)); di.Mode().Perm() != 0o700 {
		t.Fatalf("new key folder mode %04o, want 0700", di.Mode().Perm())
	}
	if !strings.HasPrefix(s.VerifierKey(), "toolgate-audit+") {
		t.Fatalf("verifier key %q", s.VerifierKey())
	}
	data, _ := os.ReadFile(path)
	if n := strings.Count(string(data), "PRIVATE+KEY+toolgate-audit+"); n != 1 {
		t.Fatalf("%d private keys in\n%s", n, data)
	}
	// The second start loads the same key.
	again, err := tlog.LoadOrCreateSigner(path, tlog.KeyName)
	if err != nil || again.VerifierKey() != s.VerifierKey() {
		t.Fatalf("reload: %v, key %q want %q", err, again.VerifierKey(), s.VerifierKey())
	}
	msg, _ := s.Sign(sampleCheckpoint("acme", 1))
	if _, err := again.Verifier().Open(msg, "toolgate/acme"); err != nil {
		t.Fatal(err)
	}
}

func TestKeyFileReadableByOthersIsRefused(t *testing.T) {
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660, 0o602, 0o620, 0o700 | 0o004} {
		path := filepath.Join(t.TempDir(), "k")
		if _, err := tlog.LoadOrCreateSigner(path, tlog.KeyName); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := tlog.LoadOrCreateSigner(path, tlog.KeyName)
		if !errors.Is(err, tlog.ErrInsecureKeyFile) {
			t.Fatalf("mode %04o: err = %v, want ErrInsecureKeyFile", mode, err)
		}
		if !strings.Contains(err.Error(), "chmod 600") || !strings.Contains(err.Error(), path) {
			t.Errorf("mode %04o: error %q does not say what to do", mode, err)
		}
		if _, err := tlog.RotateSigner(path, tlog.KeyName); !errors.Is(err, tlog.ErrInsecureKeyFile) {
			t.Errorf("rotate at mode %04o: err = %v, want ErrInsecureKeyFile", mode, err)
		}
	}
	for _, mode := range []os.FileMode{0o600, 0o400} {
		path := filepath.Join(t.TempDir(), "k")
		tlog.LoadOrCreateSigner(path, tlog.KeyName)
		os.Chmod(path, mode)
		if _, err := tlog.LoadOrCreateSigner(path, tlog.KeyName); err != nil {
			t.Errorf("mode %04o: %v", mode, err)
		}
	}
}

func TestKeyFileMustBeARegularFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k")
	os.Mkdir(path, 0o700)
	if _, err := tlog.LoadOrCreateSigner(path, tlog.KeyName); !errors.Is(err, tlog.ErrInsecureKeyFile) {
		t.Fatalf("folder as key file: err = %v, want ErrInsecureKeyFile", err)
	}
}

func TestKeyFileThroughASymlink(t *testing.T) {
	// As a Kubernetes secret volume mounts it: a link to a private file.
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	s, err := tlog.LoadOrCreateSigner(real, tlog.KeyName)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	os.Symlink(real, link)
	got, err := tlog.LoadOrCreateSigner(link, tlog.KeyName)
	if err != nil || got.VerifierKey() != s.VerifierKey() {
		t.Fatalf("through a link: %v", err)
	}
}

func TestKeyFileContents(t *testing.T) {
	skey := newKey(t, tlog.KeyName)
	prev, _ := newSigner(t)
	cases := []struct {
		name, body string
		want       error
	}{
		{"comments, blanks and CRLF", "# c\r\n\r\n" + skey + "\r\n# previous\r\n" + prev.VerifierKey() + "\r\n", nil},
		{"no private key", "# nothing\n" + prev.VerifierKey() + "\n", tlog.ErrBadKeyFile},
		{"empty", "", tlog.ErrBadKeyFile},
		{"two private keys", skey + "\n" + newKey(t, tlog.KeyName) + "\n", tlog.ErrBadKeyFile},
		{"garbage line", skey + "\nnot a key\n", tlog.ErrBadKeyFile},
		{"mangled private key", strings.Replace(skey, "PRIVATE+KEY+", "PRIVATE+KEY+x", 1) + "\n", tlog.ErrBadKeyFile},
		{"private key of another name", newKey(t, "other-name") + "\n", tlog.ErrBadKeyFile},
	}
	for _, c := range cases {
		path := filepath.Join(t.TempDir(), "k")
		if err := os.WriteFile(path, []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := tlog.LoadOrCreateSigner(path, tlog.KeyName)
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
			continue
		}
		if err != nil && strings.Contains(err.Error(), "PRIVATE") {
			t.Errorf("%s: error shows key material: %v", c.name, err)
		}
		if err == nil && len(s.Verifier().Keys()) != 2 {
			t.Errorf("%s: %d verifier keys, want current and previous", c.name, len(s.Verifier().Keys()))
		}
	}
	// A file that is not there is created, never a file that is broken.
	path := filepath.Join(t.TempDir(), "k")
	os.WriteFile(path, []byte("broken\n"), 0o600)
	tlog.LoadOrCreateSigner(path, tlog.KeyName)
	if data, _ := os.ReadFile(path); string(data) != "broken\n" {
		t.Fatal("a broken key file was overwritten")
	}
}

func TestRotationKeepsOldCheckpointsVerifiable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k")
	first, err := tlog.LoadOrCreateSigner(path, tlog.KeyName)
	if err != nil {
		t.Fatal(err)
	}
	firstSKey, _ := os.ReadFile(path)
	note1, _ := first.Sign(sampleCheckpoint("acme", 1))

	second, err := tlog.RotateSigner(path, tlog.KeyName)
	if err != nil {
		t.Fatal(err)
	}
	note2, _ := second.Sign(sampleCheckpoint("acme", 2))
	third, err := tlog.RotateSigner(path, tlog.KeyName)
	if err != nil {
		t.Fatal(err)
	}
	note3, _ := third.Sign(sampleCheckpoint("acme", 3))

	if first.VerifierKey() == second.VerifierKey() || second.VerifierKey() == third.VerifierKey() {
		t.Fatal("rotation kept the key")
	}
	loaded, err := tlog.LoadOrCreateSigner(path, tlog.KeyName)
	if err != nil || loaded.VerifierKey() != third.VerifierKey() {
		t.Fatalf("after rotation the file loads %v, %v", loaded, err)
	}
	want := []string{third.VerifierKey(), second.VerifierKey(), first.VerifierKey()}
	if got := loaded.Verifier().Keys(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("keys %q, want newest first %q", got, want)
	}
	for i, msg := range [][]byte{note1, note2, note3} {
		if _, err := loaded.Verifier().Open(msg, "toolgate/acme"); err != nil {
			t.Errorf("checkpoint %d after rotation: %v", i+1, err)
		}
	}
	data, _ := os.ReadFile(path)
	if strings.Count(string(data), "\nPRIVATE+KEY+") != 1 {
		t.Fatalf("rotated file keeps retired private keys:\n%s", data)
	}
	for _, line := range strings.Split(string(firstSKey), "\n") {
		if strings.HasPrefix(line, "PRIVATE+KEY") && strings.Contains(string(data), line) {
			t.Fatal("the first private key is still in the file")
		}
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("rotated file mode %04o", fi.Mode().Perm())
	}
	if _, err := tlog.RotateSigner(filepath.Join(t.TempDir(), "none"), tlog.KeyName); err == nil {
		t.Fatal("rotating a missing key file created one")
	}
}

func TestReplicasStartingAtOnceAgreeOnOneKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k")
	keys := make([]string, 8)
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			s, err := tlog.LoadOrCreateSigner(path, tlog.KeyName)
			if err == nil {
				keys[i] = s.VerifierKey()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i := range keys {
		if errs[i] != nil || keys[i] != keys[0] {
			t.Fatalf("replica %d: %v, key %q, replica 0 has %q", i, errs[i], keys[i], keys[0])
		}
	}
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".toolgate-audit-key-*"))
	if len(leftovers) != 0 {
		t.Fatalf("temporary files left: %v", leftovers)
	}
}
