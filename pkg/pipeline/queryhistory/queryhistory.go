// Package queryhistory reads the queries users asked, as the
// query_sources rollup counts them, for HISTORICAL suggestions: those
// enough distinct users, sessions and sources asked, never text that looks
// like personal data. It also writes and lists the blocks by which
// operators keep a text out of an app's suggestions.
package queryhistory

import (
	"context"
	"fmt"

	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	chschema "github.com/assistantcms/cms/schemas/clickhouse"
)

// QueryCount is how often a normalised raw query was asked.
type QueryCount struct {
	Query string
	Asked uint64
}

// Suggestable says which past queries may be suggested to other users.
type Suggestable struct {
	// MinUsers is how many distinct user IDs, and how many distinct
	// session IDs, must have asked a query. Runtimes choose both, so
	// they bound a query further but cannot make it suggestable alone.
	MinUsers int
	// MinSources is how many distinct sources (an access token and a
	// client network, as the server saw them) must have asked it; 0
	// means MinUsers.
	MinSources int
	// Days is the window, ending today, whose questions count.
	Days int
}

// DefaultMinUsers is the default of Suggestable.MinUsers.
const DefaultMinUsers = 5

// withDefaults fills the fields whose zero means a default.
func (r Suggestable) withDefaults() Suggestable {
	if r.MinSources == 0 {
		r.MinSources = r.MinUsers
	}
	return r
}

// Check reports a rule that cannot hold.
func (r Suggestable) Check() error {
	if r.MinUsers < 1 {
		return fmt.Errorf("suggested queries need at least %d distinct users: want 1 or more", r.MinUsers)
	}
	if r.MinSources < 0 {
		return fmt.Errorf("suggested queries need at least %d distinct sources: want 1 or more (0: as many as users)", r.MinSources)
	}
	if r.Days < 1 {
		return fmt.Errorf("suggested queries over a window of %d days: want 1 or more", r.Days)
	}
	return nil
}

// topQueriesSQL reads the suggestable queries of db; its parameters are
// the app, the channel, the window's days, the app again, the channel
// again, the users and sessions needed, the sources needed and the
// limit. Days after today are never read: event times are the server's
// (see migration 9), and rows dated later came another way. Queries an
// operator blocked, on the channel or on every channel of the app, are
// left out; GLOBAL, so that on a cluster the blocks are read once, through
// their Distributed table.
func topQueriesSQL(db string) string {
	return "SELECT query, countMerge(asked) AS n FROM `" + db + "`.query_sources " +
		"WHERE app_id = ? AND channel = ? AND day > today() - ? AND day <= today() " +
		"AND query GLOBAL NOT IN (SELECT query FROM `" + db + "`.suggestion_blocks WHERE app_id = ? AND channel IN ('', ?) " +
		"GROUP BY channel, query HAVING argMax(blocked, version) = 1) " +
		"GROUP BY query HAVING uniqMerge(users) >= ? AND uniqMerge(sessions) >= ? AND uniqMerge(sources) >= ? " +
		"ORDER BY n DESC, query LIMIT ?"
}

// TopQueries returns the queries of an app's channel that at least
// r.MinUsers distinct users in as many sessions, from r.MinSources
// distinct sources, asked within the last r.Days days, most asked first,
// from query_sources, less those an operator blocked. Queries that look
// like they hold personal data are never written there; they are left
// out here too, in case rows came by another way.
func TopQueries(ctx context.Context, s *chstore.Store, appID, channel string, limit int, r Suggestable) ([]QueryCount, error) {
	if err := r.Check(); err != nil {
		return nil, err
	}
	r = r.withDefaults()
	rows, err := s.Conn().Query(s.Context(ctx), topQueriesSQL(s.Database()), appID, channel, r.Days, appID, channel,
		r.MinUsers, r.MinUsers, r.MinSources, limit)
	if err != nil {
		return nil, fmt.Errorf("read top queries of %s/%s: %w", appID, channel, err)
	}
	defer rows.Close()
	var out []QueryCount
	for rows.Next() {
		var q QueryCount
		if err := rows.Scan(&q.Query, &q.Asked); err != nil {
			return nil, fmt.Errorf("read top queries of %s/%s: %w", appID, channel, err)
		}
		if !chschema.IsPrivate(q.Query) {
			out = append(out, q)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read top queries of %s/%s: %w", appID, channel, err)
	}
	return out, nil
}
