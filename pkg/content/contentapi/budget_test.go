package contentapi

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/embedstandin"
	"github.com/assistantcms/cms/internal/fixture"
	"github.com/assistantcms/cms/pkg/content/embeddings"
	"github.com/assistantcms/cms/pkg/content/knowledge"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// growing is a value whose size grows after it is loaded, as a base's
// does when its vectors are built.
type growing struct{ n atomic.Int64 }

func (g *growing) Bytes() int64 { return g.n.Load() }

// bodyCost is what an app holding one body of n bytes under key is
// counted to hold.
func bodyCost(key string, n int) int64 {
	return appOverhead + entryOverhead + int64(len(key)) + sizeOf(newBody(make([]byte, n)))
}

// TestCacheBudgetAccounting: the bytes held are the sum of the apps
// kept, within the budget, and the apps evicted are those least recently
// used; the app in use is kept whatever it holds.
func TestCacheBudgetAccounting(t *testing.T) {
	one := bodyCost("k", 1000) // an app holding one body of 1,000 bytes
	type use struct {
		app  string
		size int
	}
	uses := func(apps ...string) []use {
		var u []use
		for _, a := range apps {
			u = append(u, use{a, 1000})
		}
		return u
	}
	hotAmongCold := []use{{"hot", 1000}}
	for i := range 20 {
		hotAmongCold = append(hotAmongCold, use{fmt.Sprintf("cold-%d", i), 1000}, use{"hot", 1000})
	}
	for _, tc := range []struct {
		name      string
		budget    int64
		uses      []use
		kept      []string
		evictions uint64
	}{
		{name: "within the budget every app stays", budget: 3 * one, uses: uses("a", "b", "c"), kept: []string{"a", "b", "c"}},
		{name: "no budget keeps every app", budget: 0, uses: uses("a", "b", "c", "d", "e"), kept: []string{"a", "b", "c", "d", "e"}},
		{name: "the least recently used goes first", budget: 2 * one, uses: uses("a", "b", "c"), kept: []string{"b", "c"}, evictions: 1},
		{name: "a use makes an app recent", budget: 2 * one, uses: uses("a", "b", "a", "c"), kept: []string{"a", "c"}, evictions: 1},
		{name: "several go to make room for a large one", budget: 4 * one, uses: []use{{"a", 1000}, {"b", 1000}, {"c", 1000}, {"d", 1000}, {"big", 2500}},
			kept: []string{"c", "d", "big"}, evictions: 2},
		{name: "an app over the budget stays while it is the one in use", budget: one, uses: []use{{"a", 1000}, {"huge", 5000}}, kept: []string{"huge"}, evictions: 1},
		{name: "and goes when another is used", budget: one, uses: []use{{"huge", 5000}, {"a", 1000}}, kept: []string{"a"}, evictions: 1},
		{name: "a hot app outlives a stream of cold ones", budget: 2 * one, uses: hotAmongCold, kept: []string{"hot", "cold-19"}, evictions: 19},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := newCache(&revisions{}, time.Hour, 0)
			c.budget = tc.budget
			var evicted []string
			c.evicted = func(apps []string) { evicted = append(evicted, apps...) }
			want := map[string]int64{}
			for _, u := range tc.uses {
				want[u.app] = bodyCost("k", u.size)
				if _, err := c.body(ctx, u.app, "k", true, func(context.Context, int64) ([]byte, error) { return make([]byte, u.size), nil }); err != nil {
					t.Fatal(err)
				}
			}
			st := c.stats()
			kept := slices.Sorted(maps.Keys(c.apps))
			if !slices.Equal(kept, slices.Sorted(slices.Values(tc.kept))) {
				t.Errorf("kept %v, want %v", kept, tc.kept)
			}
			var sum int64
			for _, a := range tc.kept {
				sum += want[a]
			}
			if st.bytes != sum || st.apps != len(tc.kept) {
				t.Errorf("held %d bytes in %d apps, want %d in %d", st.bytes, st.apps, sum, len(tc.kept))
			}
			if tc.budget > 0 && len(tc.kept) > 1 && st.bytes > tc.budget {
				t.Errorf("held %d bytes, over the budget of %d", st.bytes, tc.budget)
			}
			if st.evictions != tc.evictions || uint64(len(evicted)) != tc.evictions {
				t.Errorf("%d evictions, %d told (%v), want %d", st.evictions, len(evicted), evicted, tc.evictions)
			}
			for _, a := range evicted {
				if slices.Contains(tc.kept, a) {
					t.Errorf("%s evicted and still kept", a)
				}
			}
		})
	}
}

// TestCacheBudgetCountsGrowthAndRevisions: a value that grows after it
// is loaded is counted again at its next use, and values of an old
// revision stop counting once the revision moves.
func TestCacheBudgetCountsGrowthAndRevisions(t *testing.T) {
	ctx := context.Background()
	revs := &revisions{}
	c := newCache(revs, 0, 0) // the revision is read on every use
	g := &growing{}
	g.n.Store(100)
	load := func(context.Context, int64) (any, error) { return g, nil }
	if _, err := c.getOrStale(ctx, "app", "knowledge", true, load); err != nil {
		t.Fatal(err)
	}
	base := int64(appOverhead + entryOverhead + len("knowledge"))
	if got := c.stats().bytes; got != base+100 {
		t.Fatalf("held %d, want %d", got, base+100)
	}
	g.n.Store(5000) // its vectors came
	if _, err := c.getOrStale(ctx, "app", "knowledge", true, load); err != nil {
		t.Fatal(err)
	}
	if got := c.stats().bytes; got != base+5000 {
		t.Errorf("after growing, held %d, want %d", got, base+5000)
	}
	if _, err := c.body(ctx, "app", "k", true, func(context.Context, int64) ([]byte, error) { return make([]byte, 300), nil }); err != nil {
		t.Fatal(err)
	}
	if got, want := c.stats().bytes, base+5000+bodyCost("k", 300)-appOverhead; got != want {
		t.Errorf("with a body, held %d, want %d", got, want)
	}
	// A new revision: the body is dropped, the base kept as stale until
	// its successor is built.
	revs.rev.Add(1)
	g2 := &growing{}
	g2.n.Store(700)
	// The old base answers while the new one loads in the background.
	for v := any(nil); v != g2; {
		var err error
		if v, err = c.getOrStale(ctx, "app", "knowledge", true, func(context.Context, int64) (any, error) { return g2, nil }); err != nil {
			t.Fatal(err)
		}
		if v != g && v != g2 {
			t.Fatalf("answered %v", v)
		}
	}
	if got := c.stats().bytes; got != base+700 {
		t.Errorf("after the revision moved, held %d, want %d (the new base alone)", got, base+700)
	}
}

// TestCacheInvalidateAddsNoApp: a change to an app the replica does not
// hold (told by another replica) takes no memory.
func TestCacheInvalidateAddsNoApp(t *testing.T) {
	c := newCache(&revisions{}, time.Hour, 0)
	for i := range 100 {
		c.Invalidate(fmt.Sprintf("app-%d", i))
	}
	if st := c.stats(); st.apps != 0 || st.bytes != 0 {
		t.Errorf("%d apps, %d bytes held after invalidating apps never served", st.apps, st.bytes)
	}
}

// TestCacheEvictionUnderConcurrentUse: with a budget of about two apps,
// many requests for many apps at once, each loading slowly, get their
// own app's value every time, whether their app is evicted while they
// wait or not; the bytes held end within the budget. Run with -race.
func TestCacheEvictionUnderConcurrentUse(t *testing.T) {
	ctx := context.Background()
	revs := &revisions{}
	c := newCache(revs, 0, 0)
	c.budget = 2 * bodyCost("k", 64)
	var loads atomic.Int32
	const apps, workers, each = 8, 16, 200
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				app := fmt.Sprintf("app-%d", (w+i)%apps)
				if i%50 == 0 {
					revs.rev.Add(1) // values of every app become old
				}
				b, err := c.body(ctx, app, "k", true, func(context.Context, int64) ([]byte, error) {
					loads.Add(1)
					return []byte(strings.Repeat(app[len(app)-1:], 64)), nil
				})
				if err != nil {
					errs <- err
					return
				}
				if string(b.data) != strings.Repeat(app[len(app)-1:], 64) {
					errs <- fmt.Errorf("%s answered %q", app, b.data)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := c.stats()
	if st.bytes > c.budget {
		t.Errorf("held %d bytes in %d apps, over the budget of %d", st.bytes, st.apps, c.budget)
	}
	var sum int64
	c.mu.Lock()
	for _, a := range c.apps {
		sum += a.bytes
	}
	c.mu.Unlock()
	if sum != st.bytes {
		t.Errorf("held %d bytes, the apps' own counts sum to %d", st.bytes, sum)
	}
	if st.evictions == 0 || loads.Load() <= apps {
		t.Errorf("%d evictions, %d loads: the test did not evict", st.evictions, loads.Load())
	}
}

// TestManyAppsStayWithinTheBudget serves many apps, ranked by meaning
// with their vectors stored in the content database, from one service
// over a real SQLite store, with a budget of about four apps: the state
// held never passes the budget, the apps used least recently are
// evicted, and an evicted app asked again answers exactly as before,
// ranked by meaning from its stored vectors, embedding only the question.
func TestManyAppsStayWithinTheBudget(t *testing.T) {
	const apps, docs = 24, 20
	var b strings.Builder
	b.WriteString(`{"organizations":[{"id":"org-1","name":"One"}],"apps":[`)
	for i := range apps {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"appId":"app-%d","organizationId":"org-1","name":"App %d"}`, i, i)
	}
	b.WriteString(`],"documents":[`)
	for i := range apps {
		for d := range docs {
			if i+d > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"appId":"app-%d","id":"doc-%d","title":"Parking rule %d of marker%da","uri":"https://%d.example/%d","document":"Visitors park in garage %d on level %d. Only marker%da says so. Bicycles go to rack %d."}`,
				i, d, d, i, i, d, d, i, i, d)
		}
	}
	b.WriteString(`],"faqs":[`)
	for i := range apps {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"appId":"app-%d","id":"parking","name":"Parking","questions":["Where do I park?"],"answer":"In garage 1, says marker%da."}`, i, i)
	}
	b.WriteString(`]}`)
	store, tokens := fixture.Open(t, b.String(), map[string]tenancy.Token{"org": {OrganizationID: "org-1"}})
	srv := embedstandin.New(32)
	client, err := embeddings.New(embeddings.Config{URL: srv.Start(t), Model: "standin"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := NewService(ServiceConfig{API: Config{AppStateBudget: -1, Knowledge: knowledge.Options{
		Embedder:        embeddings.Cached{Cache: embeddings.NewCache(0), Embedder: client},
		ContentEmbedder: embeddings.NewStored(store, client, nil),
	}}}, store, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(svc.Handler())
	t.Cleanup(hs.Close)
	e := &env{t: t, store: store, tokens: tokens, svc: svc, srv: hs}
	search := func(i int) response {
		t.Helper()
		r := e.get(fmt.Sprintf("/cms/search?appId=app-%d&question=where+do+visitors+park", i), "org")
		if r.status != 200 || r.header.Get(RetrievalHeader) != "hybrid" || !strings.Contains(r.body, fmt.Sprintf("marker%da", i)) {
			t.Fatalf("app-%d: %d %s %.200s", i, r.status, r.header.Get(RetrievalHeader), r.body)
		}
		return r
	}
	c := svc.api.cache
	first := search(0)
	one := c.stats().bytes // one app, its vectors built
	budget := 4 * one
	c.mu.Lock()
	c.budget = budget
	c.mu.Unlock()
	for i := 1; i < apps; i++ {
		search(i)
		if st := c.stats(); st.bytes > budget {
			t.Fatalf("after app-%d: %d bytes held in %d apps, over the budget of %d", i, st.bytes, st.apps, budget)
		}
	}
	st := c.stats()
	if st.apps > 4 || st.evictions < apps-4 {
		t.Errorf("%d apps held, %d evicted, of %d served within 4 apps' budget", st.apps, st.evictions, apps)
	}
	m := e.get("/metrics", "").body
	for _, want := range []string{"cms_api_app_state_evictions_total ", "cms_api_app_state_bytes ", fmt.Sprintf("cms_api_app_state_budget_bytes %d", budget)} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	embedded := srv.Inputs()
	again := search(0)
	if again.body != first.body {
		t.Errorf("app-0 after its eviction answered\n%s\nwant\n%s", again.body, first.body)
	}
	if n := srv.Inputs() - embedded; n != 1 {
		t.Errorf("reloading app-0 embedded %d texts; want the question alone (its content's vectors are stored)", n)
	}
}
