package decision

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
)

// BundleOptions configure an OPA bundle as the policy source.
type BundleOptions struct {
	// Location is a bundle file (.tar.gz) or an http(s) bundle server URL.
	Location string
	// Verification, when set, makes signatures mandatory: a bundle without
	// .signatures.json, or one that does not verify with these keys, is
	// rejected. (OPA itself lets an unsigned bundle in when keys exist but
	// the bundle's config has no signing block; here keys always mean
	// signed.)
	Verification *bundle.VerificationConfig
	// PollInterval is how often a URL is polled; default
	// DefaultPollInterval.
	PollInterval time.Duration
	// MaxBackoff bounds the wait after failed polls, which doubles from
	// PollInterval; default DefaultPollMaxBackoff.
	MaxBackoff time.Duration
	// Client fetches URL bundles; default: a client with a 30s timeout.
	Client *http.Client
	// MaxBytes bounds a bundle; default 64 MiB.
	MaxBytes int64
}

// Defaults of the policy source.
const (
	// DefaultReloadDebounce is how long a policy folder must be quiet
	// before it is reloaded.
	DefaultReloadDebounce = 250 * time.Millisecond
	// DefaultPollInterval is how often a bundle URL is polled.
	DefaultPollInterval = 30 * time.Second
	// DefaultPollMaxBackoff bounds the wait after failed bundle polls.
	DefaultPollMaxBackoff = 5 * time.Minute
)

// IsURL reports whether the location is a bundle server URL.
func (b *BundleOptions) IsURL() bool {
	return strings.HasPrefix(b.Location, "http://") || strings.HasPrefix(b.Location, "https://")
}

func (b *BundleOptions) maxBytes() int64 {
	if b.MaxBytes > 0 {
		return b.MaxBytes
	}
	return 64 << 20
}

// errNotModified: the bundle server answered 304; the serving revision
// stays.
var errNotModified = errors.New("bundle not modified")

// sourceName names the policy source in logs.
func (e *Engine) sourceName() string {
	if e.bundle != nil {
		return e.bundle.Location
	}
	return e.dir
}

// readBundle reads the bundle (from its file, or from its server with
// If-None-Match) and verifies it. Defects of the bundle are problems; err
// is for a source that cannot be read at all.
func (e *Engine) readBundle(ctx context.Context) (*source, []Problem, error) {
	raw, err := e.fetchBundle(ctx)
	if err != nil {
		return nil, nil, err
	}
	return bundleSource(raw, e.bundle.Verification)
}

func (e *Engine) fetchBundle(ctx context.Context) ([]byte, error) {
	b := e.bundle
	if !b.IsURL() {
		f, err := os.Open(b.Location)
		if err != nil {
			return nil, errors.New("policy bundle file is missing or unreadable")
		}
		defer f.Close()
		return readCapped(f, b.maxBytes())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.Location, nil)
	if err != nil {
		return nil, errors.New("policy bundle URL is not valid")
	}
	if e.etag != "" {
		req.Header.Set("If-None-Match", e.etag)
	}
	req.Header.Set("Accept", "application/gzip, application/vnd.openpolicyagent.bundles")
	client := b.Client
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		// The error quotes the URL; the status page shows it to admins,
		// who configured it, so only the reason is kept.
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) && ue.Unwrap() != nil {
			err = ue.Unwrap()
		}
		return nil, fmt.Errorf("policy bundle server unreachable: %v", err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotModified:
		return nil, errNotModified
	case http.StatusOK:
	default:
		return nil, fmt.Errorf("policy bundle server answered %d", resp.StatusCode)
	}
	raw, err := readCapped(resp.Body, b.maxBytes())
	if err != nil {
		return nil, err
	}
	// Remembered even if the bundle is then rejected: the same broken
	// bundle is not downloaded again, and the rejection stays in Status.
	e.etag = resp.Header.Get("ETag")
	return raw, nil
}

func readCapped(r io.Reader, max int64) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("reading the policy bundle: %v", err)
	}
	if int64(len(raw)) > max {
		return nil, fmt.Errorf("policy bundle exceeds %d bytes", max)
	}
	return raw, nil
}

// bundleSource reads a bundle tarball into a source: the same shape a
// policy folder gives, with the manifest revision as the revision id.
func bundleSource(raw []byte, vc *bundle.VerificationConfig) (*source, []Problem, error) {
	r := bundle.NewReader(bytes.NewReader(raw)).
		WithRegoVersion(ast.RegoV1).
		WithProcessAnnotations(true)
	if vc != nil {
		r = r.WithBundleVerificationConfig(vc)
	} else {
		r = r.WithSkipBundleVerification(true)
	}
	b, err := r.Read()
	if err != nil {
		return nil, []Problem{{File: "bundle", Message: "bundle rejected: " + err.Error()}}, nil
	}
	if vc != nil && len(b.Signatures.Signatures) == 0 {
		// Belt and braces: keys are configured, so unsigned never passes.
		return nil, []Problem{{File: "bundle", Message: "bundle rejected: it is not signed and signing keys are configured"}}, nil
	}
	src := &source{modules: map[string]*ast.Module{}, data: b.Data, revision: b.Manifest.Revision}
	if src.data == nil {
		src.data = map[string]any{}
	}
	h := sha256.New()
	mods := slices.Clone(b.Modules)
	slices.SortFunc(mods, func(a, b bundle.ModuleFile) int { return strings.Compare(a.Path, b.Path) })
	for _, m := range mods {
		if strings.HasSuffix(m.Path, "_test.rego") {
			continue // served policy never includes tests, as with folders
		}
		p := strings.TrimPrefix(m.Path, "/")
		sum := sha256.Sum256(m.Raw)
		src.modules[p] = m.Parsed
		src.list = append(src.list, Module{Path: p, SHA256: hex.EncodeToString(sum[:])})
		fmt.Fprintf(h, "module %d:%s %x\n", len(p), p, sum)
	}
	data, err := json.Marshal(src.data)
	if err != nil {
		return nil, []Problem{{File: "bundle", Message: "data: " + err.Error()}}, nil
	}
	fmt.Fprintf(h, "data %d:", len(data))
	h.Write(data)
	fmt.Fprintf(h, "\nrevision %s", src.revision)
	src.digest = hex.EncodeToString(h.Sum(nil))
	return src, nil, nil
}

// pollBundle polls a bundle server until ctx ends: every PollInterval
// while it answers, backing off (doubling up to MaxBackoff) while it
// fails. A failed poll or a rejected bundle keeps the serving revision.
func (e *Engine) pollBundle(ctx context.Context) error {
	interval := e.bundle.PollInterval
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	maxBackoff := e.bundle.MaxBackoff
	if maxBackoff < interval {
		maxBackoff = max(interval, DefaultPollMaxBackoff)
	}
	wait := interval
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := e.Load(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// Load counted and logged it (toolgate_policy_reloads_total).
			wait = min(wait*2, maxBackoff)
		} else {
			wait = interval
		}
		t.Reset(wait)
	}
}
