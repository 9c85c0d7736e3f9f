package contentapi

import (
	"context"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/zeebo/xxh3"
)

// RevisionSource tells which revision of an app's content is current.
type RevisionSource interface {
	Revision(ctx context.Context, appID string) (int64, error)
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
type cache struct {
	revs    RevisionSource
	refresh time.Duration
	// grace is how long after the last revision read values cached then
	// are still answered while the revision cannot be read.
	grace time.Duration
	now   func() time.Time

	mu   sync.Mutex
	apps map[string]*appCache
}

type appCache struct {
	mu  sync.Mutex
	rev int64
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

func (c *cache) app(appID string) *appCache {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.apps[appID]
	if !ok {
		a = &appCache{entries: map[string]*entry{}, stale: map[string]*entry{}}
		c.apps[appID] = a
	}
	return a
}

// body returns the response body cached under key for the app's current
// revision, or renders it.
func (c *cache) body(ctx context.Context, appID, key string, render func(ctx context.Context) ([]byte, error)) (*body, error) {
	v, err := c.get(ctx, appID, key, func(ctx context.Context) (any, error) {
		data, err := render(ctx)
		if err != nil {
			return nil, err
		}
		return newBody(data), nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*body), nil
}

// get returns the value cached under key for the app's current revision,
// or loads it. Failed loads are not cached, so that unknown IDs cannot
// grow the cache.
func (c *cache) get(ctx context.Context, appID, key string, load func(ctx context.Context) (any, error)) (any, error) {
	return c.lookup(ctx, appID, key, load, false)
}

// getOrStale is get, except that while a new value loads after the
// revision moved, the last good value is returned: for values that take
// long to build, such as search indexes, where answering from the last
// revision for a moment is better than making every request wait.
func (c *cache) getOrStale(ctx context.Context, appID, key string, load func(ctx context.Context) (any, error)) (any, error) {
	return c.lookup(ctx, appID, key, load, true)
}

func (c *cache) lookup(ctx context.Context, appID, key string, load func(ctx context.Context) (any, error), staleOK bool) (any, error) {
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
			e, ok := a.entries[key]
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
		if e, ok := a.entries[key]; ok && a.known && !a.recheck && now.Sub(a.checked) < c.refresh+c.grace && e.loaded() && e.err == nil {
			cached = e
		}
		a.mu.Unlock()
		if v, done, err := awaitCheck(ctx, wait, cached); done {
			return v, err
		}
		a.mu.Lock()
	}
	e, found := a.entries[key]
	if !found {
		e = &entry{done: make(chan struct{}), staleOK: staleOK}
		a.entries[key] = e
	}
	old := a.stale[key]
	a.mu.Unlock()
	// The load outlives the request that started it: others may be
	// waiting for it.
	lctx := context.WithoutCancel(ctx)
	switch {
	case !found && staleOK && old != nil:
		go c.fill(lctx, a, key, e, load)
		return old.v, nil
	case !found:
		c.fill(lctx, a, key, e, load)
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
	rev, err := c.revs.Revision(ctx, appID)
	cancel()
	a.mu.Lock()
	defer a.mu.Unlock()
	close(a.checking)
	a.checking = nil
	// Stamped after the read: a read that waited out its timeout must not
	// let the next request try again at once.
	now := c.now()
	if err != nil {
		a.failed, a.failure = now, err
		return
	}
	a.failed, a.failure = time.Time{}, nil
	if rev != a.rev || !a.known {
		for k, e := range a.entries {
			if e.staleOK && e.loaded() && e.err == nil {
				a.stale[k] = e
			}
		}
		a.entries = map[string]*entry{}
		a.rev = rev
	}
	a.known, a.checked = true, now
	if a.gen == gen {
		a.recheck = false
	}
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
		apps = []*appCache{c.app(appID)}
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
