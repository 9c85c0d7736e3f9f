// Package cors lets pages on other origins call the services from a
// browser (cross-origin resource sharing). Assistant runtimes that run in
// a browser send their token in a header, so every call they make is
// preflighted; without these answers the browser refuses them.
//
// No credentials (cookies) are involved, so Access-Control-Allow-Credentials
// is never sent. The request's origin is echoed even when any origin is
// allowed, so that answers read alike either way; Vary: Origin keeps
// caches from mixing them.
package cors

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/assistantcms/cms/pkg/edge/httpserve"
)

// Values of the answers' headers.
const (
	// AllowMethods are the methods the services answer.
	AllowMethods = "GET, PUT, POST, OPTIONS"
	// AllowHeaders are the request headers a page may send: both token
	// headers, the body's type and encoding, the events endpoint's
	// idempotency key, revalidation and a caller's own request ID.
	AllowHeaders = "Authorization, Authorize, Content-Type, Content-Encoding, Idempotency-Key, If-None-Match, X-Request-Id"
	// ExposeHeaders are the answers' headers a page's script may read
	// besides the ones every browser exposes.
	ExposeHeaders = "X-Request-Id, ETag, Retry-After, X-Suggestions-Omitted, X-Answer-Generator"
	// MaxAge is how long, in seconds, a browser may reuse a preflight's
	// answer: Chromium's ceiling. Narrowing the origins takes effect at
	// once all the same, as the actual answers stop carrying the origin.
	MaxAge = 7200
)

// Policy is the set of origins allowed to call. The zero Policy, and a
// nil one, allows none and changes nothing.
type Policy struct {
	any     bool
	origins map[string]bool
}

// New returns the policy for the allowed origins: each an origin as a
// browser sends it, scheme://host[:port] with http or https and no path,
// or "*" for any origin. None gives a policy that does nothing.
func New(origins []string) (*Policy, error) {
	p := &Policy{origins: map[string]bool{}}
	for _, o := range origins {
		if o == "*" {
			p.any = true
			continue
		}
		norm, err := ParseOrigin(o)
		if err != nil {
			return nil, err
		}
		p.origins[norm] = true
	}
	return p, nil
}

// ParseOrigin checks one configured origin and returns it as browsers
// write it in the Origin header: scheme and host in lower case, without
// the scheme's default port.
func ParseOrigin(s string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("allowed origin %q: %s; want scheme://host[:port], like https://app.example.com", s, why)
	}
	if strings.Contains(s, "*") {
		return bad(`wildcards are not supported: list each origin, or give "*" alone for any origin`)
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return bad(err.Error())
	case u.Scheme == "":
		return bad("no scheme")
	case u.Opaque != "":
		return bad("no // after the scheme")
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != "http" && scheme != "https":
		return bad("the scheme must be http or https")
	case u.User != nil:
		return bad("user information is not part of an origin")
	case u.Host == "" || u.Hostname() == "":
		return bad("no host")
	case u.Path != "":
		return bad(fmt.Sprintf("a path (%q) is not part of an origin", u.Path))
	case u.RawQuery != "" || u.ForceQuery:
		return bad("a query is not part of an origin")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return bad("a fragment is not part of an origin")
	}
	host := strings.ToLower(u.Hostname())
	for _, r := range host {
		if r > 0x7f {
			return bad("write an international host name in its ASCII (punycode) form, as browsers send it")
		}
	}
	port := u.Port()
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return bad(fmt.Sprintf("port %q is not in 1..65535", port))
		}
		port = strconv.Itoa(n)
	}
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	switch {
	case port != "":
		host = net.JoinHostPort(host, port)
	case strings.Contains(host, ":"):
		host = "[" + host + "]" // IPv6, as in the URL
	}
	return scheme + "://" + host, nil
}

// Enabled reports whether any origin is allowed.
func (p *Policy) Enabled() bool { return p != nil && (p.any || len(p.origins) > 0) }

// Allows reports whether a request's Origin header is allowed.
func (p *Policy) Allows(origin string) bool {
	if !p.Enabled() || origin == "" {
		return false
	}
	return p.any || p.origins[origin]
}

// Handler wraps next. When the policy is not enabled it returns next
// itself. Otherwise every answer varies by Origin; answers to an allowed
// origin carry Access-Control-Allow-Origin and Access-Control-Expose-Headers;
// preflights (OPTIONS with Origin and Access-Control-Request-Method) are
// answered here, 204 for an allowed origin and 403 in the JSON error
// shape for any other, so that they never reach handlers that would
// answer 405 or 401. Other requests from an origin not allowed pass on
// unchanged: their answers carry no permission, so the browser keeps
// them from the page.
func (p *Policy) Handler(next http.Handler) http.Handler {
	if !p.Enabled() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		h := w.Header()
		// Caches must not give one origin's answer to another.
		h.Add("Vary", "Origin")
		allowed := p.Allows(origin)
		if r.Method == http.MethodOptions && origin != "" && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
			if !allowed {
				httpserve.Error(w, http.StatusForbidden, "", "Cross-origin requests from "+origin+" are not allowed.")
				return
			}
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Methods", AllowMethods)
			h.Set("Access-Control-Allow-Headers", AllowHeaders)
			h.Set("Access-Control-Max-Age", strconv.Itoa(MaxAge))
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if allowed {
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Expose-Headers", ExposeHeaders)
		}
		next.ServeHTTP(w, r)
	})
}
