// Package egress makes HTTP requests to addresses that users choose (a
// webhook's URL) without letting them reach what the service can reach
// and they should not: loopback, private and link-local networks, cloud
// metadata endpoints. The address is checked when the URL is given
// (CheckURL) and again at every connection, after DNS has answered, so
// that a name that resolves elsewhere later is caught; redirects are not
// followed, no proxy is used, answers are read up to a bound, and every
// phase has a short timeout.
package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Options bound a Client.
type Options struct {
	// Allow are networks reachable though not public (the operator's own
	// receivers, a test's loopback one).
	Allow []netip.Prefix
	// Timeout bounds a whole request, the answer's reading included;
	// zero: DefaultTimeout.
	Timeout time.Duration
	// MaxAnswer bounds the bytes of an answer read; zero:
	// DefaultMaxAnswer.
	MaxAnswer int64
}

// Defaults of Options.
const (
	DefaultTimeout   = 10 * time.Second
	DefaultMaxAnswer = 4 << 10
	dialTimeout      = 3 * time.Second
)

// ErrRefused is what a destination that is not public, nor allowed, is
// refused with (errors.Is).
var ErrRefused = errors.New("destination not allowed")

// refusedNets are the networks a destination may not be in unless
// allowed, beyond what netip's predicates name: shared address space
// (carrier-grade NAT), benchmarking, IPv4 reserved, and well-known cloud
// metadata addresses in IPv6.
var refusedNets = []netip.Prefix{
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
	netip.MustParsePrefix("64:ff9b::/96"),
}

// Check refuses an address that is not public, unless a network of allow
// holds it.
func Check(addr netip.Addr, allow []netip.Prefix) error {
	addr = addr.Unmap()
	for _, p := range allow {
		if p.Contains(addr) {
			return nil
		}
	}
	why := ""
	switch {
	case !addr.IsValid() || addr.IsUnspecified():
		why = "unspecified"
	case addr.IsLoopback():
		why = "loopback"
	case addr.IsPrivate():
		why = "private"
	case addr.IsLinkLocalUnicast() || addr.IsLinkLocalMulticast():
		why = "link-local (cloud metadata among them)"
	case addr.IsMulticast() || addr.IsInterfaceLocalMulticast():
		why = "multicast"
	}
	for _, p := range refusedNets {
		if why == "" && p.Contains(addr) {
			why = "reserved (" + p.String() + ")"
		}
	}
	if why != "" {
		return fmt.Errorf("%w: %s is a %s address", ErrRefused, addr, why)
	}
	return nil
}

// CheckURL refuses a URL that is not http or https to a host whose
// addresses are all allowed (each address DNS answers now is checked;
// the connection checks again). It answers the URL, parsed.
func CheckURL(ctx context.Context, raw string, allow []netip.Prefix) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("not a URL: %w", err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return nil, fmt.Errorf("the scheme must be https or http, not %q", u.Scheme)
	}
	if u.User != nil {
		return nil, errors.New("the URL may not hold a user or password")
	}
	host := u.Hostname()
	if host == "" {
		return nil, errors.New("the URL has no host")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return u, Check(a, allow)
	}
	rctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(rctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	for _, a := range addrs {
		if err := Check(a, allow); err != nil {
			return nil, fmt.Errorf("%s resolves to a refused address: %w", host, err)
		}
	}
	return u, nil
}

// Client sends requests within Options.
type Client struct {
	http      *http.Client
	maxAnswer int64
}

// New returns a Client.
func New(o Options) *Client {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxAnswer <= 0 {
		o.MaxAnswer = DefaultMaxAnswer
	}
	allow := append([]netip.Prefix(nil), o.Allow...)
	dialer := &net.Dialer{
		Timeout: dialTimeout,
		// Called with the address about to be connected to, after DNS:
		// what the name resolves to now is what is checked.
		Control: func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: %q is not an address", ErrRefused, address)
			}
			return Check(ap.Addr(), allow)
		},
	}
	transport := &http.Transport{
		Proxy:                 nil, // a proxy would connect on the user's behalf, unchecked
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   dialTimeout,
		ResponseHeaderTimeout: o.Timeout,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       30 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &Client{maxAnswer: o.MaxAnswer, http: &http.Client{
		Transport: transport,
		Timeout:   o.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}}
}

// Answer is what a destination answered.
type Answer struct {
	Status int
	// Body is the answer's first bytes, at most Options.MaxAnswer.
	Body []byte
}

// Do sends req and reads its answer up to the bound; the rest is not
// read. A redirect is an answer like any other (3xx).
func (c *Client) Do(req *http.Request) (Answer, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.maxAnswer))
	return Answer{Status: resp.StatusCode, Body: body}, err
}

// ParseAllow reads networks separated by commas or spaces (CIDR, or one
// address).
func ParseAllow(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("%q is neither a network (CIDR) nor an address", f)
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}
