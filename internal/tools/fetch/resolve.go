package fetch

import (
	"context"
	"net/netip"
	"slices"
)

var errNoResolve = urlErr("host does not resolve")

// resolve returns the addresses t will be dialed at: an IP literal itself,
// otherwise the resolver's answer, deduplicated, sorted and capped. It is
// the only DNS lookup of a call.
func (f *Fetch) resolve(ctx context.Context, t target) ([]netip.Addr, error) {
	if t.ip.IsValid() {
		return []netip.Addr{t.ip}, nil
	}
	lctx, cancel := context.WithTimeout(ctx, f.opts.LookupTimeout)
	defer cancel()
	found, err := f.opts.Resolver.LookupNetIP(lctx, "ip", t.host)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err() // the call was canceled, not the model's doing
		}
		return nil, errNoResolve
	}
	addrs := make([]netip.Addr, 0, len(found))
	for _, a := range found {
		if a = a.Unmap().WithZone(""); a.IsValid() {
			addrs = append(addrs, a)
		}
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	addrs = slices.Compact(addrs)
	if len(addrs) == 0 {
		return nil, errNoResolve
	}
	if len(addrs) > maxAddresses {
		addrs = addrs[:maxAddresses] // what policy sees is all that is dialed
	}
	return addrs, nil
}
