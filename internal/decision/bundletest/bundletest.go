// Package bundletest builds OPA bundles (optionally signed) for tests, the
// way `opa build [--signing-key]` does, through OPA's own bundle package.
package bundletest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
)

// Signer signs bundles with an RSA key (RS256).
type Signer struct {
	KeyID      string
	privatePEM string
	// PublicPEM is the PEM public key that verifies the signatures.
	PublicPEM string
}

// NewSigner makes a fresh 2048-bit RSA key.
func NewSigner(keyID string) (*Signer, error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return nil, err
	}
	return &Signer{
		KeyID:      keyID,
		privatePEM: string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})),
		PublicPEM:  string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})),
	}, nil
}

// ReadDir returns the policy files of a folder (Rego modules and data
// files, no tests), keyed by slash path, for Build.
func ReadDir(dir string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name := d.Name()
		if strings.HasSuffix(name, "_test.rego") || !(strings.HasSuffix(name, ".rego") || name == "data.json" || name == "data.yaml") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	return out, err
}

// Build returns a bundle tarball of files with a manifest naming revision,
// signed by s when s is not nil.
func Build(files map[string][]byte, revision string, s *Signer) ([]byte, error) {
	all := map[string][]byte{}
	for k, v := range files {
		all[k] = v
	}
	manifest, _ := json.Marshal(map[string]any{"revision": revision})
	all[".manifest"] = manifest
	raw, err := tarball(all)
	if err != nil || s == nil {
		return raw, err
	}
	b, err := bundle.NewReader(bytes.NewReader(raw)).WithRegoVersion(ast.RegoV1).WithSkipBundleVerification(true).Read()
	if err != nil {
		return nil, err
	}
	if err := b.GenerateSignature(bundle.NewSigningConfig(s.privatePEM, "RS256", ""), s.KeyID, false); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := bundle.NewWriter(&buf).Write(b); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Tamper rewrites one file of a bundle tarball, keeping its signatures: a
// bundle that must then fail verification.
func Tamper(raw []byte, name string, content []byte) ([]byte, error) {
	files, err := untar(raw)
	if err != nil {
		return nil, err
	}
	files["/"+strings.TrimPrefix(name, "/")] = content
	delete(files, name)
	return tarball(files)
}

func tarball(files map[string][]byte) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(files[n]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func untar(raw []byte) (map[string][]byte, error) {
	gz, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(gz)
	out := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err != nil {
			if err.Error() == "EOF" {
				return out, nil
			}
			return nil, err
		}
		var b bytes.Buffer
		if _, err := b.ReadFrom(tr); err != nil {
			return nil, err
		}
		out[h.Name] = b.Bytes()
	}
}
