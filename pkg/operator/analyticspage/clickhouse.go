package analyticspage

import (
	"context"
	"time"

	"github.com/assistantcms/cms/pkg/pipeline/analyticsreport"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
)

// ClickHouse is a Source that connects on first use and again after a
// failure, so that the api starts and serves while ClickHouse is down and
// the page recovers once it is back.
type ClickHouse struct{ conn *chstore.Reconnecting }

// NewClickHouse returns a Source reading the rollups of the database in
// cfg.
func NewClickHouse(cfg chstore.Config) *ClickHouse {
	return &ClickHouse{conn: chstore.NewReconnecting(cfg)}
}

// Report implements Source.
func (c *ClickHouse) Report(ctx context.Context, appID string, from, to time.Time) (r analyticsreport.Report, err error) {
	err = c.conn.Do(ctx, func(s *chstore.Store) error {
		r, err = analyticsreport.Read(ctx, s, appID, from, to)
		return err
	})
	return r, err
}

// ReportApps implements Source.
func (c *ClickHouse) ReportApps(ctx context.Context, from, to time.Time, limit int) (apps []string, err error) {
	err = c.conn.Do(ctx, func(s *chstore.Store) error {
		apps, err = analyticsreport.Apps(ctx, s, from, to, limit)
		return err
	})
	return apps, err
}

// Gaps reads an app's unanswered wordings (see analyticsreport.Gaps):
// the gap inbox's Source.
func (c *ClickHouse) Gaps(ctx context.Context, q analyticsreport.GapQuery) (w []analyticsreport.GapWording, err error) {
	err = c.conn.Do(ctx, func(s *chstore.Store) error {
		w, err = analyticsreport.Gaps(ctx, s, q)
		return err
	})
	return w, err
}

// ErrorCounts counts the ERROR events each app's runtimes sent since a
// time (analyticsreport.ErrorCounts), for the errors.rate webhooks.
func (c *ClickHouse) ErrorCounts(ctx context.Context, apps []string, since time.Time) (out map[string]uint64, err error) {
	err = c.conn.Do(ctx, func(s *chstore.Store) error {
		out, err = analyticsreport.ErrorCounts(ctx, s, apps, since)
		return err
	})
	return out, err
}

// Close releases the connection.
func (c *ClickHouse) Close() error { return c.conn.Close() }
