package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/tenancy"
)

func TestBearerToken(t *testing.T) {
	cases := []struct {
		name string
		// headers are name and value pairs, added in order.
		headers []string
		want    string
		ok      bool
	}{
		{"standard", []string{"Authorization", "Bearer abc"}, "abc", true},
		{"spec spelling", []string{"Authorize", "Bearer abc"}, "abc", true},
		{"lower-case scheme", []string{"Authorization", "bearer abc"}, "abc", true},
		{"upper-case scheme", []string{"Authorization", "BEARER abc"}, "abc", true},
		{"extra spaces", []string{"Authorization", "  Bearer   abc  "}, "abc", true},
		{"basic", []string{"Authorization", "Basic abc"}, "", false},
		{"no scheme", []string{"Authorization", "abc"}, "", false},
		{"empty token", []string{"Authorization", "Bearer "}, "", false},
		{"missing", []string{"X-Other", "Bearer abc"}, "", false},
		// Both headers: the one holding a Bearer token counts.
		{"Basic Authorization, Bearer Authorize", []string{"Authorization", "Basic abc", "Authorize", "Bearer cms_x"}, "cms_x", true},
		{"Bearer Authorization, Basic Authorize", []string{"Authorization", "Bearer cms_x", "Authorize", "Basic abc"}, "cms_x", true},
		{"empty Authorization, Bearer Authorize", []string{"Authorization", "", "Authorize", "bearer cms_x"}, "cms_x", true},
		{"scheme-only Authorization, Bearer Authorize", []string{"Authorization", "Bearer", "Authorize", "BEARER cms_x"}, "cms_x", true},
		{"both Bearer: Authorization wins", []string{"Authorize", "Bearer cms_b", "Authorization", "Bearer cms_a"}, "cms_a", true},
		{"neither Bearer", []string{"Authorization", "Basic abc", "Authorize", "Token cms_x"}, "", false},
		{"a proxy's Authorization line before the client's", []string{"Authorization", "Basic abc", "Authorization", "Bearer cms_x"}, "cms_x", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for i := 0; i+1 < len(tc.headers); i += 2 {
				h.Add(tc.headers[i], tc.headers[i+1])
			}
			got, ok := BearerToken(h)
			if got != tc.want || ok != tc.ok {
				t.Errorf("BearerToken = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestTokenFormat(t *testing.T) {
	tok, id, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseToken(tok)
	if err != nil || got != id {
		t.Fatalf("ParseToken(%q) = %q, %v; want %q", tok, got, err, id)
	}
	if !HashMatches(HashToken(tok), tok) || HashMatches(HashToken(tok), tok+"x") {
		t.Error("HashMatches disagrees with HashToken")
	}
	tok2, id2, _ := NewToken()
	if tok2 == tok || id2 == id {
		t.Error("two tokens are equal")
	}
	for _, bad := range []string{"", "cms_", tok[:len(tok)-1], "xyz" + tok[3:], strings.Replace(tok, "_", "-", 2), "cms_zzzzzzzzzzzzzzzz" + tok[20:]} {
		if _, err := ParseToken(bad); !errors.Is(err, ErrMalformedToken) {
			t.Errorf("ParseToken(%q) err = %v, want ErrMalformedToken", bad, err)
		}
	}
}

// fakeStore counts lookups; the cache logic is what is under test here.
type fakeStore struct {
	mu     sync.Mutex
	tokens map[string]tenancy.Token
	apps   map[string]tenancy.App
	calls  atomic.Int32
	fail   atomic.Bool
	gate   chan struct{}
}

func (s *fakeStore) Token(ctx context.Context, id string) (tenancy.Token, error) {
	s.calls.Add(1)
	if s.gate != nil {
		<-s.gate
	}
	if s.fail.Load() {
		return tenancy.Token{}, errors.New("database is locked")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tokens[id]
	if !ok {
		return t, tenancy.ErrNotFound
	}
	return t, nil
}

func (s *fakeStore) App(ctx context.Context, id string) (tenancy.App, error) {
	s.calls.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.apps[id]
	if !ok {
		return a, tenancy.ErrNotFound
	}
	return a, nil
}

func newFixture(t *testing.T) (*fakeStore, map[string]string) {
	t.Helper()
	s := &fakeStore{tokens: map[string]tenancy.Token{}, apps: map[string]tenancy.App{
		"a1": {ID: "a1", OrganizationID: "o1"}, "a2": {ID: "a2", OrganizationID: "o1"}, "b1": {ID: "b1", OrganizationID: "o2"},
	}}
	toks := map[string]string{}
	for name, scope := range map[string][2]string{"app": {"o1", "a1"}, "org": {"o1", ""}} {
		tok, id, err := NewToken()
		if err != nil {
			t.Fatal(err)
		}
		s.tokens[id] = tenancy.Token{Scopes: tenancy.AllScopes, ID: id, Hash: HashToken(tok), OrganizationID: scope[0], AppID: scope[1]}
		toks[name] = tok
	}
	return s, toks
}

func header(tok string) http.Header {
	return http.Header{"Authorization": []string{"Bearer " + tok}}
}

// TestAuthenticateHeaderChoice: with both header spellings, the request
// authenticates as the Bearer token's owner whichever header holds it,
// and as Authorization's when both do.
func TestAuthenticateHeaderChoice(t *testing.T) {
	s, toks := newFixture(t)
	a, err := NewAuthenticator(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name                 string
		authorization, authz string // Authorization and Authorize values
		app                  string // the principal's app; "-" for an organization token, "" for a 401
	}{
		{"proxy Basic beside the token in Authorize", "Basic dXNlcjpwYXNz", "Bearer " + toks["app"], "a1"},
		{"token in Authorization, Basic in Authorize", "Bearer " + toks["org"], "Basic dXNlcjpwYXNz", "-"},
		{"both Bearer: Authorization's", "Bearer " + toks["org"], "Bearer " + toks["app"], "-"},
		{"both Bearer, Authorization's unknown: refused", "Bearer cms_0000000000000000_" + strings.Repeat("A", 43), "Bearer " + toks["app"], ""},
		{"neither Bearer", "Basic dXNlcjpwYXNz", "Token " + toks["app"], ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := a.Authenticate(context.Background(), http.Header{"Authorization": {tc.authorization}, "Authorize": {tc.authz}})
			switch {
			case tc.app == "":
				var ae *Error
				if !errors.As(err, &ae) || ae.Kind != Unauthenticated {
					t.Errorf("Authenticate = %+v, %v; want unauthenticated", p, err)
				}
			case err != nil || p.AppID != strings.TrimPrefix(tc.app, "-") || p.OrganizationID != "o1":
				t.Errorf("Authenticate = %+v, %v; want app %q", p, err, tc.app)
			}
		})
	}
}

func TestAuthenticateCachesAndRevokes(t *testing.T) {
	s, toks := newFixture(t)
	clock := time.Unix(0, 0)
	a, err := NewAuthenticator(s, Options{CacheTTL: 10 * time.Second, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 100 {
		p, err := a.Authenticate(ctx, header(toks["app"]))
		if err != nil || p.AppID != "a1" || p.OrganizationID != "o1" {
			t.Fatalf("Authenticate = %+v, %v", p, err)
		}
	}
	if n := s.calls.Load(); n != 1 {
		t.Errorf("%d store lookups for 100 requests, want 1", n)
	}
	id, _ := ParseToken(toks["app"])
	s.mu.Lock()
	tok := s.tokens[id]
	tok.RevokedAt = clock
	s.tokens[id] = tok
	s.mu.Unlock()

	clock = clock.Add(9 * time.Second)
	if _, err := a.Authenticate(ctx, header(toks["app"])); err != nil {
		t.Errorf("within the TTL the cached token still works: %v", err)
	}
	clock = clock.Add(2 * time.Second)
	_, err = a.Authenticate(ctx, header(toks["app"]))
	var ae *Error
	if !errors.As(err, &ae) || ae.Kind != Unauthenticated || ae.Message != "Unauthorized" {
		t.Errorf("revoked token after TTL: %v", err)
	}

	// Every refusal asks the store, cached or not, so that how soon a
	// token is refused does not tell whether its ID is in use (the bound
	// on a network's failures bounds these lookups); a wrong secret for
	// a known ID fails.
	unknown, _, _ := NewToken()
	before := s.calls.Load()
	for range 10 {
		if _, err := a.Authenticate(ctx, header(unknown)); err == nil {
			t.Fatal("unknown token accepted")
		}
	}
	if n := s.calls.Load() - before; n != 10 {
		t.Errorf("%d lookups for 10 requests with one unknown token, want 10", n)
	}
	orgTok := toks["org"]
	forged := orgTok[:len(orgTok)-4] + "AAAA"
	if _, err := a.Authenticate(ctx, header(forged)); err == nil {
		t.Error("a token with a known ID and a wrong secret was accepted")
	}
}

func TestAuthenticateStoreDown(t *testing.T) {
	s, toks := newFixture(t)
	s.fail.Store(true)
	a, _ := NewAuthenticator(s, Options{})
	_, err := a.Authenticate(context.Background(), header(toks["app"]))
	var ae *Error
	if !errors.As(err, &ae) || ae.Kind != Unavailable {
		t.Fatalf("store down: %v, want an unavailable error", err)
	}
	s.fail.Store(false)
	if _, err := a.Authenticate(context.Background(), header(toks["app"])); err != nil {
		t.Errorf("failures must not be cached: %v", err)
	}
}

func TestAuthenticateSharesConcurrentLookups(t *testing.T) {
	s, toks := newFixture(t)
	s.gate = make(chan struct{})
	a, _ := NewAuthenticator(s, Options{})
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := a.Authenticate(context.Background(), header(toks["app"])); err != nil {
				t.Error(err)
			}
		})
	}
	// Wait until the first lookup is inside the store, then let it finish.
	deadline := time.Now().Add(10 * time.Second)
	for s.calls.Load() == 0 {
		if time.Now().After(deadline) {
			close(s.gate)
			wg.Wait()
			t.Fatal("no lookup reached the store within 10s")
		}
		time.Sleep(time.Millisecond)
	}
	close(s.gate)
	wg.Wait()
	if n := s.calls.Load(); n != 1 {
		t.Errorf("%d store lookups for 20 concurrent requests, want 1", n)
	}
}

func TestResolve(t *testing.T) {
	s, toks := newFixture(t)
	a, _ := NewAuthenticator(s, Options{})
	ctx := context.Background()
	appP, _ := a.Authenticate(ctx, header(toks["app"]))
	orgP, _ := a.Authenticate(ctx, header(toks["org"]))
	cases := []struct {
		name    string
		p       Principal
		param   string
		wantApp string
		kind    Kind
	}{
		{"app token", appP, "", "a1", 0},
		{"app token naming itself", appP, "a1", "a1", 0},
		{"app token naming another app", appP, "a2", "", Forbidden},
		{"org token", orgP, "a2", "a2", 0},
		{"org token without appId", orgP, "", "", Invalid},
		{"org token foreign app", orgP, "b1", "", Forbidden},
		{"org token unknown app", orgP, "zz", "", Forbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := a.Resolve(ctx, tc.p, tc.param)
			if tc.kind == 0 {
				if err != nil || got.AppID != tc.wantApp || got.OrganizationID != "o1" {
					t.Errorf("Resolve = %+v, %v", got, err)
				}
				return
			}
			var ae *Error
			if !errors.As(err, &ae) || ae.Kind != tc.kind {
				t.Errorf("Resolve err = %v, want %s", err, tc.kind)
			}
		})
	}
}

func TestCacheTTLBounded(t *testing.T) {
	if _, err := NewAuthenticator(&fakeStore{}, Options{CacheTTL: time.Minute}); err == nil {
		t.Error("a TTL over 30s was accepted")
	}
}

// TestResolveRefusesImpossibleAppIDs: an appId no app can have is
// answered like an unknown app, without a store query or a cache entry
// (PostgreSQL refuses NUL and invalid UTF-8, and callers could fill the
// negative cache with long made-up IDs), and is not echoed.
func TestResolveRefusesImpossibleAppIDs(t *testing.T) {
	s, _ := newFixture(t)
	a, err := NewAuthenticator(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []Principal{{TokenID: "t", OrganizationID: "o1"}, {TokenID: "t", OrganizationID: "o1", AppID: "a1"}} {
		for _, id := range []string{"a\x00b", "\xff", strings.Repeat("x", 5000), "a/b"} {
			_, err := a.Resolve(context.Background(), p, id)
			var ae *Error
			if !errors.As(err, &ae) || ae.Kind != Forbidden || strings.Contains(ae.Message, id) {
				t.Errorf("Resolve(%+v, %.20q): %v; want forbidden without the ID", p, id, err)
			}
		}
	}
	if n := s.calls.Load(); n != 0 || len(a.apps) != 0 {
		t.Errorf("%d store queries, %d cached apps; want none", n, len(a.apps))
	}
}

// TestAuthenticateOutageGrace: tokens looked up before the store became
// unreachable keep working for the grace past their TTL, revoked ones stay
// refused, and after the grace the outage shows as unavailable.
func TestAuthenticateOutageGrace(t *testing.T) {
	s, toks := newFixture(t)
	var mu sync.Mutex
	clock := time.Unix(0, 0)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	a, err := NewAuthenticator(s, Options{CacheTTL: 10 * time.Second, OutageGrace: 30 * time.Second, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	revoked, revokedID, _ := NewToken()
	s.mu.Lock()
	s.tokens[revokedID] = tenancy.Token{Scopes: tenancy.AllScopes, ID: revokedID, Hash: HashToken(revoked), OrganizationID: "o1", AppID: "a1", RevokedAt: time.Unix(0, 0)}
	s.mu.Unlock()
	for _, tok := range []string{toks["app"], revoked} {
		_, _ = a.Authenticate(ctx, header(tok))
	}

	s.fail.Store(true)
	// kind is 0 for an accepted token, -1 for an error of another type.
	kind := func(tok string) Kind {
		_, err := a.Authenticate(ctx, header(tok))
		var ae *Error
		switch {
		case err == nil:
			return 0
		case errors.As(err, &ae):
			return ae.Kind
		}
		return -1
	}
	advance(15 * time.Second)
	if got := kind(toks["app"]); got != 0 {
		t.Errorf("past the TTL, within the grace: %s", got)
	}
	// Right after a failed lookup the store is not asked again.
	before := s.calls.Load()
	if got := kind(toks["app"]); got != 0 || s.calls.Load() != before {
		t.Errorf("right after a failed lookup: %s, %d more lookups", got, s.calls.Load()-before)
	}
	for _, tc := range []struct {
		after       time.Duration
		tok         string
		want        Kind
		description string
	}{
		{0, revoked, Unauthenticated, "a revoked token stays refused"},
		{0, toks["org"], Unavailable, "a token never looked up cannot be checked"},
		{26 * time.Second, toks["app"], Unavailable, "past the TTL and the grace"},
	} {
		advance(tc.after)
		if got := kind(tc.tok); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.description, got, tc.want)
		}
	}
	s.fail.Store(false)
	if got := kind(toks["app"]); got != 0 {
		t.Errorf("store back: %s", got)
	}
}

// TestAuthenticateDoesNotWaitForASlowStore: with a lookup cached before,
// a request waits staleWait at most for a new one (a locked table, say).
func TestAuthenticateDoesNotWaitForASlowStore(t *testing.T) {
	s, toks := newFixture(t)
	clock := time.Unix(0, 0)
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	a, _ := NewAuthenticator(s, Options{CacheTTL: 10 * time.Second, OutageGrace: 30 * time.Second, Now: now})
	ctx := context.Background()
	if _, err := a.Authenticate(ctx, header(toks["app"])); err != nil {
		t.Fatal(err)
	}
	s.gate = make(chan struct{})
	defer close(s.gate)
	mu.Lock()
	clock = clock.Add(11 * time.Second)
	mu.Unlock()
	// The store answers nothing until the gate opens below, so an answer
	// now is the lookup cached before; the bound only ends a test that
	// would otherwise wait for ever.
	stale := make(chan error, 1)
	go func() {
		_, err := a.Authenticate(ctx, header(toks["app"]))
		stale <- err
	}()
	select {
	case err := <-stale:
		if err != nil {
			t.Fatalf("with a slow store: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("with a slow store: no answer in 10s; want the lookup cached before after about %s", staleWait)
	}
	// Without a lookup cached before, the request waits for the store.
	got := make(chan error, 1)
	go func() {
		_, err := a.Authenticate(ctx, header(toks["org"]))
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("a token never looked up was answered (%v) before the store", err)
	case <-time.After(2 * staleWait):
	}
	s.gate <- struct{}{} // the app token's refresh, started first
	s.gate <- struct{}{}
	if err := <-got; err != nil {
		t.Errorf("after the store answered: %v", err)
	}
}

// TestPrincipalCarriesScopes: a principal has its token's scopes, and
// Require refuses what they do not cover with the scope that is missing.
func TestPrincipalCarriesScopes(t *testing.T) {
	s, toks := newFixture(t)
	tok, id, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	s.tokens[id] = tenancy.Token{Scopes: tenancy.RuntimeScopes, ID: id, Hash: HashToken(tok), OrganizationID: "o1", AppID: "a1"}
	a, err := NewAuthenticator(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	runtime, err := a.Authenticate(t.Context(), header(tok))
	if err != nil || runtime.Scopes != tenancy.RuntimeScopes {
		t.Fatalf("runtime token: %+v, %v", runtime, err)
	}
	all, err := a.Authenticate(t.Context(), header(toks["app"]))
	if err != nil || all.Scopes != tenancy.AllScopes {
		t.Fatalf("token of every scope: %+v, %v", all, err)
	}
	tests := []struct {
		name      string
		p         Principal
		want      tenancy.Scopes
		message   string // "" when allowed
		challenge string
	}{
		{"runtime reads content", runtime, tenancy.ContentRead, "", ""},
		{"runtime sends events", runtime, tenancy.EventsWrite, "", ""},
		{"runtime writes content", runtime, tenancy.ContentWrite,
			"this token lacks the content:write scope needed for GraphQL mutations",
			`Bearer error="insufficient_scope", scope="content:write"`},
		{"runtime reads events and writes content", runtime, tenancy.ContentWrite | tenancy.EventsRead,
			"this token lacks the content:write,events:read scopes needed for GraphQL mutations",
			`Bearer error="insufficient_scope", scope="content:write events:read"`},
		{"every scope", all, tenancy.AllScopes, "", ""},
		{"no scope", Principal{}, tenancy.ContentRead,
			"this token lacks the content:read scope needed for GraphQL mutations",
			`Bearer error="insufficient_scope", scope="content:read"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Require(tt.want, "GraphQL mutations")
			if tt.message == "" {
				if err != nil {
					t.Fatalf("Require = %v, want nil", err)
				}
				return
			}
			var ae *Error
			if !errors.As(err, &ae) || ae.Kind != ScopeMissing || ae.Message != tt.message || ae.Scope != tt.want&^tt.p.Scopes {
				t.Fatalf("Require = %#v, want ScopeMissing %q", err, tt.message)
			}
			if got := Challenge(err); got != tt.challenge {
				t.Errorf("Challenge = %q, want %q", got, tt.challenge)
			}
		})
	}
	if got := Challenge(&Error{Kind: Forbidden, Message: "x"}); got != "" {
		t.Errorf("Challenge of another error = %q, want none", got)
	}
}

// TestFailuresOfANetworkBounded is token guessing from one network: every
// well-formed random token costs a store lookup, until the network has
// failed its burst; then tokens not cached are refused without a lookup
// until its rate lets it try again. A good token already cached still
// works from that network, and other networks are not touched.
func TestFailuresOfANetworkBounded(t *testing.T) {
	s, toks := newFixture(t)
	clock := time.Unix(0, 0)
	a, err := NewAuthenticator(s, Options{FailureRate: 1, FailureBurst: 5, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	attacker := WithClientNetwork(t.Context(), "203.0.113.0/24")
	// The good token is used (and cached) before the guessing starts.
	if _, err := a.Authenticate(attacker, header(toks["app"])); err != nil {
		t.Fatal(err)
	}
	guess := func(ctx context.Context, i int) error {
		_, err := a.Authenticate(ctx, header(fmt.Sprintf("cms_%016x_%s", i+1, strings.Repeat("A", 43))))
		return err
	}
	kinds := func(err error) Kind {
		var ae *Error
		if !errors.As(err, &ae) {
			t.Fatalf("error %v", err)
		}
		return ae.Kind
	}
	lookups := s.calls.Load()
	for i := range 5 {
		if k := kinds(guess(attacker, i)); k != Unauthenticated {
			t.Fatalf("guess %d: %s, want unauthenticated", i, k)
		}
	}
	if got := s.calls.Load() - lookups; got != 5 {
		t.Errorf("%d lookups for 5 guesses", got)
	}
	lookups = s.calls.Load()
	for i := 5; i < 100; i++ {
		err := guess(attacker, i)
		var ae *Error
		if !errors.As(err, &ae) || ae.Kind != Throttled || ae.RetryAfter <= 0 || ae.RetryAfter > time.Second {
			t.Fatalf("guess %d: %#v, want throttled for at most a second", i, err)
		}
	}
	if got := s.calls.Load() - lookups; got != 0 {
		t.Errorf("%d lookups for 95 guesses past the burst, want none", got)
	}
	// The cached good token still works from the throttled network, and
	// another network's guesses are looked up.
	if p, err := a.Authenticate(attacker, header(toks["app"])); err != nil || p.AppID != "a1" {
		t.Errorf("cached token from the throttled network: %+v, %v", p, err)
	}
	if k := kinds(guess(WithClientNetwork(t.Context(), "198.51.100.0/24"), 1000)); k != Unauthenticated {
		t.Errorf("another network: %s, want unauthenticated", k)
	}
	// A second later, one more guess is looked up.
	clock = clock.Add(time.Second)
	if k := kinds(guess(attacker, 2000)); k != Unauthenticated {
		t.Errorf("a second later: %s, want unauthenticated", k)
	}
	if k := kinds(guess(attacker, 2001)); k != Throttled {
		t.Errorf("the next guess: %s, want throttled", k)
	}
}

// TestFailuresOfANetworkNotGuesses: what is not a guess does not spend a
// network's budget (a revoked token a page still carries), a token that
// worked within a day is looked up though the network is throttled and
// its cache entry has expired, and guesses sent at once cannot all pass
// the check before any has failed.
func TestFailuresOfANetworkNotGuesses(t *testing.T) {
	s, toks := newFixture(t)
	clock := time.Unix(0, 0)
	revoked, rid, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	s.tokens[rid] = tenancy.Token{Scopes: tenancy.RuntimeScopes, ID: rid, Hash: HashToken(revoked), OrganizationID: "o1", AppID: "a1", RevokedAt: time.Unix(1, 0)}
	a, err := NewAuthenticator(s, Options{CacheTTL: 10 * time.Second, FailureRate: 0.001, FailureBurst: 5, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := WithClientNetwork(t.Context(), "203.0.113.0/24")
	if _, err := a.Authenticate(ctx, header(toks["org"])); err != nil {
		t.Fatal(err)
	}
	// The revoked token, again and again past its cache's life: refused,
	// never counted.
	for i := range 20 {
		clock = clock.Add(11 * time.Second)
		var ae *Error
		if _, err := a.Authenticate(ctx, header(revoked)); !errors.As(err, &ae) || ae.Kind != Unauthenticated {
			t.Fatalf("revoked token, try %d: %v", i, err)
		}
	}
	// Guesses at once: no more lookups than the burst.
	lookups := s.calls.Load()
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			_, _ = a.Authenticate(ctx, header(fmt.Sprintf("cms_%016x_%s", i+100, strings.Repeat("B", 43))))
		})
	}
	wg.Wait()
	if got := s.calls.Load() - lookups; got > 5 {
		t.Errorf("%d lookups for 50 guesses at once, past a burst of 5", got)
	}
	var ae *Error
	if _, err := a.Authenticate(ctx, header(fmt.Sprintf("cms_%016x_%s", 999, strings.Repeat("B", 43)))); !errors.As(err, &ae) || ae.Kind != Throttled {
		t.Fatalf("after the burst: %v, want throttled", err)
	}
	// An hour on, the good token's cache entry is long gone, yet it still
	// works from the throttled network.
	clock = clock.Add(time.Hour)
	if p, err := a.Authenticate(ctx, header(toks["org"])); err != nil || p.OrganizationID != "o1" {
		t.Errorf("a token good an hour ago: %+v, %v", p, err)
	}
}

// listingStore is a store that can list its tokens, as the content
// stores can; lists counts the listings.
type listingStore struct {
	*fakeStore
	lists atomic.Int32
}

func (s *listingStore) ListTokens(ctx context.Context, f tenancy.TokenFilter) ([]tenancy.Token, error) {
	s.lists.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []tenancy.Token
	for _, t := range s.tokens {
		out = append(out, t)
	}
	return out, nil
}

// TestOthersFailuresDoNotRefuseAValidToken: someone behind the same
// network spends its budget on guesses; a valid token that network has
// not used before still works, one made after the flood began within a
// second, while the guesses go on being refused without a lookup and
// the store's IDs are listed at most once a second however many come.
func TestOthersFailuresDoNotRefuseAValidToken(t *testing.T) {
	fs, toks := newFixture(t)
	s := &listingStore{fakeStore: fs}
	clock := time.Unix(0, 0)
	a, err := NewAuthenticator(s, Options{FailureRate: 1, FailureBurst: 5, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := WithClientNetwork(t.Context(), "203.0.113.0/24")
	guess := func(i int) error {
		_, err := a.Authenticate(ctx, header(fmt.Sprintf("cms_%016x_%s", i+1, strings.Repeat("A", 43))))
		return err
	}
	kind := func(err error) Kind {
		var ae *Error
		if !errors.As(err, &ae) {
			return 0
		}
		return ae.Kind
	}
	for i := range 5 {
		if k := kind(guess(i)); k != Unauthenticated {
			t.Fatalf("guess %d: %s, want unauthenticated", i, k)
		}
	}
	lookups := fs.calls.Load()
	for i := 5; i < 200; i++ {
		if k := kind(guess(i)); k != Throttled {
			t.Fatalf("guess %d: %s, want throttled", i, k)
		}
	}
	if got := fs.calls.Load() - lookups; got != 0 {
		t.Errorf("%d lookups for 195 guesses past the burst, want none", got)
	}
	if got := s.lists.Load(); got != 1 {
		t.Errorf("%d listings of the store's IDs within a second, want 1", got)
	}

	// A valid token, never used here, from the throttled network.
	if p, err := a.Authenticate(ctx, header(toks["app"])); err != nil || p.AppID != "a1" {
		t.Errorf("a valid token from the throttled network: %+v, %v", p, err)
	}
	// A known ID with a wrong secret is still a failure, answered 429.
	wrong := toks["org"][:len(toks["org"])-1] + map[bool]string{true: "B", false: "A"}[strings.HasSuffix(toks["org"], "A")]
	if k := kind(func() error { _, err := a.Authenticate(ctx, header(wrong)); return err }()); k != Throttled {
		t.Errorf("a known ID's wrong secret past the bound: %s, want throttled", k)
	}
	// A token made after the listing: refused until a new listing may be
	// made, which Retry-After says; then it works.
	fresh, id, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	fs.mu.Lock()
	fs.tokens[id] = tenancy.Token{Scopes: tenancy.RuntimeScopes, ID: id, Hash: HashToken(fresh), OrganizationID: "o1", AppID: "a2"}
	fs.mu.Unlock()
	var ae *Error
	if _, err := a.Authenticate(ctx, header(fresh)); !errors.As(err, &ae) || ae.Kind != Throttled || ae.RetryAfter <= 0 || ae.RetryAfter > time.Second {
		t.Fatalf("a token made after the listing: %v, want throttled for at most a second", err)
	}
	clock = clock.Add(ae.RetryAfter)
	// The second's one failure goes to a guess, so the network is past
	// its bound still.
	if k := kind(guess(999)); k != Unauthenticated {
		t.Fatalf("the guess a second later: %s, want unauthenticated", k)
	}
	if p, err := a.Authenticate(ctx, header(fresh)); err != nil || p.AppID != "a2" {
		t.Errorf("the new token after Retry-After: %+v, %v", p, err)
	}
	if got := s.lists.Load(); got != 2 {
		t.Errorf("%d listings, want 2", got)
	}
	// The guesses go on costing nothing.
	lookups = fs.calls.Load()
	for i := 1000; i < 1100; i++ {
		if k := kind(guess(i)); k != Throttled {
			t.Fatalf("guess %d: %s, want throttled", i, k)
		}
	}
	if got, lists := fs.calls.Load()-lookups, s.lists.Load(); got != 0 || lists != 2 {
		t.Errorf("%d lookups and %d listings for 100 more guesses, want none and 2", got, lists)
	}
}

// TestOriginKeepsAUsableUserAgent: what a client sends as its user agent
// reaches the audit log as valid UTF-8 of at most 256 bytes, so that no
// header can fail or bloat the writes it makes.
func TestOriginKeepsAUsableUserAgent(t *testing.T) {
	tests := []struct {
		name, ua, want string
	}{
		{"plain", "catalogue-sync/2.1", "catalogue-sync/2.1"},
		{"not UTF-8", "bad\xff\xfeagent", "badagent"},
		{"long", strings.Repeat("a", 300), strings.Repeat("a", 256)},
		{"cut inside a character", strings.Repeat("a", 255) + "é", strings.Repeat("a", 255)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, ok := tenancy.ActorOf(Origin(t.Context(), "10.0.0.0/24", tc.ua, "req-1"))
			if !ok || a.UserAgent != tc.want || a.ClientNet != "10.0.0.0/24" || a.RequestID != "req-1" || a.TokenID != "" {
				t.Errorf("Origin = %+v; want user agent %q", a, tc.want)
			}
		})
	}
}
