package embeddings

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
)

func TestCache(t *testing.T) {
	// Each step embeds texts through the same cache and checks what reached
	// the server.
	type step struct {
		texts                []string
		wantInputs           int // texts the server embedded in this step
		wantHits, wantMisses uint64
		wantLen              int
	}
	tests := []struct {
		name  string
		max   int
		steps []step
	}{
		{"second call embeds nothing", 10, []step{
			{[]string{"a", "b", "c"}, 3, 0, 3, 3},
			{[]string{"a", "b", "c"}, 0, 3, 0, 3},
		}},
		{"dedup within a call", 10, []step{
			{[]string{"a", "b", "a", "a", "b"}, 2, 3, 2, 2},
		}},
		{"partial hits", 10, []step{
			{[]string{"a", "b"}, 2, 0, 2, 2},
			{[]string{"b", "c", "a", "d"}, 2, 2, 2, 4},
		}},
		{"eviction bound", 2, []step{
			{[]string{"a", "b", "c"}, 3, 0, 3, 2},
			{[]string{"c"}, 0, 1, 0, 2},
			{[]string{"a"}, 1, 0, 1, 2}, // a was least recently used
		}},
		{"use refreshes", 2, []step{
			{[]string{"a", "b"}, 2, 0, 2, 2},
			{[]string{"a"}, 0, 1, 0, 2},
			{[]string{"c"}, 1, 0, 1, 2}, // evicts b, not a
			{[]string{"a"}, 0, 1, 0, 2},
			{[]string{"b"}, 1, 0, 1, 2},
		}},
		{"empty text is a text", 10, []step{
			{[]string{"", "a", ""}, 2, 1, 2, 2},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, s := newTestClient(t, Config{})
			cache := NewCache(tt.max)
			var hits, misses uint64
			for i, st := range tt.steps {
				before := s.Inputs()
				got, err := cache.Embed(context.Background(), c, st.texts)
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				for j, text := range st.texts {
					if !slices.Equal(got[j], s.Vector(text)) {
						t.Errorf("step %d: vector %d is not that of %q", i, j, text)
					}
				}
				hits += st.wantHits
				misses += st.wantMisses
				h, m := cache.Stats()
				if n := s.Inputs() - before; n != st.wantInputs || h != hits || m != misses || cache.Len() != st.wantLen {
					t.Errorf("step %d: embedded %d, stats %d/%d, len %d; want %d, %d/%d, %d",
						i, n, h, m, cache.Len(), st.wantInputs, hits, misses, st.wantLen)
				}
			}
		})
	}
}

func TestCacheKeysByModel(t *testing.T) {
	c1, s := newTestClient(t, Config{Model: "one"})
	c2, err := New(Config{URL: c1.endpoint[:len(c1.endpoint)-len("/embeddings")], Model: "two"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cache := NewCache(0)
	for _, c := range []*Client{c1, c2, c1, c2} {
		if _, err := cache.Embed(context.Background(), c, []string{"same text"}); err != nil {
			t.Fatal(err)
		}
	}
	if s.Inputs() != 2 || cache.Len() != 2 {
		t.Errorf("embedded %d, cached %d; want one per model", s.Inputs(), cache.Len())
	}
}

func TestCacheError(t *testing.T) {
	c, s := newTestClient(t, Config{})
	cache := NewCache(10)
	s.Fail(400)
	if _, err := cache.Embed(context.Background(), c, []string{"a", "b"}); err == nil {
		t.Fatal("Embed succeeded against a failing server")
	}
	if cache.Len() != 0 {
		t.Errorf("cache holds %d entries after a failure", cache.Len())
	}
	s.Fail(0)
	if _, err := cache.Embed(context.Background(), c, []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	if cache.Len() != 2 {
		t.Errorf("cache holds %d entries, want 2", cache.Len())
	}
}

// shortEmbedder answers one vector too few, as a broken Embedder might.
type shortEmbedder struct{}

func (shortEmbedder) Model() string { return "short" }
func (shortEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	return make([][]float32, len(texts)-1), nil
}

func TestCacheRejectsShortAnswer(t *testing.T) {
	cache := NewCache(10)
	_, err := cache.Embed(context.Background(), shortEmbedder{}, []string{"a", "b"})
	if err == nil || cache.Len() != 0 {
		t.Fatalf("error %v, len %d; want an error and nothing cached", err, cache.Len())
	}
	if errors.Is(err, errNonFinite) {
		t.Fatalf("unexpected error kind %v", err)
	}
}

func TestCacheConcurrent(t *testing.T) {
	c, s := newTestClient(t, Config{BatchSize: 5})
	cache := NewCache(30)
	all := texts(40)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Go(func() {
			for round := range 5 {
				start := (g*3 + round*7) % 30
				in := all[start : start+10]
				got, err := cache.Embed(context.Background(), c, in)
				if err != nil {
					errs <- err
					return
				}
				for i, text := range in {
					if !slices.Equal(got[i], s.Vector(text)) {
						errs <- fmt.Errorf("goroutine %d: wrong vector for %q", g, text)
						return
					}
				}
				cache.Len()
				cache.Stats()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if cache.Len() > 30 {
		t.Errorf("cache holds %d entries, bound is 30", cache.Len())
	}
	h, m := cache.Stats()
	if h+m != 16*5*10 {
		t.Errorf("hits %d + misses %d != %d texts asked", h, m, 16*5*10)
	}
	if m != uint64(s.Inputs()) {
		t.Errorf("misses %d, server embedded %d", m, s.Inputs())
	}
}

// gatedEmbedder embeds each text as a one-number vector of its length,
// once gate is closed, failing while fail is set; it counts the texts it
// was asked for.
type gatedEmbedder struct {
	gate  chan struct{}
	mu    sync.Mutex
	texts int
	fail  error
}

func (g *gatedEmbedder) Model() string { return "gated" }

func (g *gatedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	g.mu.Lock()
	g.texts += len(texts)
	fail := g.fail
	g.mu.Unlock()
	<-g.gate
	if fail != nil {
		return nil, fail
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = []float32{float32(len(t))}
	}
	return out, nil
}

// TestCacheSharesTextsInFlight: a call missing a text another call is
// embedding waits for it instead of embedding it again; when that call
// fails, the waiting call embeds the text itself.
func TestCacheSharesTextsInFlight(t *testing.T) {
	for _, tc := range []struct {
		name       string
		fail       error
		wantTexts  int
		wantFirstE bool
	}{
		{"shared", nil, 3, false},
		{"first call fails, second embeds", errors.New("boom"), 6, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCache(0)
			g := &gatedEmbedder{gate: make(chan struct{}), fail: tc.fail}
			texts := []string{"a", "bb", "ccc"}
			first := make(chan error, 1)
			go func() {
				_, err := c.Embed(context.Background(), g, texts)
				first <- err
			}()
			// The first call has registered its texts once the embedder was asked.
			for {
				g.mu.Lock()
				asked := g.texts
				g.mu.Unlock()
				if asked == 3 {
					break
				}
				runtime.Gosched()
			}
			g.mu.Lock()
			g.fail = nil // the second call's own attempt succeeds
			g.mu.Unlock()
			second := make(chan [][]float32, 1)
			go func() {
				vs, err := c.Embed(context.Background(), g, append([]string{"bb"}, texts...))
				if err != nil {
					t.Error(err)
				}
				second <- vs
			}()
			// The second call waits on the first's texts: all four are hits.
			for {
				if hits, _ := c.Stats(); hits == 4 {
					break
				}
				runtime.Gosched()
			}
			close(g.gate)
			if err := <-first; (err != nil) != tc.wantFirstE {
				t.Errorf("first call: %v", err)
			}
			vs := <-second
			if len(vs) != 4 || vs[0][0] != 2 || vs[1][0] != 1 || vs[3][0] != 3 {
				t.Errorf("second call's vectors: %v", vs)
			}
			if g.texts != tc.wantTexts {
				t.Errorf("embedder asked for %d texts, want %d", g.texts, tc.wantTexts)
			}
		})
	}
}

// TestCacheKeepsTenantsApart: a text one app has embedded is embedded
// again for another (so the time of an answer says nothing of other apps'
// texts), and an app that floods the cache with new texts evicts its own
// vectors, not those of an app that holds fewer.
func TestCacheKeepsTenantsApart(t *testing.T) {
	c, s := newTestClient(t, Config{})
	cache := NewCache(100)
	ctx := t.Context()
	victim := make([]string, 40)
	for i := range victim {
		victim[i] = fmt.Sprintf("victim faq %d", i)
	}
	if _, err := cache.EmbedFor(ctx, "app-victim", c, victim); err != nil {
		t.Fatal(err)
	}
	before := s.Inputs()
	if _, err := cache.EmbedFor(ctx, "app-attacker", c, victim[:1]); err != nil {
		t.Fatal(err)
	}
	if got := s.Inputs() - before; got != 1 {
		t.Errorf("another app's text was answered from the cache (%d texts embedded, want 1)", got)
	}
	if _, err := cache.EmbedFor(ctx, "app-victim", c, victim[:1]); err != nil || s.Inputs()-before != 1 {
		t.Errorf("the app's own text was not answered from the cache: %v", err)
	}
	// Questions never asked before, far more than the cache holds.
	for i := range 20 {
		flood := make([]string, 50)
		for j := range flood {
			flood[j] = fmt.Sprintf("invented question %d-%d", i, j)
		}
		if _, err := cache.EmbedFor(ctx, "app-attacker", c, flood); err != nil {
			t.Fatal(err)
		}
	}
	if got := cache.TenantLen("app-victim"); got != len(victim) {
		t.Errorf("the flooded cache keeps %d of the victim's %d vectors", got, len(victim))
	}
	if got := cache.Len(); got != 100 {
		t.Errorf("cache holds %d, want its bound 100", got)
	}
	before = s.Inputs()
	if _, err := cache.EmbedFor(ctx, "app-victim", c, victim); err != nil || s.Inputs() != before {
		t.Errorf("the victim's content was embedded again after the flood (%d texts): %v", s.Inputs()-before, err)
	}
}

func TestKeysOfTenantsDiffer(t *testing.T) {
	seen := map[cacheKey]string{}
	for _, k := range [][3]string{{"", "m", "text"}, {"a", "m", "text"}, {"am", "", "text"}, {"", "am", "text"}, {"a", "mt", "ext"}, {"a", "m", "text"}} {
		key := keyOf(k[0], k[1], k[2])
		if prev, ok := seen[key]; ok && prev != fmt.Sprint(k) {
			t.Errorf("%v and %s share a key", k, prev)
		}
		seen[key] = fmt.Sprint(k)
	}
	if len(seen) != 5 {
		t.Errorf("%d distinct keys for 5 distinct triples", len(seen))
	}
}
