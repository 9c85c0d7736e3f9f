package contentapi

import (
	"container/list"
	"context"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zeebo/xxh3"
)

// RevisionSource tells which revision of an app's content is current, and
// which version of it is live (zero: the app does not publish, and its
// records are what runtimes read). Publishing and rolling back move the
// revision, so a live version is never newer than the revision read with
// it.
type RevisionSource interface {
	Live(ctx context.Context, appID string) (revision, live int64, err error)
}

// body is a rendered response with its entity tag.
type body struct {
	data []byte
	etag string
}

func newBody(data []byte) *body {
	h := xxh3.Hash128(data).Bytes()
	return &body{data: data, etag: `"` + hex.EncodeToString(h[:10]) + `"`}
}

// cache keeps rendered responses per app until the app's revision moves.
// The revision is read at most once per refresh interval per app, so a
// change made by another process shows within that interval; Invalidate
// makes a change made through this process show at once.
//
// A value is loaded once however many requests want it, and loading one
// key does not hold up requests for the app's other keys.
//
// What it holds of all apps together is kept within a budget of bytes:
// each app's values are counted as they are built (see sizeOf), and past
// the budget the apps used least recently are evicted whole, to be
// loaded again by their next request. Without it a replica would keep
// every app it ever served, its memory growing with the number of
// tenants rather than with its traffic.
type cache struct {
	revs    RevisionSource
	refresh time.Duration
	// grace is how long after the last revision read values cached then
	// are still answered while the revision cannot be read.
	grace time.Duration
	now   func() time.Time

	// budget bounds the bytes held; 0 holds every app.
	budget int64
	// evicted, when set, is told the apps evicted, so that what is kept
	// of them elsewhere goes too. It is called without locks held.
	evicted func(appIDs []string)

	mu   sync.Mutex
	apps map[string]*appCache
	// lru orders apps by last use, most recent first; held is the sum of
	// their bytes, evictions counts apps evicted.
	lru       list.List // of *appCache
	held      int64
	evictions uint64
}

type appCache struct {
	id string
	// el is the app's place in the cache's lru and bytes what it was
	// last counted to hold; both are guarded by the cache's mu, and el is
	// nil once the app is evicted.
	el    *list.Element
	bytes int64
	// loads counts values being loaded: an app whose load is under way
	// is not evicted, or that work would be lost.
	loads atomic.Int32

	mu  sync.Mutex
	rev int64
	// live is the app's live version at rev, zero when it does not
	// publish.
	live int64
	// known says rev has been read; checked is when it last was, and
	// recheck asks for a read at the next lookup whatever the interval.
	known   bool
	checked time.Time
	recheck bool
	// gen counts invalidations; checking is closed when the revision read
	// under way, if any, ends.
	gen      uint64
	checking chan struct{}
	// failed and failure are the last failed revision read: it is not
	// tried again within the refresh interval, so that an unreachable
	// store does not cost every request its timeout.
	failed  time.Time
	failure error
	entries map[string]*entry
	// stale holds the last good values, from earlier revisions, of keys
	// that may be answered while their new value loads.
	stale map[string]*entry
}

// entry is a value being loaded or loaded; v and err are set before done
// is closed.
type entry struct {
	done    chan struct{}
	v       any
	err     error
	staleOK bool
	// counted is the size of v the app was last counted with; a value
	// that grows after it is loaded (a base whose vectors came later) is
	// counted again at its next use.
	counted atomic.Int64
}

func (e *entry) loaded() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// revisionTimeout bounds one read of an app's revision.
const revisionTimeout = 2 * time.Second

func newCache(revs RevisionSource, refresh, grace time.Duration) *cache {
	return &cache{revs: revs, refresh: refresh, grace: grace, now: time.Now, apps: map[string]*appCache{}}
}

// Estimates of what the cache spends beyond its values: an app's
// bookkeeping (its maps, list element and revision state) and an entry's.
const (
	appOverhead   = 512
	entryOverhead = 160
)

// sizer is a value that tells its size, which may grow after it is built.
type sizer interface{ Bytes() int64 }

// sizeOf estimates the memory a cached value holds.
func sizeOf(v any) int64 {
	switch v := v.(type) {
	case *body:
		return int64(len(v.data)+len(v.etag)) + 48
	case sizer:
		return v.Bytes()
	}
	return 0
}

// app returns the app's cache, made when absent, as the most recently
// used.
func (c *cache) app(appID string) *appCache {
	c.mu.Lock()
	a, ok := c.apps[appID]
	if ok {
		c.lru.MoveToFront(a.el)
		c.mu.Unlock()
		return a
	}
	a = &appCache{id: appID, entries: map[string]*entry{}, stale: map[string]*entry{}, bytes: appOverhead}
	c.apps[appID] = a
	a.el = c.lru.PushFront(a)
	c.held += appOverhead
	gone := c.shrinkLocked()
	c.mu.Unlock()
	c.forget(gone)
	return a
}

// account counts what the app holds now, then evicts past the budget.
// Neither lock may be held by the caller.
func (c *cache) account(a *appCache) {
	c.mu.Lock()
	a.mu.Lock()
	n := int64(appOverhead)
	for _, m := range []map[string]*entry{a.entries, a.stale} {
		for k, e := range m {
			if e.loaded() && e.err == nil {
				size := sizeOf(e.v)
				e.counted.Store(size)
				n += size + int64(len(k)) + entryOverhead
			}
		}
	}
	a.mu.Unlock()
	if a.el != nil { // an evicted app's values go with their last request
		c.held += n - a.bytes
		a.bytes = n
	}
	gone := c.shrinkLocked()
	c.mu.Unlock()
	c.forget(gone)
}

// shrinkLocked evicts the least recently used apps until the budget
// holds, and returns their IDs. The most recently used app is kept
// whatever it holds (it is being answered), and so are apps whose values
// are being loaded. c.mu is held.
func (c *cache) shrinkLocked() []string {
	var gone []string
	for c.budget > 0 && c.held > c.budget {
		var victim *appCache
		for el := c.lru.Back(); el != nil && el != c.lru.Front(); el = el.Prev() {
			if a := el.Value.(*appCache); a.loads.Load() == 0 {
				victim = a
				break
			}
		}
		if victim == nil {
			break
		}
		c.lru.Remove(victim.el)
		delete(c.apps, victim.id)
		c.held -= victim.bytes
		victim.el, victim.bytes = nil, 0
		c.evictions++
		gone = append(gone, victim.id)
		// Requests under way keep the values they hold; dropping the maps
		// lets the memory go as soon as they are answered. A request that
		// still looks here loads afresh, into this orphan, uncounted: its
		// values go with it.
		victim.mu.Lock()
		victim.entries, victim.stale = map[string]*entry{}, map[string]*entry{}
		victim.mu.Unlock()
	}
	return gone
}

func (c *cache) forget(gone []string) {
	if len(gone) > 0 && c.evicted != nil {
		c.evicted(gone)
	}
}

// cacheStats is what the cache holds.
type cacheStats struct {
	apps          int
	bytes, budget int64
	evictions     uint64
}

func (c *cache) stats() cacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cacheStats{apps: len(c.apps), bytes: c.held, budget: c.budget, evictions: c.evictions}
}

// Loaders are given the version of the app's content they render: the
// live one, or zero for the draft (requested, or the app does not
// publish). What is cached of the two is kept apart.

// body returns the response body cached under key for the app's current
// revision, or renders it; draft asks for the draft.
func (c *cache) body(ctx context.Context, appID, key string, draft bool, render func(ctx context.Context, live int64) ([]byte, error)) (*body, error) {
	return c.rendered(ctx, appID, key, draft, func(ctx context.Context, live int64) (*body, error) {
		data, err := render(ctx, live)
		if err != nil {
			return nil, err
		}
		return newBody(data), nil
	})
}

// recordBody is body for one record, whose entity tag is its revision: a
// client that read it can tell which state it read, as GraphQL's
// revision field tells.
func (c *cache) recordBody(ctx context.Context, appID, key string, draft bool, render func(ctx context.Context, live int64) ([]byte, int64, error)) (*body, error) {
	return c.rendered(ctx, appID, key, draft, func(ctx context.Context, live int64) (*body, error) {
		data, rev, err := render(ctx, live)
		if err != nil {
			return nil, err
		}
		return &body{data: data, etag: `"r` + strconv.FormatInt(rev, 10) + `"`}, nil
	})
}

func (c *cache) rendered(ctx context.Context, appID, key string, draft bool, render func(ctx context.Context, live int64) (*body, error)) (*body, error) {
	v, err := c.get(ctx, appID, key, draft, func(ctx context.Context, live int64) (any, error) { return render(ctx, live) })
	if err != nil {
		return nil, err
	}
	return v.(*body), nil
}

// get returns the value cached under key for the app's current revision,
// or loads it. Failed loads are not cached, so that unknown IDs cannot
// grow the cache.
func (c *cache) get(ctx context.Context, appID, key string, draft bool, load func(ctx context.Context, live int64) (any, error)) (any, error) {
	return c.lookup(ctx, appID, key, draft, load, false)
}

// getOrStale is get, except that while a new value loads after the
// revision moved, the last good value is returned: for values that take
// long to build, such as search indexes, where answering from the last
// revision for a moment is better than making every request wait.
func (c *cache) getOrStale(ctx context.Context, appID, key string, draft bool, load func(ctx context.Context, live int64) (any, error)) (any, error) {
	return c.lookup(ctx, appID, key, draft, load, true)
}

// version is the version a request for draft or not reads of a, and the
// key its value of key is filed under; a.mu is held.
func (a *appCache) version(key string, draft bool) (live int64, filed string) {
	if draft || a.live == 0 {
		return 0, key
	}
	return a.live, liveKey + key
}

// liveKey begins the keys of the live version's values.
const liveKey = "live/"

func (c *cache) lookup(ctx context.Context, appID, key string, draft bool, load func(ctx context.Context, live int64) (any, error), staleOK bool) (any, error) {
	a := c.app(appID)
	a.mu.Lock()
	// The revision is read before anything is loaded, so what is cached is
	// never older than the revision it is filed under.
	for waited := false; ; waited = true {
		now := c.now()
		if a.known && !a.recheck && (now.Sub(a.checked) < c.refresh || waited && a.failure == nil) {
			break
		}
		// A failed read is not tried again within the refresh interval, so
		// that an unreachable store does not cost every request its
		// timeout; nor again by a request that has just waited for one.
		failedLately := !a.failed.IsZero() && (waited || now.Sub(a.failed) < c.refresh)
		if a.checking == nil && !failedLately {
			a.checking = make(chan struct{})
			go c.check(a, appID, a.gen)
		}
		if a.checking == nil {
			// The store cannot be reached. A value cached at the last
			// revision read is still answered for a while: it is at most
			// that much older than the outage, and failing every read
			// of a short outage helps nobody. Anything not cached fails.
			_, filed := a.version(key, draft)
			e, ok := a.entries[filed]
			fresh := a.known && now.Sub(a.checked) < c.refresh+c.grace
			err := a.failure
			a.mu.Unlock()
			if ok && fresh && e.loaded() && e.err == nil {
				return e.v, nil
			}
			return nil, err
		}
		// A read is under way. A value cached at the current revision is
		// answered if the read takes longer than checkWait: a slow or
		// locked database must not hold every request for the read's
		// whole timeout. Invalidated or unknown revisions are waited for.
		wait := a.checking
		var cached *entry
		_, filed := a.version(key, draft)
		if e, ok := a.entries[filed]; ok && a.known && !a.recheck && now.Sub(a.checked) < c.refresh+c.grace && e.loaded() && e.err == nil {
			cached = e
		}
		a.mu.Unlock()
		if v, done, err := awaitCheck(ctx, wait, cached); done {
			return v, err
		}
		a.mu.Lock()
	}
	live, key := a.version(key, draft)
	e, found := a.entries[key]
	if !found {
		e = &entry{done: make(chan struct{}), staleOK: staleOK}
		a.entries[key] = e
		a.loads.Add(1)
	}
	recount := found && e.loaded() && e.err == nil && sizeOf(e.v) != e.counted.Load()
	old := a.stale[key]
	a.mu.Unlock()
	if recount {
		c.account(a)
	}
	// The load outlives the request that started it: others may be
	// waiting for it.
	lctx := context.WithoutCancel(ctx)
	fill := func(ctx context.Context) (any, error) { return load(ctx, live) }
	switch {
	case !found && staleOK && old != nil:
		go c.fill(lctx, a, key, e, fill)
		return old.v, nil
	case !found:
		c.fill(lctx, a, key, e, fill)
	case staleOK && old != nil && !e.loaded():
		return old.v, nil
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if e.err != nil && staleOK && old != nil {
		return old.v, nil // the new value failed; the last good one stands
	}
	return e.v, e.err
}

// checkWait is how long a request that could be answered from the cache
// waits for a revision read under way; a healthy database answers well
// within it.
const checkWait = 100 * time.Millisecond

// awaitCheck waits for the revision read that closes check. With a cached
// entry it gives up after checkWait and answers the entry (done true);
// done is also true when ctx ends first.
func awaitCheck(ctx context.Context, check <-chan struct{}, cached *entry) (v any, done bool, err error) {
	var patience <-chan time.Time
	if cached != nil {
		t := time.NewTimer(checkWait)
		defer t.Stop()
		patience = t.C
	}
	select {
	case <-check:
		return nil, false, nil
	case <-patience:
		return cached.v, true, nil
	case <-ctx.Done():
		return nil, true, ctx.Err()
	}
}

// check reads the app's revision, on its own and bounded, since requests
// may stop waiting for it. gen is the app's invalidation count when the
// read began: an invalidation during the read asks for another.
func (c *cache) check(a *appCache, appID string, gen uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), revisionTimeout)
	rev, live, err := c.revs.Live(ctx, appID)
	cancel()
	if c.checked(a, rev, live, err, gen) {
		c.account(a) // values of the old revision went
	}
}

// checked records a revision read; it reports whether values were
// dropped.
func (c *cache) checked(a *appCache, rev, live int64, err error, gen uint64) (dropped bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	close(a.checking)
	a.checking = nil
	// Stamped after the read: a read that waited out its timeout must not
	// let the next request try again at once.
	now := c.now()
	if err != nil {
		a.failed, a.failure = now, err
		return false
	}
	a.failed, a.failure = time.Time{}, nil
	if rev != a.rev || !a.known {
		// The live version's values stand while it stays live: an
		// author's change to the draft moves the revision, and must not
		// cost the runtimes their search index. Publishing turned on or
		// off changes which values a request reads: the last values of
		// the other view are no use then.
		sameLive := a.known && live > 0 && live == a.live
		if a.known && (a.live == 0) != (live == 0) {
			a.stale = map[string]*entry{}
		}
		kept := map[string]*entry{}
		for k, e := range a.entries {
			switch {
			case sameLive && strings.HasPrefix(k, liveKey):
				kept[k] = e
			case e.staleOK && e.loaded() && e.err == nil:
				a.stale[k] = e
			}
		}
		dropped = len(a.entries) > len(kept)
		a.entries = kept
		a.rev, a.live = rev, live
	}
	a.known, a.checked = true, now
	if a.gen == gen {
		a.recheck = false
	}
	return dropped
}

// fill loads e's value. A load that panics fails its waiters rather than
// leaving them waiting.
func (c *cache) fill(ctx context.Context, a *appCache, key string, e *entry, load func(ctx context.Context) (any, error)) {
	var v any
	err := errors.New("loading the value panicked")
	defer func() {
		a.mu.Lock()
		e.v, e.err = v, err
		if a.entries[key] == e {
			if err != nil {
				delete(a.entries, key)
			} else {
				delete(a.stale, key)
			}
		}
		a.mu.Unlock()
		close(e.done)
		a.loads.Add(-1)
		c.account(a)
	}()
	v, err = load(ctx)
}

// Invalidate makes the next read of the app check its revision; an empty
// ID does so for every app, for when changes may have been missed.
func (c *cache) Invalidate(appID string) {
	var apps []*appCache
	if appID == "" {
		c.mu.Lock()
		for _, a := range c.apps {
			apps = append(apps, a)
		}
		c.mu.Unlock()
	} else {
		// An app not held has nothing to check again: its next request
		// reads its revision anyway. Making one here would let changes
		// to apps this replica never serves fill its memory.
		c.mu.Lock()
		if a, ok := c.apps[appID]; ok {
			apps = []*appCache{a}
		}
		c.mu.Unlock()
	}
	for _, a := range apps {
		a.mu.Lock()
		// What is cached stays unless the revision has moved, so a
		// spurious invalidation costs one read, not rebuilt indexes.
		a.recheck, a.failed = true, time.Time{}
		a.gen++
		a.mu.Unlock()
	}
}
