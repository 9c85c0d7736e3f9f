package analyticsreport

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/assistantcms/cms/pkg/pipeline/chstore"
)

// ErrorCounts counts, for each of apps, the ERROR events the service
// received from since on (by its own clock, received_at: a runtime's
// clock may be off), from events, whose key starts with the app and the
// day. Apps without any are absent.
func ErrorCounts(ctx context.Context, s *chstore.Store, apps []string, since time.Time) (map[string]uint64, error) {
	out := map[string]uint64{}
	if len(apps) == 0 {
		return out, nil
	}
	args := make([]any, 0, len(apps)+2)
	for _, a := range apps {
		args = append(args, a)
	}
	rows, err := s.Conn().Query(s.Context(ctx), errorCountsSQL(s.Table, len(apps)), append(args, since.UTC(), since.UTC())...)
	if err != nil {
		return nil, fmt.Errorf("count ERROR events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var app string
		var n uint64
		if err := rows.Scan(&app, &n); err != nil {
			return nil, fmt.Errorf("count ERROR events: %w", err)
		}
		out[app] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count ERROR events: %w", err)
	}
	return out, nil
}

// errorCountsSQL is ErrorCounts' statement for a number of apps. An
// event's day is its
// runtime's when that was near its receipt, so the day before since is
// read too.
func errorCountsSQL(table func(string) string, apps int) string {
	return `SELECT app_id, uniqExact(event_id) FROM ` + table("events") + `
		WHERE app_id IN (` + strings.TrimSuffix(strings.Repeat("?, ", apps), ", ") + `) AND toDate(event_time) >= toDate(?) - 1 AND received_at >= ? AND type = 'ERROR'
		GROUP BY app_id`
}
