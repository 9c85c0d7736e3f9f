package auth

import (
	"context"
	"crypto/sha256"
	"math/rand/v2"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/tenancy"
)

// medianNanos measures each named check in interleaved batches, in a new
// random order every round so that drift and noise from the machine fall
// on all of them alike, and returns the median time of one check.
func medianNanos(rounds, batch int, checks map[string]func()) map[string]float64 {
	names := make([]string, 0, len(checks))
	for n := range checks {
		names = append(names, n)
	}
	samples := map[string][]float64{}
	runtime.GC()
	for range rounds {
		rand.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		for _, n := range names {
			check := checks[n]
			start := time.Now()
			for range batch {
				check()
			}
			samples[n] = append(samples[n], float64(time.Since(start).Nanoseconds())/float64(batch))
		}
	}
	out := map[string]float64{}
	for n, s := range samples {
		slices.Sort(s)
		out[n] = s[len(s)/2]
	}
	return out
}

// TestTokenCheckTimeDoesNotDependOnTheMatchedPrefix checks wrong tokens
// that share all but the last character with a real one against wrong
// tokens that share only the public ID, and tokens of an ID that does not
// exist: digests are compared, in constant time, and every refusal asks
// the store once, so how much of a guess is right must not show in the
// time it takes to refuse it. The bound is loose (the machine is shared
// and noisy); what it catches is a path that does more or less work, such
// as skipping the hash for unknown IDs or a store query for some tokens
// only. A control shows the measurement does resolve a skipped hash:
// malformed tokens are refused before hashing.
func TestTokenCheckTimeDoesNotDependOnTheMatchedPrefix(t *testing.T) {
	s, toks := newFixture(t)
	real := toks["app"]
	fixed := time.Now()
	// A clock that stands still keeps every lookup cached throughout.
	a, err := NewAuthenticator(s, Options{CacheTTL: MaxCacheTTL, Now: func() time.Time { return fixed }})
	if err != nil {
		t.Fatal(err)
	}
	idEnd := len(tokenPrefix) + idLen + 1
	flip := func(b byte) byte {
		if b == 'A' {
			return 'B'
		}
		return 'A'
	}
	near := real[:len(real)-1] + string(flip(real[len(real)-1]))
	farSecret := []byte(real[idEnd:])
	for i := range farSecret {
		farSecret[i] = flip(farSecret[i])
	}
	far := real[:idEnd] + string(farSecret)
	other, _, err := NewToken() // an ID the store does not have
	if err != nil {
		t.Fatal(err)
	}
	headers := map[string]http.Header{}
	for name, tok := range map[string]string{"near": near, "far": far, "unknown id": other, "malformed": real[:len(real)-1]} {
		headers[name] = http.Header{"Authorization": {"Bearer " + tok}}
	}
	ctx := context.Background()
	checks := map[string]func(){}
	for name, h := range headers {
		checks[name] = func() {
			if _, err := a.Authenticate(ctx, h); err == nil {
				panic("a wrong token was accepted")
			}
		}
	}
	for _, check := range checks {
		check() // fills the cache: the measurement compares cached paths
	}
	calls := s.calls.Load()
	const rounds, batch = 400, 200
	med := medianNanos(rounds, batch, checks)
	// Every refusal of a well-formed token asks the store once (a
	// malformed one never does): the same work on every path.
	if got, want := s.calls.Load()-calls, int32(3*rounds*batch); got != want {
		t.Fatalf("%d store lookups during the measurement, want %d, one for each refusal of a well-formed token", got, want)
	}
	t.Logf("median per check: near miss %.0f ns, far miss %.0f ns, unknown ID %.0f ns, malformed (no hash) %.0f ns",
		med["near"], med["far"], med["unknown id"], med["malformed"])
	const bound = 1.5
	for _, pair := range [][2]string{{"near", "far"}, {"near", "unknown id"}, {"far", "unknown id"}} {
		x, y := med[pair[0]], med[pair[1]]
		if r := max(x, y) / min(x, y); r > bound {
			t.Errorf("%s %.0f ns vs %s %.0f ns: ratio %.2f over %.1f", pair[0], x, pair[1], y, r, bound)
		}
	}
	if r := med["near"] / med["malformed"]; r < bound {
		t.Errorf("a check that hashes took %.2f times one that does not; the measurement cannot tell paths apart, so its equality above shows nothing", r)
	}

	// The comparison itself, without the cache around it.
	stored := HashToken(real)
	hm := medianNanos(400, 200, map[string]func(){
		"near": func() { _ = HashMatches(stored, near) },
		"far":  func() { _ = HashMatches(stored, far) },
	})
	t.Logf("HashMatches median: near miss %.0f ns, far miss %.0f ns", hm["near"], hm["far"])
	if r := max(hm["near"], hm["far"]) / min(hm["near"], hm["far"]); r > bound {
		t.Errorf("HashMatches: near %.0f ns vs far %.0f ns, ratio %.2f over %.1f", hm["near"], hm["far"], r, bound)
	}
}

// slowStore takes delay for every token lookup, as a database does.
type slowStore struct {
	*fakeStore
	delay time.Duration
}

func (s *slowStore) Token(ctx context.Context, id string) (tenancy.Token, error) {
	time.Sleep(s.delay)
	return s.fakeStore.Token(ctx, id)
}

// TestRefusalTimeDoesNotTellALookup: a token of an ID nobody issued is
// new each time, so not cached; a known ID with a wrong secret is cached
// (others use it). Each refusal asks the store alike, so the time does
// not tell which IDs exist or are in use. A control shows the
// measurement resolves a lookup: the good token, cached, is accepted
// without one.
func TestRefusalTimeDoesNotTellALookup(t *testing.T) {
	fs, toks := newFixture(t)
	s := &slowStore{fakeStore: fs, delay: 300 * time.Microsecond}
	real := toks["app"]
	wrong := real[:len(real)-1] + map[bool]string{true: "B", false: "A"}[strings.HasSuffix(real, "A")]
	a, err := NewAuthenticator(s, Options{CacheTTL: MaxCacheTTL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	good := http.Header{"Authorization": {"Bearer " + real}}
	if _, err := a.Authenticate(ctx, good); err != nil {
		t.Fatal(err)
	}
	calls := fs.calls.Load()
	const rounds, batch = 100, 2
	med := medianNanos(rounds, batch, map[string]func(){
		"unknown": func() {
			other, _, _ := NewToken() // a new ID every time
			if _, err := a.Authenticate(ctx, http.Header{"Authorization": {"Bearer " + other}}); err == nil {
				panic("an unknown token was accepted")
			}
		},
		"known": func() {
			if _, err := a.Authenticate(ctx, http.Header{"Authorization": {"Bearer " + wrong}}); err == nil {
				panic("a wrong secret was accepted")
			}
		},
		"good": func() {
			if _, err := a.Authenticate(ctx, good); err != nil {
				panic(err)
			}
		},
	})
	u, k, g := med["unknown"], med["known"], med["good"]
	t.Logf("median: unknown ID %.0f µs, known ID with a wrong secret %.0f µs, the good token (cached) %.0f µs", u/1e3, k/1e3, g/1e3)
	if got, want := fs.calls.Load()-calls, int32(2*rounds*batch); got != want {
		t.Errorf("%d store lookups for %d refusals, want one each", got, want)
	}
	if r := max(u, k) / min(u, k); r > 1.2 {
		t.Errorf("unknown ID %.0f µs vs known ID %.0f µs: ratio %.2f over 1.2", u/1e3, k/1e3, r)
	}
	if k-g < float64(s.delay)/2 {
		t.Errorf("a refusal %.0f µs, an accepted cached token %.0f µs: the lookup does not show, so the equality above shows nothing", k/1e3, g/1e3)
	}
}

// recordingStore notes the keys tokens are looked up by.
type recordingStore struct {
	*fakeStore
	mu  sync.Mutex
	ids []string
}

func (r *recordingStore) Token(ctx context.Context, id string) (tenancy.Token, error) {
	r.mu.Lock()
	r.ids = append(r.ids, id)
	r.mu.Unlock()
	return r.fakeStore.Token(ctx, id)
}

// TestLookupsGoByHash checks, deterministically, that the secret never
// leaves the request: the store is asked by public ID only, the cache
// holds the digest and not the token, and a token is accepted exactly
// when its SHA-256 equals the stored digest.
func TestLookupsGoByHash(t *testing.T) {
	fs, toks := newFixture(t)
	s := &recordingStore{fakeStore: fs}
	a, err := NewAuthenticator(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tok := toks["app"]
	id, err := ParseToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	secret := tok[len(tokenPrefix)+idLen+1:]
	h := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }
	ctx := context.Background()
	if _, err := a.Authenticate(ctx, h(tok)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(ctx, h(tok[:len(tok)-1]+"A")); err == nil && !strings.HasSuffix(tok, "A") {
		t.Fatal("a token with another secret was accepted")
	}
	s.mu.Lock()
	looked := slices.Clone(s.ids)
	s.mu.Unlock()
	// One lookup for the token, one for the refusal of the other secret.
	if len(looked) != 2 || looked[0] != id || looked[1] != id {
		t.Errorf("store lookups by %q, want two by the public ID %q", looked, id)
	}
	want := sha256.Sum256([]byte(tok))
	a.mu.Lock()
	for key, c := range a.tokens {
		if strings.Contains(key, secret) || strings.Contains(string(c.val.Hash), secret) {
			t.Errorf("the cache holds the secret under %q", key)
		}
		if key == id && string(c.val.Hash) != string(want[:]) {
			t.Errorf("cached digest %x, want the SHA-256 of the token %x", c.val.Hash, want)
		}
	}
	a.mu.Unlock()

	// The stored digest alone decides. Another secret under the same ID
	// is accepted once the digest stored is its SHA-256, and the first
	// token then is not; a digest off by one bit accepts neither.
	other := tok[:len(tok)-4] + "wxyz"
	if other == tok {
		other = tok[:len(tok)-4] + "abcd"
	}
	for _, tc := range []struct {
		name       string
		digest     []byte
		tok, other bool
	}{
		{"the token's digest", HashToken(tok), true, false},
		{"the other secret's digest", HashToken(other), false, true},
		{"a digest one bit off", func() []byte { d := HashToken(tok); d[31] ^= 1; return d }(), false, false},
	} {
		fs.mu.Lock()
		rec := fs.tokens[id]
		rec.Hash = tc.digest
		fs.tokens[id] = rec
		fs.mu.Unlock()
		// A fresh authenticator: nothing cached from before the change.
		a, _ := NewAuthenticator(s, Options{})
		_, errTok := a.Authenticate(ctx, h(tok))
		_, errOther := a.Authenticate(ctx, h(other))
		if (errTok == nil) != tc.tok || (errOther == nil) != tc.other {
			t.Errorf("%s stored: token accepted %v (want %v), other secret accepted %v (want %v)", tc.name, errTok == nil, tc.tok, errOther == nil, tc.other)
		}
	}
}

func TestPossibleID(t *testing.T) {
	for s, want := range map[string]bool{
		"app-1": true, "Welcome": true, "é": true, strings.Repeat("a", tenancy.MaxIDLength): true, " padded ": true,
		"": false, strings.Repeat("a", tenancy.MaxIDLength+1): false, "a\x00b": false, "\xff": false,
		"a/b": false, "tab\there": false, "line\nbreak": false, "\u0085": false,
	} {
		if got := PossibleID(s); got != want {
			t.Errorf("PossibleID(%q) = %v, want %v", s, got, want)
		}
	}
}
