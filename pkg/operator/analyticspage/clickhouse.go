package analyticspage

import (
	"context"
	"time"

	"github.com/assistantcms/cms/pkg/pipeline/chstore"
)

// ClickHouse is a Source that connects on first use and again after a
// failure, so that the api starts and serves while ClickHouse is down and
// the page recovers once it is back.
type ClickHouse struct{ conn *chstore.Lazy }

// NewClickHouse returns a Source reading the rollups of the database in
// cfg.
func NewClickHouse(cfg chstore.Config) *ClickHouse { return &ClickHouse{conn: chstore.NewLazy(cfg)} }

// Report implements Source.
func (c *ClickHouse) Report(ctx context.Context, appID string, from, to time.Time) (r chstore.Report, err error) {
	err = c.conn.Do(ctx, func(s *chstore.Store) error {
		r, err = s.Report(ctx, appID, from, to)
		return err
	})
	return r, err
}

// ReportApps implements Source.
func (c *ClickHouse) ReportApps(ctx context.Context, from, to time.Time, limit int) (apps []string, err error) {
	err = c.conn.Do(ctx, func(s *chstore.Store) error {
		apps, err = s.ReportApps(ctx, from, to, limit)
		return err
	})
	return apps, err
}

// Close releases the connection.
func (c *ClickHouse) Close() error { return c.conn.Close() }
