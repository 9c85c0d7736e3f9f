package embeddings

import (
	"container/list"
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
)

// DefaultCacheEntries is the bound NewCache uses when given none. At 768
// dimensions an entry holds about 3 KiB, so the default is about 150 MiB.
const DefaultCacheEntries = 50_000

type cacheKey [sha256.Size]byte

type cacheEntry struct {
	key cacheKey
	vec []float32
}

// Cache keeps vectors by content hash (sha256 of model, NUL, text) so that
// rebuilding an app's index at a new revision embeds only what changed.
//
// It holds at most maxEntries vectors and evicts the least recently used
// when full, so texts still present at each rebuild stay while those of
// deleted or edited content age out. Vectors it returns are shared with the
// cache and with other callers: do not modify them.
//
// Concurrent calls missing the same text may both embed it; the second
// store is harmless.
type Cache struct {
	max int

	mu      sync.Mutex
	entries map[cacheKey]*list.Element // of *cacheEntry
	lru     list.List                  // front is most recently used
	hits    uint64
	misses  uint64
}

// NewCache returns a cache of at most maxEntries vectors; maxEntries <= 0
// means DefaultCacheEntries.
func NewCache(maxEntries int) *Cache {
	if maxEntries <= 0 {
		maxEntries = DefaultCacheEntries
	}
	return &Cache{max: maxEntries, entries: make(map[cacheKey]*list.Element)}
}

func keyOf(model, text string) cacheKey {
	h := sha256.New()
	h.Write([]byte(model))
	h.Write([]byte{0})
	h.Write([]byte(text))
	var k cacheKey
	h.Sum(k[:0])
	return k
}

// Embed answers from the cache and asks e only for the texts it lacks
// (deduplicated), then stores them. On an error nothing is stored. Safe for
// concurrent use.
func (c *Cache) Embed(ctx context.Context, e Embedder, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	model := e.Model()
	keys := make([]cacheKey, len(texts))
	for i, t := range texts {
		keys[i] = keyOf(model, t)
	}

	out := make([][]float32, len(texts))
	var (
		missing []string
		missKey []cacheKey
		// pending maps a missing key to the positions of missing and out
		// it fills, so duplicates are embedded once.
		pending map[cacheKey]int
	)
	c.mu.Lock()
	for i, k := range keys {
		if el, ok := c.entries[k]; ok {
			c.lru.MoveToFront(el)
			out[i] = el.Value.(*cacheEntry).vec
			continue
		}
		if pending == nil {
			pending = make(map[cacheKey]int)
		}
		if _, ok := pending[k]; !ok {
			pending[k] = len(missing)
			missing = append(missing, texts[i])
			missKey = append(missKey, k)
		}
	}
	c.hits += uint64(len(texts) - len(missing))
	c.misses += uint64(len(missing))
	c.mu.Unlock()

	if len(missing) == 0 {
		return out, nil
	}
	vecs, err := e.Embed(ctx, missing)
	if err != nil {
		return nil, err
	}
	if len(vecs) != len(missing) {
		return nil, fmt.Errorf("embeddings: cache: embedder returned %d vectors for %d texts", len(vecs), len(missing))
	}
	for i, v := range vecs {
		if len(v) == 0 {
			return nil, fmt.Errorf("embeddings: cache: embedder returned an empty vector for text %d", i)
		}
	}

	c.mu.Lock()
	for j, k := range missKey {
		c.store(k, vecs[j])
	}
	c.mu.Unlock()
	for i, k := range keys {
		if out[i] == nil {
			out[i] = vecs[pending[k]]
		}
	}
	return out, nil
}

// store adds or refreshes an entry, evicting the least recently used beyond
// the bound. c.mu must be held.
func (c *Cache) store(k cacheKey, v []float32) {
	if el, ok := c.entries[k]; ok {
		el.Value.(*cacheEntry).vec = v
		c.lru.MoveToFront(el)
		return
	}
	c.entries[k] = c.lru.PushFront(&cacheEntry{key: k, vec: v})
	for c.lru.Len() > c.max {
		old := c.lru.Back()
		c.lru.Remove(old)
		delete(c.entries, old.Value.(*cacheEntry).key)
	}
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

// Model is the embedder's model.
func (c Cached) Model() string { return c.Embedder.Model() }
