// Package clientnet tells the network a request came from: the
// connection's peer, or the client a trusted proxy names in
// X-Forwarded-For, as an IPv4 /24 or IPv6 /48. What a client sends
// decides nothing.
package clientnet

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// DefaultTrusted are the peers trusted to name the client in
// X-Forwarded-For when nothing else is configured: none. Trusting a
// network lets every client that connects from it choose the client it
// is counted as (loopback is every process on the host), so a
// deployment names its proxies: the local stack's gateway connects from
// an address of its own, compose's from a fixed one.
const DefaultTrusted = ""

// Client networks are the IPv4 /24 or IPv6 /48 holding a client's
// address: what one household, office or mobile carrier's customers
// share, and a source of HISTORICAL suggestions. A prefix rather than the
// address keeps less of a person in the events, and one sender holding
// many addresses of one network still counts once.
const (
	clientNetworkBits4 = 24
	clientNetworkBits6 = 48
)

// ParseTrusted reads a comma-separated list of networks (CIDR) or
// addresses; an empty list trusts no proxy.
func ParseTrusted(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for i, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if strings.Contains(item, "/") {
			p, err := netip.ParsePrefix(item)
			if err != nil {
				return nil, fmt.Errorf("trusted proxy %d, %q: want a network such as 10.0.0.0/8 or an address: %w", i+1, item, err)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(item)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %d, %q: want a network such as 10.0.0.0/8 or an address: %w", i+1, item, err)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// Of returns the network the request came from, as "a.b.c.0/24"
// or "x:y:z::/48", or "" when no address can be read. The address is the
// connection's peer, unless the peer is a trusted proxy: then it is the
// last address in X-Forwarded-For that is not one (proxies append the
// address they were called from, so entries left of the first untrusted
// one may be anything a client sent). Nothing the client sends decides it
// otherwise.
func Of(r *http.Request, trusted []netip.Prefix) string {
	addr, ok := parseHost(r.RemoteAddr)
	if !ok {
		return ""
	}
	if isTrusted(addr, trusted) {
		hops := r.Header.Values("X-Forwarded-For")
		for i := len(hops) - 1; i >= 0; i-- {
			entries := strings.Split(hops[i], ",")
			for j := len(entries) - 1; j >= 0; j-- {
				a, ok := parseHost(strings.TrimSpace(entries[j]))
				if !ok {
					// Past an entry no proxy of ours wrote, nothing is
					// known: the last trusted hop is the client.
					return networkOf(addr)
				}
				addr = a
				if !isTrusted(addr, trusted) {
					return networkOf(addr)
				}
			}
		}
	}
	return networkOf(addr)
}

// Trusted reports whether peer (a request's RemoteAddr) is one of the
// trusted proxies.
func Trusted(peer string, trusted []netip.Prefix) bool {
	a, ok := parseHost(peer)
	return ok && isTrusted(a, trusted)
}

// parseHost reads an address with or without a port, IPv6 in brackets
// with one.
func parseHost(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// networkOf is the client network holding a.
func networkOf(a netip.Addr) string {
	bits := clientNetworkBits6
	if a.Is4() {
		bits = clientNetworkBits4
	}
	p, err := a.WithZone("").Prefix(bits)
	if err != nil {
		return ""
	}
	return p.String()
}
