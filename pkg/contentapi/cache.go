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
	bodies  map[string]*body
}

func newCache(revs RevisionSource, refresh time.Duration) *cache {
	return &cache{revs: revs, refresh: refresh, now: time.Now, apps: map[string]*appCache{}}
}

func (c *cache) app(appID string) *appCache {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.apps[appID]
	if !ok {
		a = &appCache{bodies: map[string]*body{}}
		c.apps[appID] = a
	}
	return a
}

// get returns the body cached under key for the app's current revision,
// or renders it with load. Failed loads are not cached, so that unknown
// IDs cannot grow the cache.
func (c *cache) get(ctx context.Context, appID, key string, load func(ctx context.Context) ([]byte, error)) (*body, error) {
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
			clear(a.bodies)
			a.rev = rev
		}
		a.checked = now
	}
	if b, ok := a.bodies[key]; ok {
		return b, nil
	}
	data, err := load(ctx)
	if err != nil {
		return nil, err
	}
	b := newBody(data)
	a.bodies[key] = b
	return b, nil
}

// Invalidate makes the next read of the app check its revision.
func (c *cache) Invalidate(appID string) {
	a := c.app(appID)
	a.mu.Lock()
	a.checked = time.Time{}
	a.mu.Unlock()
}
