package embeddings

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"
)

// DefaultCacheEntries is the bound NewCache uses when given none. At 768
// dimensions an entry holds about 3 KiB, so the default is about 150 MiB.
const DefaultCacheEntries = 50_000

type cacheKey [sha256.Size]byte

type cacheEntry struct {
	key    cacheKey
	tenant *tenant
	vec    []float32
}

// tenant is one app's part of the cache.
type tenant struct {
	name string
	lru  list.List // of *cacheEntry; front is most recently used
}

// Cache keeps vectors by content hash (sha256 of tenant, model and text)
// so that rebuilding an app's index at a new revision embeds only what
// changed.
//
// Each tenant (an app) has its own keys: one app's texts are never
// answered from another's vectors, so the time of an answer does not tell
// whether a text is another app's content or question. It holds at most
// maxEntries vectors; when full it evicts the least recently used vector
// of the tenant that holds the most, so texts still present at each
// rebuild stay while those of deleted or edited content age out, and no
// app can push another below its own share by asking new questions.
// Vectors it returns are shared with the cache and with other callers: do
// not modify them.
//
// Concurrent calls missing the same text may both embed it; the second
// store is harmless.
type Cache struct {
	max int

	mu      sync.Mutex
	entries map[cacheKey]*list.Element // of *cacheEntry, in its tenant's list
	tenants map[string]*tenant
	// inflight are the texts being embedded, which other calls wait for.
	inflight map[cacheKey]*flight
	hits     uint64
	misses   uint64
}

// NewCache returns a cache of at most maxEntries vectors; maxEntries <= 0
// means DefaultCacheEntries.
func NewCache(maxEntries int) *Cache {
	if maxEntries <= 0 {
		maxEntries = DefaultCacheEntries
	}
	return &Cache{max: maxEntries, entries: make(map[cacheKey]*list.Element), tenants: make(map[string]*tenant),
		inflight: make(map[cacheKey]*flight)}
}

func keyOf(tenant, model, text string) cacheKey {
	h := sha256.New()
	// Lengths first, so that no two triples hash the same bytes.
	var n [2 * binary.MaxVarintLen64]byte
	l := binary.PutUvarint(n[:], uint64(len(tenant)))
	l += binary.PutUvarint(n[l:], uint64(len(model)))
	h.Write(n[:l])
	h.Write([]byte(tenant))
	h.Write([]byte(model))
	h.Write([]byte(text))
	var k cacheKey
	h.Sum(k[:0])
	return k
}

// Embed answers from the cache and asks e only for the texts it lacks
// (deduplicated), then stores them. A text another call is already
// embedding is waited for rather than embedded again (when that call
// fails, this one embeds it itself), so overlapping builds of one app's
// index share their work. On an error nothing of this call is stored.
// Safe for concurrent use.
func (c *Cache) Embed(ctx context.Context, e Embedder, texts []string) ([][]float32, error) {
	return c.EmbedFor(ctx, "", e, texts)
}

// EmbedFor is Embed for one tenant (an app), whose vectors are kept
// apart from every other tenant's.
func (c *Cache) EmbedFor(ctx context.Context, tenant string, e Embedder, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	model := e.Model()
	keys := make([]cacheKey, len(texts))
	for i, t := range texts {
		keys[i] = keyOf(tenant, model, t)
	}
	out := make([][]float32, len(texts))
	cl := c.claim(keys, texts, out)
	if len(cl.missing) > 0 {
		if err := c.embedClaimed(ctx, tenant, e, keys, cl, out); err != nil {
			return nil, err
		}
	}
	retry, err := awaitOthers(ctx, cl.others, out)
	if err != nil {
		return nil, err
	}
	if len(retry) > 0 {
		if err := c.embedAgain(ctx, tenant, e, keys, texts, retry, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// claimed is what one call of EmbedFor found missing from the cache.
type claimed struct {
	// missing are the texts this call embeds, once each, with their keys
	// and the flights other calls wait on.
	missing []string
	missKey []cacheKey
	mine    []*flight
	// pending maps a missing key to the positions of missing and out
	// it fills, so duplicates are embedded once.
	pending map[cacheKey]int
	// others are the texts other calls are embedding, by position.
	others map[int]*flight
}

// claim fills out with the vectors the cache holds, and claims the texts
// no call is embedding yet for this one.
func (c *Cache) claim(keys []cacheKey, texts []string, out [][]float32) claimed {
	var cl claimed
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, k := range keys {
		if el, ok := c.entries[k]; ok {
			ent := el.Value.(*cacheEntry)
			ent.tenant.lru.MoveToFront(el)
			out[i] = ent.vec
			continue
		}
		if _, ok := cl.pending[k]; ok {
			continue
		}
		if f, ok := c.inflight[k]; ok {
			if cl.others == nil {
				cl.others = make(map[int]*flight)
			}
			cl.others[i] = f
			continue
		}
		if cl.pending == nil {
			cl.pending = make(map[cacheKey]int)
		}
		f := &flight{done: make(chan struct{})}
		c.inflight[k] = f
		cl.pending[k] = len(cl.missing)
		cl.missing = append(cl.missing, texts[i])
		cl.missKey = append(cl.missKey, k)
		cl.mine = append(cl.mine, f)
	}
	c.hits += uint64(len(texts) - len(cl.missing))
	c.misses += uint64(len(cl.missing))
	return cl
}

// embedClaimed embeds the texts cl claimed, stores them and hands them to
// the calls waiting on them, then fills out with them.
func (c *Cache) embedClaimed(ctx context.Context, tenant string, e Embedder, keys []cacheKey, cl claimed, out [][]float32) error {
	vecs, err := c.embedMissing(ctx, e, cl.missing)
	c.mu.Lock()
	for j, k := range cl.missKey {
		if err == nil {
			c.store(tenant, k, vecs[j])
			cl.mine[j].vec = vecs[j]
		}
		cl.mine[j].err = err
		delete(c.inflight, k)
		close(cl.mine[j].done)
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	for i, k := range keys {
		if j, ok := cl.pending[k]; ok && out[i] == nil {
			out[i] = vecs[j]
		}
	}
	return nil
}

// awaitOthers fills out with the texts other calls embed, and returns the
// positions of those whose call failed.
func awaitOthers(ctx context.Context, others map[int]*flight, out [][]float32) (retry []int, err error) {
	for i, f := range others {
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("embeddings: cache: wait for a text another call embeds: %w", ctx.Err())
		}
		if f.err != nil {
			retry = append(retry, i)
			continue
		}
		out[i] = f.vec
	}
	return retry, nil
}

// embedAgain embeds the texts at retry, whose other call failed, once
// each, and stores them.
func (c *Cache) embedAgain(ctx context.Context, tenant string, e Embedder, keys []cacheKey, texts []string, retry []int, out [][]float32) error {
	var again []string
	at := map[cacheKey]int{}
	for _, i := range retry {
		if _, ok := at[keys[i]]; !ok {
			at[keys[i]] = len(again)
			again = append(again, texts[i])
		}
	}
	vecs, err := c.embedMissing(ctx, e, again)
	if err != nil {
		return err
	}
	c.mu.Lock()
	for _, i := range retry {
		out[i] = vecs[at[keys[i]]]
		c.store(tenant, keys[i], out[i])
	}
	c.mu.Unlock()
	return nil
}

// flight is a text being embedded by one call, which others wait for.
type flight struct {
	done chan struct{}
	vec  []float32
	err  error
}

// embedMissing asks e for texts and checks its answer.
func (c *Cache) embedMissing(ctx context.Context, e Embedder, texts []string) ([][]float32, error) {
	vecs, err := e.Embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	if len(vecs) != len(texts) {
		return nil, fmt.Errorf("embeddings: cache: embedder returned %d vectors for %d texts", len(vecs), len(texts))
	}
	for i, v := range vecs {
		if len(v) == 0 {
			return nil, fmt.Errorf("embeddings: cache: embedder returned an empty vector for text %d", i)
		}
	}
	return vecs, nil
}

// store adds or refreshes an entry of tenant name, evicting beyond the
// bound. c.mu must be held.
func (c *Cache) store(name string, k cacheKey, v []float32) {
	if el, ok := c.entries[k]; ok {
		ent := el.Value.(*cacheEntry)
		ent.vec = v
		ent.tenant.lru.MoveToFront(el)
		return
	}
	t, ok := c.tenants[name]
	if !ok {
		t = &tenant{name: name}
		c.tenants[name] = t
	}
	c.entries[k] = t.lru.PushFront(&cacheEntry{key: k, tenant: t, vec: v})
	for len(c.entries) > c.max {
		c.evict()
	}
}

// evict drops the least recently used vector of the tenant holding the
// most (of several equal ones, any). c.mu must be held.
func (c *Cache) evict() {
	var largest *tenant
	for _, t := range c.tenants {
		if largest == nil || t.lru.Len() > largest.lru.Len() {
			largest = t
		}
	}
	old := largest.lru.Back()
	largest.lru.Remove(old)
	delete(c.entries, old.Value.(*cacheEntry).key)
	if largest.lru.Len() == 0 {
		delete(c.tenants, largest.name)
	}
}

// Forget drops every vector of tenant: the api forgets an app it has
// evicted from memory, whose questions are then embedded afresh.
func (c *Cache) Forget(tenant string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.tenants[tenant]
	if !ok {
		return
	}
	for el := t.lru.Front(); el != nil; el = el.Next() {
		delete(c.entries, el.Value.(*cacheEntry).key)
	}
	delete(c.tenants, tenant)
}

// TenantLen is the number of vectors tenant holds.
func (c *Cache) TenantLen(tenant string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.tenants[tenant]; ok {
		return t.lru.Len()
	}
	return 0
}

// Len is the number of vectors held.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// Stats counts texts answered from the cache (hits, including repeats
// within one call) and texts sent to an embedder (misses).
func (c *Cache) Stats() (hits, misses uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.misses
}

// Cached is an Embedder that answers from Cache and asks Embedder for the
// rest.
type Cached struct {
	Cache    *Cache
	Embedder Embedder
}

// Embed embeds texts through the cache.
func (c Cached) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return c.Cache.Embed(ctx, c.Embedder, texts)
}

// EmbedApp embeds texts through the cache for one app, whose vectors are
// kept apart from every other app's.
func (c Cached) EmbedApp(ctx context.Context, app string, texts []string) ([][]float32, error) {
	return c.Cache.EmbedFor(ctx, app, c.Embedder, texts)
}

// Model is the embedder's model.
func (c Cached) Model() string { return c.Embedder.Model() }

// Forget drops the app's vectors from the cache.
func (c Cached) Forget(app string) { c.Cache.Forget(app) }

// Unwrap is the embedder behind the cache, for what it tells of its model
// (its token counter).
func (c Cached) Unwrap() Embedder { return c.Embedder }
