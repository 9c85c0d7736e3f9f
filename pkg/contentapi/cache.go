package contentapi

import (
	"context"
	"encoding/hex"
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
type cache struct {
	revs    RevisionSource
	refresh time.Duration
	now     func() time.Time

	mu   sync.Mutex
	apps map[string]*appCache
}

type appCache struct {
	mu      sync.Mutex
	rev     int64
	checked time.Time
	values  map[string]any
}

func newCache(revs RevisionSource, refresh time.Duration) *cache {
	return &cache{revs: revs, refresh: refresh, now: time.Now, apps: map[string]*appCache{}}
}

func (c *cache) app(appID string) *appCache {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.apps[appID]
	if !ok {
		a = &appCache{values: map[string]any{}}
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
// or builds it with load. Failed loads are not cached, so that unknown
// IDs cannot grow the cache.
func (c *cache) get(ctx context.Context, appID, key string, load func(ctx context.Context) (any, error)) (any, error) {
	a := c.app(appID)
	a.mu.Lock()
	defer a.mu.Unlock()
	if now := c.now(); a.checked.IsZero() || now.Sub(a.checked) >= c.refresh {
		// The revision is read before anything is loaded, so what is
		// cached is never older than the revision it is filed under.
		rev, err := c.revs.Revision(ctx, appID)
		if err != nil {
			return nil, err
		}
		if rev != a.rev || a.checked.IsZero() {
			clear(a.values)
			a.rev = rev
		}
		a.checked = now
	}
	if v, ok := a.values[key]; ok {
		return v, nil
	}
	v, err := load(ctx)
	if err != nil {
		return nil, err
	}
	a.values[key] = v
	return v, nil
}

// Invalidate makes the next read of the app check its revision.
func (c *cache) Invalidate(appID string) {
	a := c.app(appID)
	a.mu.Lock()
	a.checked = time.Time{}
	a.mu.Unlock()
}
