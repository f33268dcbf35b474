package mcptool

import (
	"context"
	"fmt"

	"github.com/toolgate/toolgate/internal/tools"
)

// List returns the definitions the upstream publishes now, in its order
// (at most MaxTools). Definitions that cannot be read are returned with an
// empty Digest and their error in the map.
func (u *Upstream) List(ctx context.Context) ([]Definition, map[string]error, error) {
	s, err := u.session(ctx)
	if err != nil {
		return nil, nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, u.o.Timeout)
	defer cancel()
	var defs []Definition
	bad := map[string]error{}
	for t, err := range s.Tools(lctx, nil) {
		if err != nil {
			u.drop(s)
			return nil, nil, fmt.Errorf("mcp upstream %s: tools/list: %w", u.o.Namespace, err)
		}
		if len(defs) >= MaxTools {
			u.o.Logger.Warn("mcp upstream lists too many tools; the rest are ignored", "upstream", u.o.Namespace, "max", MaxTools)
			break
		}
		d, err := DefinitionOf(t)
		if err != nil {
			bad[t.Name] = err
			d = Definition{Name: t.Name}
		}
		defs = append(defs, d)
	}
	return defs, bad, nil
}

// Discover lists the upstream's tools and builds the ones to offer: in
// the allow-list (when set), with a valid and unique gateway name, a
// schema that compiles, and (when pinned) the pinned digest. Everything
// else is reported through OnDrift. It is called once, at start.
func (u *Upstream) Discover(ctx context.Context) ([]*Tool, error) {
	defs, bad, err := u.List(ctx)
	if err != nil {
		return nil, err
	}
	u.beginReports()
	defer u.endReports(defs)
	policy := u.policyPins(ctx)
	// Names that occur twice, or collide once normalized, offer none of
	// their claimants: the upstream's list is ambiguous.
	byGateway := map[string]int{}
	byName := map[string]int{}
	for _, d := range defs {
		byName[d.Name]++
		byGateway[Normalize(u.o.Namespace, d.Name)]++
	}
	var out []*Tool
	for _, d := range defs {
		if u.o.Allow != nil && !u.o.Allow[d.Name] {
			continue
		}
		gw := Normalize(u.o.Namespace, d.Name)
		invalid := func(detail string) {
			u.report(Drift{Upstream: u.o.Namespace, Tool: d.Name, GatewayTool: gw, Kind: DriftInvalid,
				PinnedDigest: u.o.Pins[d.Name], CurrentDigest: d.Digest, Detail: detail})
		}
		switch {
		case bad[d.Name] != nil:
			invalid(bad[d.Name].Error())
			continue
		case byName[d.Name] > 1:
			invalid("the upstream lists this tool name more than once")
			continue
		case !tools.ValidName(gw):
			invalid("the tool's name does not make a valid gateway tool name")
			continue
		case byGateway[gw] > 1:
			invalid("the tool's name collides with another of the upstream's tools once normalized to " + gw)
			continue
		}
		if u.o.Pinned {
			if ok, pin := u.approved(policy, d.Name, d.Digest); !ok {
				if pin == "" {
					u.report(Drift{Upstream: u.o.Namespace, Tool: d.Name, GatewayTool: gw, Kind: DriftUnpinned, CurrentDigest: d.Digest,
						Detail: "no pin in mcp.lock.json or the policy's data"})
				} else {
					u.report(Drift{Upstream: u.o.Namespace, Tool: d.Name, GatewayTool: gw, Kind: DriftChanged, PinnedDigest: pin, CurrentDigest: d.Digest,
						Detail: "the definition differs from its pin"})
				}
				continue
			}
		}
		t, err := newTool(u, gw, d)
		if err != nil {
			invalid(err.Error())
			continue
		}
		u.tools[d.Name] = t
		out = append(out, t)
	}
	return out, nil
}

// OfferPinned is Discover for an upstream that cannot be listed at start:
// it builds the tools pinned in the lock (pins, by upstream tool name) from
// their pinned definitions, each withheld with reason until a listing shows
// the upstream offers exactly that definition (Refresh). A pin whose
// definition does not hash to its digest, or that could not be offered
// (name, schema), is skipped.
func (u *Upstream) OfferPinned(pins map[string]*Pin, reason string) []*Tool {
	var out []*Tool
	seen := map[string]bool{}
	for _, name := range sortedNames(pins) {
		p := pins[name]
		if u.o.Allow != nil && !u.o.Allow[name] {
			continue
		}
		d := Definition{Name: name, Description: p.Description, InputSchema: p.InputSchema, Annotations: p.Annotations}
		gw := Normalize(u.o.Namespace, name)
		if d.seal() != nil || d.Digest != p.Digest || d.InputSchema == nil || !tools.ValidName(gw) || seen[gw] {
			u.o.Logger.Warn("mcp pin not offered: its definition does not match its digest or cannot be offered", "upstream", u.o.Namespace, "tool", name)
			continue
		}
		t, err := newTool(u, gw, d)
		if err != nil {
			u.o.Logger.Warn("mcp pin not offered", "upstream", u.o.Namespace, "tool", name, "err", err)
			continue
		}
		seen[gw] = true
		t.withhold(reason)
		u.tools[name] = t
		out = append(out, t)
	}
	return out
}

// Refresh lists the tools again. An offered tool whose definition no
// longer matches the one it was offered with (its pin, or with pinning off
// the definition at start), or that vanished, is withheld until it matches
// again; new tools are reported (they are offered only after pinning and a
// restart). A failed listing withholds nothing: calls fail on their own.
func (u *Upstream) Refresh(ctx context.Context) error {
	defs, _, err := u.List(ctx)
	if err != nil {
		return err
	}
	u.beginReports()
	defer u.endReports(defs)
	policy := u.policyPins(ctx)
	seen := map[string]Definition{}
	count := map[string]int{}
	for _, d := range defs {
		count[d.Name]++
		seen[d.Name] = d
	}
	for name, t := range u.tools {
		d, ok := seen[name]
		switch {
		case !ok:
			t.withhold("the upstream no longer lists the tool")
			u.report(Drift{Upstream: u.o.Namespace, Tool: name, GatewayTool: t.spec.Name, Kind: DriftRemoved, PinnedDigest: t.spec.DefinitionDigest,
				Detail: "the upstream no longer lists the tool"})
		case count[name] > 1:
			t.withhold("the upstream lists the tool more than once")
			u.report(Drift{Upstream: u.o.Namespace, Tool: name, GatewayTool: t.spec.Name, Kind: DriftInvalid, PinnedDigest: t.spec.DefinitionDigest,
				CurrentDigest: d.Digest, Detail: "the upstream lists this tool name more than once"})
		case d.Digest != t.spec.DefinitionDigest:
			t.withhold("the tool's definition drifted from its pin")
			u.report(Drift{Upstream: u.o.Namespace, Tool: name, GatewayTool: t.spec.Name, Kind: DriftChanged, PinnedDigest: t.spec.DefinitionDigest,
				CurrentDigest: d.Digest, Detail: "the definition differs from its pin"})
		case u.o.Pinned && !approvedNow(u, policy, name, d.Digest):
			t.withhold("the tool's definition is no longer pinned")
			u.report(Drift{Upstream: u.o.Namespace, Tool: name, GatewayTool: t.spec.Name, Kind: DriftUnpinned,
				CurrentDigest: d.Digest, Detail: "the pin that approved the definition was withdrawn"})
		default:
			if t.withhold("") {
				u.o.Logger.Info("mcp tool matches its pin again; offered", "tool", t.spec.Name)
			}
			u.mu.Lock()
			delete(u.reported, name)
			u.mu.Unlock()
		}
	}
	for _, d := range defs {
		if _, offered := u.tools[d.Name]; offered || (u.o.Allow != nil && !u.o.Allow[d.Name]) {
			continue
		}
		kind, detail := DriftUnpinned, "a new tool (pin it and restart to offer it)"
		ok, pin := u.approved(policy, d.Name, d.Digest)
		if !ok && pin != "" {
			kind, detail = DriftChanged, "the definition differs from its pin"
		} else if ok || !u.o.Pinned {
			detail = "a tool not offered at start (restart to offer it)"
		}
		u.report(Drift{Upstream: u.o.Namespace, Tool: d.Name, GatewayTool: Normalize(u.o.Namespace, d.Name), Kind: kind,
			PinnedDigest: pin, CurrentDigest: d.Digest, Detail: detail})
	}
	return nil
}

func (u *Upstream) beginReports() {
	u.mu.Lock()
	u.reports, u.suppressed = 0, 0
	u.mu.Unlock()
}

// endReports sums up the drifts not reported one by one, and forgets
// tools the upstream no longer lists (unless offered), so the memory of
// what was reported stays bounded by one listing.
func (u *Upstream) endReports(defs []Definition) {
	listed := make(map[string]bool, len(defs))
	for _, d := range defs {
		listed[d.Name] = true
	}
	u.mu.Lock()
	for name := range u.reported {
		if _, offered := u.tools[name]; !offered && !listed[name] {
			delete(u.reported, name)
		}
	}
	n := u.suppressed
	u.mu.Unlock()
	if n == 0 {
		return
	}
	d := Drift{Upstream: u.o.Namespace, Kind: DriftInvalid,
		Detail: fmt.Sprintf("%d more tool definitions not offered (not recorded one by one)", n)}
	u.o.Logger.Warn("mcp tool definitions not offered", "upstream", d.Upstream, "more", n)
	if u.o.OnDrift != nil {
		u.o.OnDrift(d)
	}
}

// policyPins are the current policy's pins of this upstream (nil without).
func (u *Upstream) policyPins(ctx context.Context) map[string]string {
	if u.o.PolicyPins == nil {
		return nil
	}
	return u.o.PolicyPins(ctx)
}

// approved reports whether digest is the pinned definition of tool, in
// the lock or in the policy's pins; pin is a pin it differs from ("" when
// the tool has none).
func (u *Upstream) approved(policy map[string]string, tool, digest string) (ok bool, pin string) {
	lock, inLock := u.o.Pins[tool]
	pol, inPolicy := policy[tool]
	if inLock && lock == digest || inPolicy && pol == digest {
		return true, digest
	}
	if inLock {
		return false, lock
	}
	return false, pol
}

func approvedNow(u *Upstream, policy map[string]string, tool, digest string) bool {
	ok, _ := u.approved(policy, tool, digest)
	return ok
}

// MaxDriftReports bounds the drifts recorded one by one per listing, so
// that an upstream inventing tool names cannot flood the audit log; the
// rest are summed up in one more report.
const MaxDriftReports = 32

// report passes a drift on once per tool and current digest, at most
// MaxDriftReports per listing.
func (u *Upstream) report(d Drift) {
	u.mu.Lock()
	key := d.Kind + "\x00" + d.CurrentDigest
	if u.reported[d.Tool] == key {
		u.mu.Unlock()
		return
	}
	u.reported[d.Tool] = key
	u.reports++
	if u.reports > MaxDriftReports {
		u.suppressed++
		u.mu.Unlock()
		return
	}
	u.mu.Unlock()
	u.o.Logger.Warn("mcp tool definition not offered", "upstream", d.Upstream, "tool", d.Tool, "kind", d.Kind,
		"pinned_digest", d.PinnedDigest, "current_digest", d.CurrentDigest, "detail", d.Detail)
	if u.o.OnDrift != nil {
		u.o.OnDrift(d)
	}
}
