package chstore_test

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/go-faster/city"

	"github.com/assistantcms/cms/internal/chfixture"
	"github.com/assistantcms/cms/internal/devclickhouse"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	chschema "github.com/assistantcms/cms/schemas/clickhouse"
)

// openOn opens a store on one server of a cluster.
func openOn(t *testing.T, c *devclickhouse.Cluster, s *devclickhouse.Server, db string) *chstore.Store {
	t.Helper()
	st, err := chstore.Open(context.Background(), chstore.Config{Addrs: []string{s.Addr()}, Database: db, Cluster: c.Name, StringColumns: stringColumns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// tablesOf returns the tables of db on one server, each with its engine.
func tablesOf(t *testing.T, s *chstore.Store, db string) map[string]string {
	t.Helper()
	rows, err := s.Conn().Query(context.Background(), "SELECT name, engine FROM system.tables WHERE database = ?", db)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, engine string
		if err := rows.Scan(&name, &engine); err != nil {
			t.Fatal(err)
		}
		out[name] = engine
	}
	return out
}

func TestClusterMigrateIsIdempotentAndConcurrent(t *testing.T) {
	c := devclickhouse.StartClusterForTest(t)
	ctx := context.Background()
	// Two consumers start at once, each through a server of another
	// shard.
	var wg sync.WaitGroup
	for _, srv := range []*devclickhouse.Server{c.Shards[0][0], c.Shards[1][1]} {
		wg.Go(func() {
			s, err := chstore.Open(ctx, chstore.Config{Addrs: []string{srv.Addr()}, Database: "analytics", Cluster: c.Name})
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close()
			if _, err := s.Migrate(ctx); err != nil {
				t.Errorf("concurrent migrate through %s: %v", srv.Addr(), err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	migs, err := chschema.Render(chschema.FeaturesOf(chschema.Version{Major: 18, Minor: 16}), chschema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"events_local": "ReplicatedReplacingMergeTree", "events": "Distributed", "events_v12_local": "ReplicatedReplacingMergeTree",
		"quarantine_local": "ReplicatedReplacingMergeTree", "quarantine": "Distributed",
		"query_counts_daily_local": "ReplicatedSummingMergeTree", "query_counts_daily": "Distributed", "query_counts_daily_mv13": "MaterializedView",
		"query_counts":       "View",
		"user_queries_local": "ReplicatedReplacingMergeTree", "user_queries": "Distributed", "user_queries_mv13": "MaterializedView",
		"suggestion_blocks_local": "ReplicatedReplacingMergeTree", "suggestion_blocks": "Distributed",
		"schema_migrations": "ReplicatedReplacingMergeTree",
	}
	for _, rollup := range []string{"app_daily", "intent_daily", "unanswered_daily", "sessions", "query_sources"} {
		want[rollup+"_local"], want[rollup] = "ReplicatedAggregatingMergeTree", "Distributed"
		want[rollup+"_mv13"] = "MaterializedView"
	}
	want["gap_daily_local"], want["gap_daily"], want["gap_daily_mv"] = "ReplicatedAggregatingMergeTree", "Distributed", "MaterializedView"
	for i, shard := range c.Shards {
		for j, srv := range shard {
			s := openOn(t, c, srv, "analytics")
			// A consumer on any server finds the migrations applied.
			applied, err := s.Migrate(ctx)
			if err != nil || len(applied) != 0 {
				t.Errorf("%s: migrate again applied %v, err %v; want nothing", devclickhouse.ReplicaName(i, j), applied, err)
			}
			done, err := s.AppliedVersions(ctx)
			if err != nil || len(done) != len(migs) {
				t.Errorf("%s: applied versions %v (err %v), want %d", devclickhouse.ReplicaName(i, j), done, err, len(migs))
			}
			if got := tablesOf(t, s, "analytics"); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: tables %v, want %v", devclickhouse.ReplicaName(i, j), got, want)
			}
			// The later columns are on the local and the Distributed table.
			var n uint64
			if err := s.Conn().QueryRow(ctx, "SELECT count() FROM system.columns WHERE database = 'analytics' "+
				"AND table IN ('events', 'events_local') AND name IN ('tags', 'kb_faqs', 'event_time_source', 'runtime_time', 'token_id', 'client_network')").Scan(&n); err != nil || n != 12 {
				t.Errorf("%s: %d of the 12 added columns (err %v)", devclickhouse.ReplicaName(i, j), n, err)
			}
		}
	}
}

func TestClusterRefusesAnUnknownCluster(t *testing.T) {
	// One server knows no cluster of that name either.
	addr := devclickhouse.StartForTest(t).Addr()
	for _, tc := range []struct{ cluster, want string }{
		{"nosuch", `has no cluster "nosuch" in its remote_servers`},
		{"bad name", `cluster name "bad name"`},
	} {
		if _, err := chstore.Open(context.Background(), chstore.Config{Addrs: []string{addr}, Cluster: tc.cluster}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("open with cluster %q: %v, want an error saying %q", tc.cluster, err, tc.want)
		}
	}
}

// TestClusterAnalystQueries runs every query of docs/analytics.md against
// the Distributed tables of a cluster, with rows written through them, and
// compares the results with one server's.
func TestClusterAnalystQueries(t *testing.T) {
	c := devclickhouse.StartClusterForTest(t)
	cs := openOn(t, c, c.Shards[0][1], "default")
	if _, err := cs.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	cluster := analystQueries(t, cs, func() {
		if err := c.SyncReplicas(context.Background(), "default.events_local", "default.quarantine_local", "default.query_counts_daily_local", "default.query_sources_local"); err != nil {
			t.Fatal(err)
		}
	})
	single := analystQueries(t, migrated(t), func() {})
	if len(cluster) != len(single) {
		t.Fatalf("%d results on the cluster, %d on one server", len(cluster), len(single))
	}
	headings := make([]string, 0, len(single))
	for h := range single {
		headings = append(headings, h)
	}
	sort.Strings(headings)
	for _, h := range headings {
		if !reflect.DeepEqual(cluster[h], single[h]) {
			t.Errorf("%s: cluster %v, one server %v", h, cluster[h], single[h])
		}
	}
	// The rows are spread: each shard holds some of them, its replicas
	// the same ones, each where shardOf says.
	var counts [2]uint64
	for i, shard := range c.Shards {
		for j, srv := range shard {
			s := openOn(t, c, srv, "default")
			ids := chfixture.Query(t, s, "SELECT DISTINCT event_id FROM default.events_local")
			if j == 0 {
				counts[i] = uint64(len(ids))
			} else if uint64(len(ids)) != counts[i] {
				t.Errorf("%s holds %d events, its partner %d", devclickhouse.ReplicaName(i, j), len(ids), counts[i])
			}
			for _, row := range ids {
				if id := row[0]; shardOf(id, len(c.Shards)) != i {
					t.Errorf("event %s is on shard %d, shardOf says %d", id, i, shardOf(id, len(c.Shards)))
				}
			}
		}
	}
	if counts[0] == 0 || counts[1] == 0 || counts[0]+counts[1] != 6 {
		t.Errorf("events per shard %v, want both shards holding some of the 6", counts)
	}
}

// shardOf is the shard (from 0) the Distributed tables send an event ID to
// among n shards of equal weight: ShardingKey, cityHash64(event_id), with
// ClickHouse's CityHash, modulo n.
func shardOf(eventID string, n int) int { return int(city.CH64([]byte(eventID)) % uint64(n)) }
