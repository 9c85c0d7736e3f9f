package analyticspage

import (
	"context"
	"sync"
	"time"

	"github.com/assistantcms/cms/pkg/pipeline/chstore"
)

// ClickHouse is a Source that connects on first use and again after a
// failure, so that the api starts and serves while ClickHouse is down and
// the page recovers once it is back.
type ClickHouse struct {
	cfg   chstore.Config
	mu    sync.Mutex
	store *chstore.Store
}

// NewClickHouse returns a Source reading the rollups of the database in
// cfg.
func NewClickHouse(cfg chstore.Config) *ClickHouse { return &ClickHouse{cfg: cfg} }

// Report implements Source.
func (c *ClickHouse) Report(ctx context.Context, appID string, from, to time.Time) (chstore.Report, error) {
	s, err := c.open(ctx)
	if err != nil {
		return chstore.Report{}, err
	}
	r, err := s.Report(ctx, appID, from, to)
	if err != nil && ctx.Err() == nil {
		c.drop(s)
	}
	return r, err
}

// ReportApps implements Source.
func (c *ClickHouse) ReportApps(ctx context.Context, from, to time.Time, limit int) ([]string, error) {
	s, err := c.open(ctx)
	if err != nil {
		return nil, err
	}
	apps, err := s.ReportApps(ctx, from, to, limit)
	if err != nil && ctx.Err() == nil {
		c.drop(s)
	}
	return apps, err
}

// open returns the connection, making it first if there is none.
func (c *ClickHouse) open(ctx context.Context) (*chstore.Store, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.store == nil {
		s, err := chstore.Open(ctx, c.cfg)
		if err != nil {
			return nil, err
		}
		c.store = s
	}
	return c.store, nil
}

// drop closes s after a failure that was not the caller's giving up,
// unless another request has already
// replaced it, so that the next request connects afresh.
func (c *ClickHouse) drop(s *chstore.Store) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.store == s {
		c.store = nil
		_ = s.Close()
	}
}

// Close releases the connection.
func (c *ClickHouse) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.store == nil {
		return nil
	}
	err := c.store.Close()
	c.store = nil
	return err
}
