package tlog_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/toolgate/toolgate/internal/tlog"
)

// newKey returns a fresh note signer key named name.
func newKey(t testing.TB, name string) string {
	t.Helper()
	skey, _, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	return skey
}

func newSigner(t testing.TB, previous ...string) (*tlog.Signer, string) {
	t.Helper()
	skey := newKey(t, tlog.KeyName)
	s, err := tlog.NewSigner(skey, previous...)
	if err != nil {
		t.Fatal(err)
	}
	return s, skey
}

func sampleCheckpoint(tenant string, size uint64) tlog.Checkpoint {
	r := sha256.Sum256(fmt.Appendf(nil, "root %s %d", tenant, size))
	return tlog.Checkpoint{Origin: tlog.Origin(tenant), Size: size, Root: r[:]}
}

func TestCheckpointRoundTrip(t *testing.T) {
	s, _ := newSigner(t)
	for _, size := range []uint64{0, 1, 1 << 40} {
		cp := sampleCheckpoint("acme", size)
		msg, err := s.Sign(cp)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Verifier().Open(msg, "toolgate/acme")
		if err != nil {
			t.Fatalf("size %d: %v\n%s", size, err, msg)
		}
		if got.Origin != cp.Origin || got.Size != cp.Size || !bytes.Equal(got.Root, cp.Root) {
			t.Fatalf("opened %+v, signed %+v", got, cp)
		}
	}
}

func TestCheckpointLayout(t *testing.T) {
	s, _ := newSigner(t)
	cp := sampleCheckpoint("acme", 42)
	msg, _ := s.Sign(cp)
	lines := strings.Split(string(msg), "\n")
	want := []string{"toolgate/acme", "42", base64.StdEncoding.EncodeToString(cp.Root), ""}
	if len(lines) != 6 || strings.Join(lines[:4], "\n") != strings.Join(want, "\n") ||
		!strings.HasPrefix(lines[4], "— toolgate-audit ") || lines[5] != "" {
		t.Fatalf("note layout:\n%s", msg)
	}
}

// TestSignedNoteVerifiesIndependently checks a checkpoint the way a third
// party following the C2SP signed-note spec would, with crypto/ed25519 and
// no note library: the verifier key's hash, the signature line, the
// signature over the body, and the checkpoint body.
func TestSignedNoteVerifiesIndependently(t *testing.T) {
	s, _ := newSigner(t)
	cp := sampleCheckpoint("tenant-a", 1234567)
	msg, err := s.Sign(cp)
	if err != nil {
		t.Fatal(err)
	}

	name, keyHash, pub := parseVerifierKey(t, s.VerifierKey())
	if name != "toolgate-audit" {
		t.Fatalf("key name %q", name)
	}
	body, sigs := splitNote(t, msg)
	if len(sigs) != 1 {
		t.Fatalf("%d signature lines", len(sigs))
	}
	sigName, sig := parseSigLine(t, sigs[0])
	if sigName != name || !bytes.Equal(sig[:4], keyHash) {
		t.Fatalf("signature line names %s+%x, key is %s+%x", sigName, sig[:4], name, keyHash)
	}
	if !ed25519.Verify(pub, body, sig[4:]) {
		t.Fatal("Ed25519 signature over the note text does not verify")
	}
	// The body is the C2SP tlog-checkpoint: origin, decimal size, base64 root.
	b := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if len(b) != 3 || b[0] != "toolgate/tenant-a" {
		t.Fatalf("body %q", body)
	}
	size, err := strconv.ParseUint(b[1], 10, 64)
	root, err2 := base64.StdEncoding.DecodeString(b[2])
	if err != nil || err2 != nil || size != cp.Size || !bytes.Equal(root, cp.Root) {
		t.Fatalf("body %q does not carry size %d and root %x", body, cp.Size, cp.Root)
	}

	// The same check rejects an edited body, and a note another key signed.
	edited := bytes.Replace(body, []byte("1234567"), []byte("1234566"), 1)
	if ed25519.Verify(pub, edited, sig[4:]) {
		t.Fatal("edited body verifies")
	}
	other, _ := newSigner(t)
	forged, _ := other.Sign(cp)
	_, fsigs := splitNote(t, forged)
	_, fsig := parseSigLine(t, fsigs[0])
	if bytes.Equal(fsig[:4], keyHash) || ed25519.Verify(pub, body, fsig[4:]) {
		t.Fatal("another key's signature passes as ours")
	}
}

// TestOpensNotesWrittenIndependently goes the other way: a key and a
// signed checkpoint built by hand from the spec open with our Verifier.
func TestOpensNotesWrittenIndependently(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	name := "toolgate-audit"
	kh := specKeyHash(name, pub)
	vkey := fmt.Sprintf("%s+%x+%s", name, kh, base64.StdEncoding.EncodeToString(append([]byte{1}, pub...)))
	root := sha256.Sum256([]byte("r"))
	body := "toolgate/acme\n7\n" + base64.StdEncoding.EncodeToString(root[:]) + "\n"
	sig := append(append([]byte(nil), kh...), ed25519.Sign(priv, []byte(body))...)
	msg := body + "\n— " + name + " " + base64.StdEncoding.EncodeToString(sig) + "\n"

	v, err := tlog.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := v.Open([]byte(msg), "toolgate/acme")
	if err != nil || cp.Size != 7 || !bytes.Equal(cp.Root, root[:]) {
		t.Fatalf("Open = %+v, %v", cp, err)
	}
	// The private key written by hand, as note.GenerateKey would, signs
	// checkpoints that open with the hand-made verifier key.
	skey := fmt.Sprintf("PRIVATE+KEY+%s+%x+%s", name, kh, base64.StdEncoding.EncodeToString(append([]byte{1}, priv.Seed()...)))
	s, err := tlog.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	if s.VerifierKey() != vkey {
		t.Fatalf("verifier key %q, want %q", s.VerifierKey(), vkey)
	}
}

func TestVerifierKeyIsTheGeneratedOne(t *testing.T) {
	// 64 keys: about half have a "+" in their base64, which must not
	// confuse the parsing of "PRIVATE+KEY+name+hash+key".
	plus := 0
	for range 64 {
		skey, vkey, err := note.GenerateKey(rand.Reader, tlog.KeyName)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Count(skey, "+") > 4 {
			plus++
		}
		s, err := tlog.NewSigner(skey)
		if err != nil {
			t.Fatalf("%v (key has %d +)", err, strings.Count(skey, "+"))
		}
		if s.VerifierKey() != vkey || s.Name() != tlog.KeyName {
			t.Fatalf("verifier key %q, note.GenerateKey says %q", s.VerifierKey(), vkey)
		}
	}
	if plus == 0 {
		t.Log("no key with + in its base64 this run")
	}
}

func TestOpenRejects(t *testing.T) {
	s, skey := newSigner(t)
	cp := sampleCheckpoint("acme", 10)
	good, _ := s.Sign(cp)

	// Notes signed with our own key but with bodies this log never writes.
	ours, _ := note.NewSigner(skey)
	signBody := func(body string) []byte {
		msg, err := note.Sign(&note.Note{Text: body}, ours)
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	b64root := base64.StdEncoding.EncodeToString(cp.Root)

	otherSameName, _ := newSigner(t)
	otherName, err := tlog.NewSigner(newKey(t, "someone-else"))
	if err != nil {
		t.Fatal(err)
	}
	forgedSameName, _ := otherSameName.Sign(cp)
	forgedOtherName, _ := otherName.Sign(cp)

	cases := []struct {
		name string
		msg  []byte
		want error
	}{
		{"another tenant's origin", mustSign(t, s, sampleCheckpoint("other", 10)), tlog.ErrWrongOrigin},
		{"origin with a suffix", mustSign(t, s, tlog.Checkpoint{Origin: "toolgate/acme2", Size: 1, Root: cp.Root}), tlog.ErrWrongOrigin},
		{"forged with another key of the same name", forgedSameName, tlog.ErrUnknownKey},
		{"forged with a key of another name", forgedOtherName, tlog.ErrUnknownKey},
		{"body edited after signing", bytes.Replace(good, []byte("\n10\n"), []byte("\n11\n"), 1), tlog.ErrBadSignature},
		{"root edited after signing", editRoot(good), tlog.ErrBadSignature},
		{"our signature line under a forged body", append([]byte("toolgate/acme\n11\n"+b64root+"\n"), good[bytes.LastIndex(good, []byte("\n\n")):]...), tlog.ErrBadSignature},
		{"no signature", []byte("toolgate/acme\n10\n" + b64root + "\n"), tlog.ErrMalformedCheckpoint},
		{"empty", nil, tlog.ErrMalformedCheckpoint},
		{"garbage", []byte("hello\n\n— x y\n"), tlog.ErrMalformedCheckpoint},
		{"extension line", signBody("toolgate/acme\n10\n" + b64root + "\nextra\n"), tlog.ErrMalformedCheckpoint},
		{"leading zero size", signBody("toolgate/acme\n010\n" + b64root + "\n"), tlog.ErrMalformedCheckpoint},
		{"negative size", signBody("toolgate/acme\n-1\n" + b64root + "\n"), tlog.ErrMalformedCheckpoint},
		{"size with a plus", signBody("toolgate/acme\n+10\n" + b64root + "\n"), tlog.ErrMalformedCheckpoint},
		{"size overflows", signBody("toolgate/acme\n18446744073709551616\n" + b64root + "\n"), tlog.ErrMalformedCheckpoint},
		{"short root", signBody("toolgate/acme\n10\n" + base64.StdEncoding.EncodeToString(cp.Root[:31]) + "\n"), tlog.ErrMalformedCheckpoint},
		{"root not base64", signBody("toolgate/acme\n10\nnot base64!\n"), tlog.ErrMalformedCheckpoint},
		{"no root line", signBody("toolgate/acme\n10\n"), tlog.ErrMalformedCheckpoint},
		{"empty origin", signBody("\n10\n" + b64root + "\n"), tlog.ErrMalformedCheckpoint},
	}
	for _, c := range cases {
		_, err := s.Verifier().Open(c.msg, "toolgate/acme")
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := s.Verifier().Open(good, "toolgate/acme"); err != nil {
		t.Fatalf("the untampered note no longer opens: %v", err)
	}
}

func TestWitnessCosignaturesAreIgnored(t *testing.T) {
	s, _ := newSigner(t)
	witness, _ := note.NewSigner(newKey(t, "witness.example"))
	msg, _ := s.Sign(sampleCheckpoint("acme", 3))
	n, err := note.Open(msg, note.VerifierList(mustNoteVerifier(t, s.VerifierKey())))
	if err != nil {
		t.Fatal(err)
	}
	cosigned, err := note.Sign(n, witness)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verifier().Open(cosigned, "toolgate/acme"); err != nil {
		t.Fatalf("cosigned checkpoint: %v", err)
	}
	// A witness alone is not the log.
	alone, _ := note.Sign(&note.Note{Text: n.Text}, witness)
	if _, err := s.Verifier().Open(alone, "toolgate/acme"); !errors.Is(err, tlog.ErrUnknownKey) {
		t.Fatalf("witness-only checkpoint: err = %v, want ErrUnknownKey", err)
	}
}

func TestPreviousKeysStillVerify(t *testing.T) {
	old, _ := newSigner(t)
	oldNote, _ := old.Sign(sampleCheckpoint("acme", 5))
	cur, _ := newSigner(t, old.VerifierKey())
	curNote, _ := cur.Sign(sampleCheckpoint("acme", 9))
	for _, msg := range [][]byte{oldNote, curNote} {
		if _, err := cur.Verifier().Open(msg, "toolgate/acme"); err != nil {
			t.Errorf("with previous keys: %v", err)
		}
	}
	if got := cur.Verifier().Keys(); len(got) != 2 || got[0] != cur.VerifierKey() || got[1] != old.VerifierKey() {
		t.Errorf("Keys() = %q, want current then previous", got)
	}
	onlyCurrent, _ := tlog.NewVerifier(cur.VerifierKey())
	if _, err := onlyCurrent.Open(oldNote, "toolgate/acme"); !errors.Is(err, tlog.ErrUnknownKey) {
		t.Errorf("old note with only the current key: err = %v, want ErrUnknownKey", err)
	}
}

func TestSignRejects(t *testing.T) {
	s, _ := newSigner(t)
	root := make([]byte, 32)
	for _, cp := range []tlog.Checkpoint{
		{Origin: "", Size: 1, Root: root},
		{Origin: "toolgate/a\n5", Size: 1, Root: root},
		{Origin: "toolgate/a\tb", Size: 1, Root: root},
		{Origin: "toolgate/\xff", Size: 1, Root: root},
		{Origin: "toolgate/a", Size: 1, Root: root[:31]},
		{Origin: "toolgate/a", Size: 1, Root: nil},
	} {
		if msg, err := s.Sign(cp); err == nil {
			t.Errorf("Sign(%q, root %d bytes) = %q", cp.Origin, len(cp.Root), msg)
		}
	}
}

func TestBadKeys(t *testing.T) {
	for _, k := range []string{"", "toolgate-audit", "toolgate-audit+00000000+AAAA", "PRIVATE+KEY+x+1+2"} {
		if _, err := tlog.NewVerifier(k); !errors.Is(err, tlog.ErrBadKey) {
			t.Errorf("NewVerifier(%q): err = %v, want ErrBadKey", k, err)
		}
	}
	if _, err := tlog.NewVerifier(); !errors.Is(err, tlog.ErrBadKey) {
		t.Errorf("NewVerifier(): err = %v, want ErrBadKey", err)
	}
	s, _ := newSigner(t)
	if _, err := tlog.NewSigner(s.VerifierKey()); !errors.Is(err, tlog.ErrBadKey) {
		t.Errorf("NewSigner(verifier key): err = %v, want ErrBadKey", err)
	}
	// Duplicates of one key are one key, not an ambiguity.
	v, err := tlog.NewVerifier(s.VerifierKey(), s.VerifierKey())
	if err != nil || len(v.Keys()) != 1 {
		t.Fatalf("duplicate keys: %v, %d keys", err, len(v.Keys()))
	}
	msg, _ := s.Sign(sampleCheckpoint("acme", 1))
	if _, err := v.Open(msg, "toolgate/acme"); err != nil {
		t.Fatal(err)
	}
}

func mustSign(t *testing.T, s *tlog.Signer, cp tlog.Checkpoint) []byte {
	t.Helper()
	msg, err := s.Sign(cp)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func mustNoteVerifier(t *testing.T, vkey string) note.Verifier {
	t.Helper()
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// editRoot flips a bit of the root in a signed checkpoint's body.
func editRoot(msg []byte) []byte {
	lines := bytes.SplitN(msg, []byte("\n"), 4)
	root, _ := base64.StdEncoding.DecodeString(string(lines[2]))
	root[0] ^= 1
	lines[2] = []byte(base64.StdEncoding.EncodeToString(root))
	return bytes.Join(lines, []byte("\n"))
}

// specKeyHash is the C2SP signed-note key ID of an Ed25519 key: the first
// 4 bytes of SHA-256(name || "\n" || 0x01 || public key).
func specKeyHash(name string, pub ed25519.PublicKey) []byte {
	h := sha256.New()
	h.Write([]byte(name + "\n"))
	h.Write([]byte{0x01})
	h.Write(pub)
	return h.Sum(nil)[:4]
}

// parseVerifierKey reads "name+hash+base64(0x01||pub)" and checks the hash.
func parseVerifierKey(t *testing.T, vkey string) (string, []byte, ed25519.PublicKey) {
	t.Helper()
	// name+hash+key; the base64 key may itself hold "+".
	name, rest, ok1 := strings.Cut(vkey, "+")
	hash, key, ok2 := strings.Cut(rest, "+")
	if !ok1 || !ok2 {
		t.Fatalf("verifier key %q has fewer than 3 fields", vkey)
	}
	parts := []string{name, hash, key}
	kh, err := hex.DecodeString(parts[1])
	if err != nil || len(kh) != 4 {
		t.Fatalf("key hash %q", parts[1])
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 1+ed25519.PublicKeySize || raw[0] != 0x01 {
		t.Fatalf("key %q is not an Ed25519 key", parts[2])
	}
	pub := ed25519.PublicKey(raw[1:])
	if want := specKeyHash(parts[0], pub); !bytes.Equal(kh, want) {
		t.Fatalf("key hash %x, spec says %x", kh, want)
	}
	return parts[0], kh, pub
}

// splitNote splits a note into its text (ending in one newline) and its
// signature lines, per the spec: the text ends at the last blank line.
func splitNote(t *testing.T, msg []byte) ([]byte, []string) {
	t.Helper()
	i := bytes.LastIndex(msg, []byte("\n\n"))
	if i < 0 || !bytes.HasSuffix(msg, []byte("\n")) {
		t.Fatalf("not a signed note: %q", msg)
	}
	return msg[:i+1], strings.Split(strings.TrimSuffix(string(msg[i+2:]), "\n"), "\n")
}

// parseSigLine reads "— name base64(keyhash||signature)".
func parseSigLine(t *testing.T, line string) (string, []byte) {
	t.Helper()
	rest, ok := strings.CutPrefix(line, "\u2014 ")
	name, b64, ok2 := strings.Cut(rest, " ")
	sig, err := base64.StdEncoding.DecodeString(b64)
	if !ok || !ok2 || err != nil || len(sig) != 4+ed25519.SignatureSize {
		t.Fatalf("signature line %q", line)
	}
	return name, sig
}
