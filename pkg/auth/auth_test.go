package auth

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/content"
)

func TestBearerToken(t *testing.T) {
	cases := []struct {
		name, header, value, want string
		ok                        bool
	}{
		{"standard", "Authorization", "Bearer abc", "abc", true},
		{"spec spelling", "Authorize", "Bearer abc", "abc", true},
		{"lower-case scheme", "Authorization", "bearer abc", "abc", true},
		{"upper-case scheme", "Authorization", "BEARER abc", "abc", true},
		{"extra spaces", "Authorization", "  Bearer   abc  ", "abc", true},
		{"basic", "Authorization", "Basic abc", "", false},
		{"no scheme", "Authorization", "abc", "", false},
		{"empty token", "Authorization", "Bearer ", "", false},
		{"missing", "X-Other", "Bearer abc", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			h.Set(tc.header, tc.value)
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
	tokens map[string]content.Token
	apps   map[string]content.App
	calls  atomic.Int32
	fail   atomic.Bool
	gate   chan struct{}
}

func (s *fakeStore) Token(ctx context.Context, id string) (content.Token, error) {
	s.calls.Add(1)
	if s.gate != nil {
		<-s.gate
	}
	if s.fail.Load() {
		return content.Token{}, errors.New("database is locked")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tokens[id]
	if !ok {
		return t, content.ErrNotFound
	}
	return t, nil
}

func (s *fakeStore) App(ctx context.Context, id string) (content.App, error) {
	s.calls.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.apps[id]
	if !ok {
		return a, content.ErrNotFound
	}
	return a, nil
}

func newFixture(t *testing.T) (*fakeStore, map[string]string) {
	t.Helper()
	s := &fakeStore{tokens: map[string]content.Token{}, apps: map[string]content.App{
		"a1": {ID: "a1", OrganizationID: "o1"}, "a2": {ID: "a2", OrganizationID: "o1"}, "b1": {ID: "b1", OrganizationID: "o2"},
	}}
	toks := map[string]string{}
	for name, scope := range map[string][2]string{"app": {"o1", "a1"}, "org": {"o1", ""}} {
		tok, id, err := NewToken()
		if err != nil {
			t.Fatal(err)
		}
		s.tokens[id] = content.Token{ID: id, Hash: HashToken(tok), OrganizationID: scope[0], AppID: scope[1]}
		toks[name] = tok
	}
	return s, toks
}

func header(tok string) http.Header {
	return http.Header{"Authorization": []string{"Bearer " + tok}}
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
	if !errors.As(err, &ae) || ae.Status != 401 || ae.Message != "Unauthorized" {
		t.Errorf("revoked token after TTL: %v", err)
	}

	// Unknown IDs are cached too, and a wrong secret for a known ID fails.
	unknown, _, _ := NewToken()
	before := s.calls.Load()
	for range 10 {
		if _, err := a.Authenticate(ctx, header(unknown)); err == nil {
			t.Fatal("unknown token accepted")
		}
	}
	if n := s.calls.Load() - before; n != 1 {
		t.Errorf("%d lookups for 10 requests with one unknown token, want 1", n)
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
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable {
		t.Fatalf("store down: %v, want a 503 error", err)
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
	for s.calls.Load() == 0 {
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
		status  int
	}{
		{"app token", appP, "", "a1", 0},
		{"app token naming itself", appP, "a1", "a1", 0},
		{"app token naming another app", appP, "a2", "", 403},
		{"org token", orgP, "a2", "a2", 0},
		{"org token without appId", orgP, "", "", 400},
		{"org token foreign app", orgP, "b1", "", 403},
		{"org token unknown app", orgP, "zz", "", 403},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := a.Resolve(ctx, tc.p, tc.param)
			if tc.status == 0 {
				if err != nil || got.AppID != tc.wantApp || got.OrganizationID != "o1" {
					t.Errorf("Resolve = %+v, %v", got, err)
				}
				return
			}
			var ae *Error
			if !errors.As(err, &ae) || ae.Status != tc.status {
				t.Errorf("Resolve err = %v, want status %d", err, tc.status)
			}
		})
	}
}

func TestCacheTTLBounded(t *testing.T) {
	if _, err := NewAuthenticator(&fakeStore{}, Options{CacheTTL: time.Minute}); err == nil {
		t.Error("a TTL over 30s was accepted")
	}
}
