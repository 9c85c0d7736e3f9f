package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/assistantcms/cms/pkg/ratelimit"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// Store is the part of the tenancy store (pkg/tenancy) authentication reads.
type Store interface {
	Token(ctx context.Context, id string) (tenancy.Token, error)
	App(ctx context.Context, id string) (tenancy.App, error)
}

// MaxCacheTTL bounds how long a cached token is trusted, so that a revoked
// token stops working everywhere within 30 seconds.
const MaxCacheTTL = 30 * time.Second

// DefaultCacheTTL is how long lookups are cached when nothing is configured.
const DefaultCacheTTL = 10 * time.Second

// maxNegative bounds the cache of unknown token IDs, which anyone can grow.
const maxNegative = 100_000

// Principal is who a request authenticated as.
type Principal struct {
	TokenID string
	// TokenName is the name the token was given, for the audit log.
	TokenName      string
	OrganizationID string
	// AppID is empty for an organization-level token.
	AppID string
	// Scopes is what the token may do.
	Scopes tenancy.Scopes
}

// Require refuses a principal without every scope of want; what says
// what needs them, for the message ("GraphQL mutations").
func (p Principal) Require(want tenancy.Scopes, what string) error {
	missing := want &^ p.Scopes
	if missing == 0 {
		return nil
	}
	s := ""
	if len(missing.Names()) > 1 {
		s = "s"
	}
	return &Error{Kind: ScopeMissing, Scope: missing, Message: fmt.Sprintf(
		"this token lacks the %s scope%s needed for %s", missing, s, what)}
}

// Target is the app a request acts for.
type Target struct {
	TokenID        string
	OrganizationID string
	AppID          string
	// Scopes is what the token may do: with content:draft, it reads the
	// draft of an app that publishes.
	Scopes tenancy.Scopes
}

// Kind classifies an Error, so that each edge (HTTP status, GraphQL code)
// answers it its own way.
type Kind int

// Kinds of Error.
const (
	// Unauthenticated: no token, or one that is malformed, unknown or
	// revoked.
	Unauthenticated Kind = iota + 1
	// Forbidden: the token may not act for the app asked for.
	Forbidden
	// Invalid: the request does not say what it needs to, such as the app
	// an organization token acts for.
	Invalid
	// Unavailable: the store that decides could not be asked; a retry may
	// succeed.
	Unavailable
	// ScopeMissing: the token may not do what the request asks
	// (Error.Scope says which scopes it lacks).
	ScopeMissing
	// Throttled: the client's network failed to authenticate too often
	// of late; its unknown tokens are not looked up until Error.RetryAfter.
	Throttled
)

var kindNames = [...]string{Unauthenticated: "unauthenticated", Forbidden: "forbidden", Invalid: "invalid", Unavailable: "unavailable", ScopeMissing: "scope_missing", Throttled: "throttled"}

func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Error is an authentication or authorization failure.
type Error struct {
	Kind    Kind
	Message string
	// Scope is what a ScopeMissing error's token lacks.
	Scope tenancy.Scopes
	// RetryAfter is when a Throttled client may try again.
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Challenge is the WWW-Authenticate value of an answer to err (RFC 6750,
// section 3): for a missing scope, the error and the scope needed; "" when
// err is not an *Error of kind ScopeMissing.
func Challenge(err error) string {
	var e *Error
	if !errors.As(err, &e) || e.Kind != ScopeMissing {
		return ""
	}
	return `Bearer error="insufficient_scope", scope="` + strings.Join(e.Scope.Names(), " ") + `"`
}

// The message of an unauthenticated request is what the reference client
// recognises.
func unauthorized() *Error { return &Error{Kind: Unauthenticated, Message: "Unauthorized"} }

// Authenticator checks bearer tokens against the store through a cache, so
// the request path does not reach the database on every request.
type Authenticator struct {
	store Store
	ttl   time.Duration
	grace time.Duration
	now   func() time.Time
	// failures counts failed authentications by client network; good
	// holds when tokens last authenticated, which it exempts.
	failures *ratelimit.Limiter

	// lister, when the store can list tokens, tells which IDs exist, so
	// that a network past its bound is refused only tokens of IDs the
	// store does not have (see knownID).
	lister tokenLister

	mu       sync.Mutex
	known    knownIDs
	tokens   map[string]cached[tenancy.Token]
	good     map[string]time.Time
	apps     map[string]cached[tenancy.App]
	inflight map[string]*lookup
}

type cached[T any] struct {
	val     T
	found   bool
	fetched time.Time
	// failed is when the last lookup to refresh this entry failed.
	failed time.Time
}

// lookup lets concurrent requests for one uncached key share one query.
type lookup struct {
	done chan struct{}
	err  error
}

// DefaultOutageGrace is the OutageGrace the services take unless set:
// events keep flowing, and the api keeps answering from its caches,
// through a short outage of the content database.
const DefaultOutageGrace = 30 * time.Second

// Options configure an Authenticator.
type Options struct {
	// CacheTTL is how long a lookup is trusted; at most MaxCacheTTL.
	CacheTTL time.Duration
	// OutageGrace is how long past its TTL a lookup is still used while
	// the store cannot answer; zero or negative: not at all. A token
	// revoked during an outage is refused only once the store answers or
	// the grace ends.
	OutageGrace time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// FailureRate and FailureBurst bound the failed authentications of
	// one client network (see WithClientNetwork): past FailureBurst, at
	// most FailureRate a second, and tokens not cached are refused
	// without a lookup until then. A zero rate: no bound.
	FailureRate  float64
	FailureBurst int
}

// tokenLister lists the store's tokens; the stores do.
type tokenLister interface {
	ListTokens(ctx context.Context, f tenancy.TokenFilter) ([]tenancy.Token, error)
}

// knownIDs are the token IDs the store had when last listed.
type knownIDs struct {
	ids    map[string]struct{}
	listed time.Time
	// listing is the listing under way, if any.
	listing *lookup
}

// Defaults of the failed authentications one client network may make.
const (
	DefaultFailureRate  = 1
	DefaultFailureBurst = 30
)

// NewAuthenticator returns an Authenticator reading from store.
func NewAuthenticator(store Store, o Options) (*Authenticator, error) {
	if o.CacheTTL == 0 {
		o.CacheTTL = DefaultCacheTTL
	}
	if o.CacheTTL < 0 || o.CacheTTL > MaxCacheTTL {
		return nil, fmt.Errorf("token cache TTL %s: must be between 0 and %s", o.CacheTTL, MaxCacheTTL)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	lister, _ := store.(tokenLister)
	return &Authenticator{
		store:    store,
		lister:   lister,
		ttl:      o.CacheTTL,
		grace:    max(o.OutageGrace, 0),
		now:      o.Now,
		tokens:   make(map[string]cached[tenancy.Token]),
		good:     make(map[string]time.Time),
		apps:     make(map[string]cached[tenancy.App]),
		inflight: make(map[string]*lookup),
		failures: failureLimiter(o),
	}, nil
}

// failureLimiter counts failures by network on o's clock; nil without a
// rate.
func failureLimiter(o Options) *ratelimit.Limiter {
	if o.FailureRate <= 0 {
		return nil
	}
	return ratelimit.New(o.FailureRate, o.FailureBurst, o.Now)
}

type clientNetworkKey struct{}

// WithClientNetwork tells Authenticate which network the request came
// from (see package clientnet), whose failed authentications it counts.
func WithClientNetwork(ctx context.Context, network string) context.Context {
	return context.WithValue(ctx, clientNetworkKey{}, network)
}

// Acting returns ctx carrying p's token as the actor of the changes made
// with it (tenancy.WithActor), keeping where the request came from as
// the HTTP edge put it there (see Origin).
func Acting(ctx context.Context, p Principal) context.Context {
	a, _ := tenancy.ActorOf(ctx)
	a.TokenID, a.TokenName, a.LocalUser = p.TokenID, p.TokenName, ""
	return tenancy.WithActor(ctx, a)
}

// maxUserAgent bounds the user agent an audit entry keeps.
const maxUserAgent = 256

// Origin returns ctx with where a request came from: its client network,
// which Authenticate counts failures by, and, for the audit log of what
// it changes once its token is known (see Acting), the client network,
// user agent and request ID. Nobody is the actor yet.
func Origin(ctx context.Context, network, userAgent, requestID string) context.Context {
	if len(userAgent) > maxUserAgent {
		userAgent = userAgent[:maxUserAgent]
	}
	// Text columns take only UTF-8.
	userAgent = strings.ToValidUTF8(userAgent, "")
	ctx = context.WithValue(ctx, clientNetworkKey{}, network)
	return tenancy.WithActor(ctx, tenancy.Actor{ClientNet: network, UserAgent: userAgent, RequestID: requestID})
}

func clientNetwork(ctx context.Context) string {
	n, _ := ctx.Value(clientNetworkKey{}).(string)
	return n
}

// recentlyGood is how long a token that authenticated stays exempt from
// its network's bound on failures, and maxGood how many such tokens are
// remembered (only good tokens enter, so nobody can grow it at will).
const (
	recentlyGood = 24 * time.Hour
	maxGood      = 100_000
)

// recentlyGood reports whether id authenticated within recentlyGood.
func (a *Authenticator) recentlyGood(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.good[id]
	return ok && a.now().Sub(at) < recentlyGood
}

// markGood records that id authenticated now.
func (a *Authenticator) markGood(id string) {
	if a.failures == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	if at, ok := a.good[id]; ok && now.Sub(at) < time.Minute {
		return // recorded lately; spares the map write on every request
	}
	if len(a.good) >= maxGood {
		for k, at := range a.good {
			if now.Sub(at) >= recentlyGood {
				delete(a.good, k)
			}
		}
		if len(a.good) >= maxGood {
			clear(a.good)
		}
	}
	a.good[id] = now
}

// cachedToken reports whether id's lookup is cached and fresh.
func (a *Authenticator) cachedToken(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.tokens[id]
	return ok && a.now().Sub(c.fetched) < a.ttl
}

// BearerToken returns the token of an "Authorization: Bearer" header or of
// the spec's "Authorize: Bearer" spelling. The scheme is case-insensitive.
// When both headers are sent, the one holding a Bearer token counts: a
// proxy may add an Authorization of its own (Basic, say) to a request
// whose token is in Authorize. When both hold one, Authorization's is
// used, invalid or not, since that is the header the reference client
// sends. Tokens in the query string are never read.
func BearerToken(h http.Header) (string, bool) {
	for _, name := range [...]string{"Authorization", "Authorize"} {
		for _, v := range h.Values(name) {
			if tok, ok := bearer(v); ok {
				return tok, true
			}
		}
	}
	return "", false
}

// bearer returns the token of one "Bearer <token>" header value.
func bearer(v string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// Authenticate checks the request's bearer token.
func (a *Authenticator) Authenticate(ctx context.Context, h http.Header) (Principal, error) {
	raw, ok := BearerToken(h)
	if !ok {
		return Principal{}, unauthorized()
	}
	id, err := ParseToken(raw)
	if err != nil {
		return Principal{}, unauthorized()
	}
	// A network that keeps failing (guessing tokens, say) may not make
	// the store look up tokens it has not seen lately. The lookup takes
	// its place in the network's budget before it runs, so concurrent
	// guesses cannot all pass, and gives it back when it was no guess.
	// Tokens cached, or good within recentlyGood, are exempt, so that
	// others behind the same network go on.
	//
	// Past the bound, a token is still checked when the store has its ID
	// (known from a listing of the store's IDs, made at most once every
	// knownIDsRefresh): what the bound is for, lookups of IDs nobody
	// issued, is refused from memory, while a valid token is not refused
	// for what others behind its network did.
	network := clientNetwork(ctx)
	limited := network != "" && a.failures != nil
	wasCached := a.cachedToken(id)
	counted := false
	var throttled *Error
	if limited && !wasCached && !a.recentlyGood(id) {
		ok, wait := a.failures.Allow(network)
		if ok {
			counted = true
		} else {
			throttled = throttledError(wait)
			known, next := a.knownID(ctx, id)
			if !known {
				throttled.RetryAfter = max(wait, next)
				return Principal{}, throttled
			}
		}
	}
	tok, found, err := getCached(ctx, a, a.tokens, "t:"+id, id, a.store.Token, false)
	if err != nil {
		if counted {
			a.failures.Refund(network)
		}
		return Principal{}, &Error{Kind: Unavailable, Message: "token store unavailable", Err: err}
	}
	matches := tokenMatches(tok, found, raw)
	if !matches && wasCached && throttled == nil {
		// Refused from the cache, which holds the IDs others use: every
		// refusal asks the store, or its time would tell an ID in use
		// from one nobody issued. It is a failure like any other,
		// counted before the lookup runs.
		if limited && !counted {
			ok, wait := a.failures.Allow(network)
			if !ok {
				return Principal{}, throttledError(wait)
			}
			counted = true
		}
		tok, found, err = getCached(ctx, a, a.tokens, "t:"+id, id, a.store.Token, true)
		if err != nil {
			if counted {
				a.failures.Refund(network)
			}
			return Principal{}, &Error{Kind: Unavailable, Message: "token store unavailable", Err: err}
		}
		matches = tokenMatches(tok, found, raw)
	}
	if counted && matches {
		// A real token, if maybe revoked: a page that still carries one
		// is not guessing.
		a.failures.Refund(network)
	}
	if !matches && throttled != nil {
		return Principal{}, throttled
	}
	if !matches || tok.Revoked() {
		return Principal{}, unauthorized()
	}
	a.markGood(id)
	return Principal{TokenID: tok.ID, TokenName: tok.Name, OrganizationID: tok.OrganizationID, AppID: tok.AppID, Scopes: tok.Scopes}, nil
}

// throttledError is the answer to a network past its bound on failures.
func throttledError(wait time.Duration) *Error {
	return &Error{Kind: Throttled, RetryAfter: wait,
		Message: "too many failed authentications from this network; retry after the time in Retry-After"}
}

// tokenMatches reports whether raw is the token found. The hash
// comparison runs even for unknown IDs so that timing does not tell a
// known ID from an unknown one.
func tokenMatches(tok tenancy.Token, found bool, raw string) bool {
	stored := tok.Hash
	if !found {
		stored = make([]byte, 32)
	}
	return HashMatches(stored, raw) && found
}

// knownIDsRefresh is how often, at most, the store's token IDs are
// listed for networks past their bound: one listing a second for the
// process, however many guesses arrive.
const knownIDsRefresh = time.Second

// knownID reports whether the store has a token of id, by a listing of
// its IDs at most knownIDsRefresh old; when it does not, next is how long
// until a new listing may show a token made since. Without a store that
// lists tokens, no ID is known.
func (a *Authenticator) knownID(ctx context.Context, id string) (known bool, next time.Duration) {
	if a.lister == nil {
		return false, 0
	}
	for {
		a.mu.Lock()
		if _, ok := a.known.ids[id]; ok {
			a.mu.Unlock()
			return true, 0
		}
		age := a.now().Sub(a.known.listed)
		if a.known.ids != nil && age < knownIDsRefresh {
			a.mu.Unlock()
			return false, knownIDsRefresh - age
		}
		l := a.known.listing
		if l == nil {
			l = &lookup{done: make(chan struct{})}
			a.known.listing = l
			go a.listIDs(context.WithoutCancel(ctx), l)
		}
		a.mu.Unlock()
		select {
		case <-l.done:
		case <-ctx.Done():
			return false, knownIDsRefresh
		}
		if l.err != nil {
			return false, knownIDsRefresh
		}
	}
}

// listIDs lists the store's token IDs into a.known, then ends l. A failed
// listing counts as one, so that an outage is not asked again at once.
func (a *Authenticator) listIDs(ctx context.Context, l *lookup) {
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	toks, err := a.lister.ListTokens(ctx, tenancy.TokenFilter{})
	a.mu.Lock()
	a.known.listing = nil
	a.known.listed = a.now()
	if err == nil {
		ids := make(map[string]struct{}, len(toks))
		for _, t := range toks {
			ids[t.ID] = struct{}{}
		}
		a.known.ids = ids
	} else {
		l.err = fmt.Errorf("list token IDs: %w", err)
		if a.known.ids == nil {
			a.known.ids = map[string]struct{}{}
		}
	}
	a.mu.Unlock()
	close(l.done)
}

// Resolve decides which app a request acts for. An app token acts for its
// app; an organization token must name an app of its organization in
// appIDParam.
func (a *Authenticator) Resolve(ctx context.Context, p Principal, appIDParam string) (Target, error) {
	t := Target{TokenID: p.TokenID, OrganizationID: p.OrganizationID, AppID: p.AppID, Scopes: p.Scopes}
	if p.AppID != "" {
		if appIDParam != "" && appIDParam != p.AppID {
			msg := fmt.Sprintf("this token is for app %q and cannot act for app %q", p.AppID, appIDParam)
			if !PossibleID(appIDParam) {
				// Not echoed: it may be as long as the request line.
				msg = fmt.Sprintf("this token is for app %q and cannot act for another app", p.AppID)
			}
			return Target{}, &Error{Kind: Forbidden, Message: msg}
		}
		return t, nil
	}
	if appIDParam == "" {
		return Target{}, &Error{Kind: Invalid, Message: "appId query parameter is required with an organization token"}
	}
	if !PossibleID(appIDParam) {
		// Answered as an unknown app is, without asking the store: no app
		// can have this ID, PostgreSQL refuses NUL and invalid UTF-8
		// outright, and the negative cache must not hold long keys.
		return Target{}, &Error{Kind: Forbidden, Message: "appId is not an app of this token's organization"}
	}
	app, found, err := getCached(ctx, a, a.apps, "a:"+appIDParam, appIDParam, a.store.App, false)
	if err != nil {
		return Target{}, &Error{Kind: Unavailable, Message: "content store unavailable", Err: err}
	}
	// An app of another organization is answered like a missing one, so the
	// answer does not tell which app IDs exist.
	if !found || app.OrganizationID != p.OrganizationID {
		return Target{}, &Error{Kind: Forbidden, Message: fmt.Sprintf("app %q is not an app of this token's organization", appIDParam)}
	}
	t.AppID = app.ID
	return t, nil
}

// PossibleID reports whether s could be the ID of an app or a record: the
// content store refuses any other (longer than tenancy.MaxIDLength, not
// UTF-8, with '/' or control characters), so a request naming one matches
// nothing and need not reach the database.
func PossibleID(s string) bool {
	return s != "" && len(s) <= tenancy.MaxIDLength && utf8.ValidString(s) &&
		!strings.ContainsRune(s, '/') && strings.IndexFunc(s, unicode.IsControl) < 0
}

// staleWait is how long a request with a lookup cached before, but past
// its TTL, waits for a new lookup before the old one is used within the
// outage grace; a healthy store answers well within it.
const staleWait = 100 * time.Millisecond

// retryFailed is how long after a failed lookup a stale entry is used
// without trying the store again, so that an outage does not cost every
// request staleWait.
const retryFailed = time.Second

// lookupTimeout bounds one lookup, which runs on its own: the requests
// waiting for it may stop waiting.
const lookupTimeout = 5 * time.Second

// getCached returns the cached record for id or loads it, sharing one load
// among concurrent callers. found is false when the store has no such record.
//
// While the store cannot answer (down, or its tables locked), a lookup
// cached within the TTL plus the outage grace is used, so that callers
// known a moment ago are not turned away for the length of an outage;
// such a lookup is also used when a new one is slower than staleWait.
// With reload, the store is asked even when a fresh lookup is cached.
func getCached[T any](ctx context.Context, a *Authenticator, m map[string]cached[T], key, id string, load func(context.Context, string) (T, error), reload bool) (T, bool, error) {
	var zero T
	for {
		a.mu.Lock()
		c, ok := m[id]
		age := a.now().Sub(c.fetched)
		if ok && age < a.ttl && !reload {
			a.mu.Unlock()
			return c.val, c.found, nil
		}
		stale := ok && age < a.ttl+a.grace
		if stale && a.now().Sub(c.failed) < retryFailed {
			a.mu.Unlock()
			return c.val, c.found, nil
		}
		l, running := a.inflight[key]
		if !running {
			l = &lookup{done: make(chan struct{})}
			a.inflight[key] = l
			go fetch(context.WithoutCancel(ctx), a, m, key, id, l, load)
		}
		a.mu.Unlock()

		switch waitLookup(ctx, l, stale) {
		case gaveUp:
			return c.val, c.found, nil
		case cancelled:
			return zero, false, ctx.Err()
		}
		if l.err != nil {
			if stale {
				return c.val, c.found, nil
			}
			return zero, false, l.err
		}
		// The entry is fresh now.
		reload = false
	}
}

type waited int

const (
	ended waited = iota
	gaveUp
	cancelled
)

// waitLookup waits for l to end; with a stale entry to fall back on, for
// staleWait at most.
func waitLookup(ctx context.Context, l *lookup, stale bool) waited {
	var patience <-chan time.Time
	if stale {
		t := time.NewTimer(staleWait)
		defer t.Stop()
		patience = t.C
	}
	select {
	case <-l.done:
		return ended
	case <-patience:
		return gaveUp
	case <-ctx.Done():
		return cancelled
	}
}

// fetch runs one lookup and files its result, then ends l.
func fetch[T any](ctx context.Context, a *Authenticator, m map[string]cached[T], key, id string, l *lookup, load func(context.Context, string) (T, error)) {
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	val, err := load(ctx, id)
	found := err == nil
	if errors.Is(err, tenancy.ErrNotFound) {
		err = nil
	}
	a.mu.Lock()
	delete(a.inflight, key)
	if err == nil {
		if !found && len(m) >= maxNegative {
			prune(m, a.now(), a.ttl)
		}
		m[id] = cached[T]{val: val, found: found, fetched: a.now()}
	} else if c, ok := m[id]; ok {
		c.failed = a.now()
		m[id] = c
	}
	l.err = err
	a.mu.Unlock()
	close(l.done)
}

// prune drops expired entries and, if the map is still full, every entry
// for a missing record: those are the ones a caller can mint at will.
func prune[T any](m map[string]cached[T], now time.Time, ttl time.Duration) {
	for k, c := range m {
		if now.Sub(c.fetched) >= ttl {
			delete(m, k)
		}
	}
	if len(m) < maxNegative {
		return
	}
	for k, c := range m {
		if !c.found {
			delete(m, k)
		}
	}
}
