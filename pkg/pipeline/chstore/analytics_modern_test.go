package chstore_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/chfixture"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	chschema "github.com/assistantcms/cms/schemas/clickhouse"
)

// TestAnalystQueriesOnModernClickHouse runs every query of
// docs/analytics.md on a ClickHouse 26 engine (chDB), over the schema
// rendered for it and the rows of TestAnalystQueries exported by the
// consumer's own column mapping, and checks that it answers exactly what
// the 18.16 server answers for the same rows: on the single-server schema,
// and through the Distributed tables of the cluster layout.
func TestAnalystQueriesOnModernClickHouse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, batches, quarantine := chfixture.AnalystRows()

	old := migrated(t)
	for _, b := range batches {
		if err := old.InsertEvents(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.InsertQuarantine(ctx, quarantine); err != nil {
		t.Fatal(err)
	}
	for _, o := range []chschema.Options{
		{Database: "default"},
		// A cluster of one local shard: the engine has no ZooKeeper.
		{Database: "default", Cluster: "cms", Unreplicated: true},
	} {
		name := "single server"
		if o.Cluster != "" {
			name = "cluster"
		}
		t.Run(name, func(t *testing.T) { modernAnalystQueries(ctx, t, old, o, batches, quarantine) })
	}
}

func modernAnalystQueries(ctx context.Context, t *testing.T, old *chstore.Store, o chschema.Options, batches []*chstore.EventBatch, quarantine []chstore.QuarantineRow) {
	modern := chfixture.ModernMigrated(ctx, t, o)
	if o.Cluster != "" {
		// As analysts' profiles set it on a cluster, for the IN
		// subqueries over Distributed tables (see docs/analytics.md).
		if err := modern.Exec(ctx, "SET distributed_product_mode = 'local'"); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range batches {
		chfixture.InsertModern(ctx, t, modern, "default", b, nil)
	}
	chfixture.InsertModern(ctx, t, modern, "default", nil, quarantine)

	queries := docQueries(t)
	if len(queries) == 0 {
		t.Fatal("no queries in docs/analytics.md")
	}
	for heading, sql := range queries {
		t.Run(heading, func(t *testing.T) {
			names, want := chfixture.QueryColumns(t, old, sql)
			if len(want) == 0 {
				// An empty answer on both would compare nothing.
				t.Fatalf("18.16 returned no rows")
			}
			res, err := modern.Query(ctx, sql)
			if err != nil {
				t.Fatalf("%v\n%s", err, sql)
			}
			gotNames := make([]string, len(res.Columns))
			for i, c := range res.Columns {
				gotNames[i] = c.Name
			}
			if !slices.Equal(gotNames, names) {
				t.Errorf("columns %v, 18.16 gives %v", gotNames, names)
			}
			got := chfixture.ModernRows(t, res)
			if !slices.EqualFunc(got, want, slices.Equal) {
				t.Errorf("ClickHouse 26 answers\n%q\n18.16 answers\n%q", got, want)
			}
		})
	}
}

// TestLookupsUseSkipIndexes checks, from the plan ClickHouse 26 makes,
// that the documented transcript and history queries are served by the
// bloom-filter indexes on session_id and user_id: of a day of an app's
// events, they read only the granules that hold the session or the user.
func TestLookupsUseSkipIndexes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	modern := chfixture.ModernMigrated(ctx, t, chschema.Options{Database: "default"})
	// 200,000 events of today in 4,000 sessions of 50 events each, in
	// event-ID order so that each session's rows lie together, as a
	// session's do within a day's part once sorted.
	if err := modern.Exec(ctx, "INSERT INTO default.events (event_id, app_id, event_time, received_at, type, name, session_id, user_id) "+
		"SELECT leftPad(toString(number), 10, '0'), 'demo-app', now64(3), now64(3), 'REQUEST', 'INTENT_REQUEST', "+
		"concat('session-', toString(intDiv(number, 50))), concat('user-', toString(intDiv(number, 50))) FROM numbers(200000)"); err != nil {
		t.Fatal(err)
	}
	queries := docQueries(t)
	for _, tc := range []struct{ heading, index, example, value string }{
		{"A session's transcript", "session_idx", "'session-1'", "'session-1234'"},
		{"A user's history", "user_idx", "'u1'", "'user-1234'"},
	} {
		t.Run(tc.heading, func(t *testing.T) {
			sql := strings.Replace(queries[tc.heading], tc.example, tc.value, 1)
			if sql == queries[tc.heading] {
				t.Fatalf("the query names no %s any more:\n%s", tc.example, sql)
			}
			res, err := modern.Query(ctx, "EXPLAIN indexes = 1 "+sql)
			if err != nil {
				t.Fatalf("%v\n%s", err, sql)
			}
			var plan strings.Builder
			for _, row := range res.Rows {
				fmt.Fprintln(&plan, row...)
			}
			// The index's step names it and says how many granules it
			// kept of those the primary key left.
			step := regexp.MustCompile(`(?s)Name: ` + tc.index + `\b.*?Granules: (\d+)/(\d+)`).FindStringSubmatch(plan.String())
			if step == nil {
				t.Fatalf("the plan does not use %s:\n%s", tc.index, plan.String())
			}
			kept, of := atoiOrZero(step[1]), atoiOrZero(step[2])
			t.Logf("%s kept %d of %d granules", tc.index, kept, of)
			if of < 10 || kept == 0 || kept*5 > of {
				t.Errorf("%s kept %d of %d granules; want a small part:\n%s", tc.index, kept, of, plan.String())
			}
			res, err = modern.Query(ctx, sql)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Rows) != 50 {
				t.Errorf("%d events, want the 50 of %s", len(res.Rows), tc.value)
			}
		})
	}
}

func atoiOrZero(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
