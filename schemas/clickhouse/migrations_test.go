package clickhouse

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/AfterShip/clickhouse-sql-parser/parser"
)

// mutation matches ALTER TABLE ... DELETE, which the parser does not
// know; the engines run those statements (TestModernDDLRunsOnCurrentClickHouse
// and the migrations on the 18.16 server in pkg/pipeline/chstore).
var mutation = regexp.MustCompile(`^ALTER TABLE \S+( ON CLUSTER \S+)? DELETE WHERE `)

// parse parses each statement of sql as the migration runner splits it,
// mutations aside.
func parse(sql string) error {
	var errs []error
	for _, st := range statements(sql) {
		if mutation.MatchString(st) {
			continue
		}
		if _, err := parser.NewParser(st).ParseStmts(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func TestFeaturesOf(t *testing.T) {
	cases := []struct {
		version string
		want    Features
	}{
		{"18.16.1", Features{LowCardinalitySetting: true}},
		{"19.9.2.4", Features{}},
		{"20.1.1", Features{DateTime64: true, Codecs: true, TTL: true, AddColumnIfNotExists: true, SkipIndexes: true}},
		{"23.8.16.40", Features{DateTime64: true, Codecs: true, TTL: true, AddColumnIfNotExists: true, SkipIndexes: true}},
	}
	for _, tc := range cases {
		v, err := ParseVersion(tc.version)
		if err != nil {
			t.Fatal(err)
		}
		if got := FeaturesOf(v); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.version, got, tc.want)
		}
	}
	for _, bad := range []string{"", "23", "x.y"} {
		if _, err := ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q) accepted", bad)
		}
	}
}

// TestModernDDLParses checks the statements rendered for current ClickHouse
// with a ClickHouse SQL parser; TestModernDDLRunsOnCurrentClickHouse runs
// them, since a parser accepts statements a server refuses.
func TestModernDDLParses(t *testing.T) {
	v, _ := ParseVersion("23.8.1")
	migs, err := Render(FeaturesOf(v), Options{Database: "analytics", RetentionDays: 400})
	if err != nil {
		t.Fatal(err)
	}
	if len(migs) == 0 {
		t.Fatal("no migrations")
	}
	all := ""
	for _, m := range migs {
		if err := parse(m.SQL); err != nil {
			t.Errorf("migration %d (%s) does not parse: %v\n%s", m.Version, m.Name, err, m.SQL)
		}
		all += m.SQL + "\n"
	}
	for _, want := range []string{"DateTime64(3, 'UTC')", "CODEC(ZSTD(3))", "TTL toDateTime(event_time) + INTERVAL 400 DAY",
		"TTL toDateTime(received_at) + INTERVAL 400 DAY", "`analytics`.events", "ADD COLUMN IF NOT EXISTS kb_faqs UInt16",
		"`analytics`.quarantine", "TTL day + INTERVAL 90 DAY", "NOT match(query_normalized, '(?i)[^\\\\s@]+@"} {
		if !strings.Contains(all, want) {
			t.Errorf("modern DDL lacks %q", want)
		}
	}
}

func TestLegacyDDLAvoidsNewSyntax(t *testing.T) {
	v, _ := ParseVersion("18.16.1")
	migs, err := Render(FeaturesOf(v), Options{RetentionDays: 400})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migs {
		for _, banned := range []string{"DateTime64", "CODEC", "TTL", "--", "COLUMN IF NOT EXISTS"} {
			if strings.Contains(m.SQL, banned) {
				t.Errorf("migration %d for 18.16 contains %q", m.Version, banned)
			}
		}
		if err := parse(m.SQL); err != nil {
			t.Errorf("migration %d does not parse: %v", m.Version, err)
		}
	}
	if migs[0].Version != 1 || !strings.Contains(migs[0].SQL, "`default`.events") {
		t.Errorf("first migration: %+v", migs[0])
	}
}

// TestStatements checks that a migration of several statements is run one
// statement at a time, each complete.
func TestStatements(t *testing.T) {
	for _, f := range []Features{FeaturesOf(Version{18, 16}), FeaturesOf(Version{23, 8})} {
		migs, err := Render(f, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range migs {
			if len(m.Statements) == 0 {
				t.Errorf("migration %d has no statements", m.Version)
			}
			for _, st := range m.Statements {
				if strings.HasSuffix(st, ";") || strings.Count(st, "ALTER TABLE") > 1 {
					t.Errorf("migration %d: statement not split: %q", m.Version, st)
				}
				if err := parse(st); err != nil {
					t.Errorf("migration %d: statement does not parse: %v\n%s", m.Version, err, st)
				}
			}
			if m.Name == "event_types" && len(m.Statements) != 7 {
				t.Errorf("migration %d has %d statements, want one per new column (7)", m.Version, len(m.Statements))
			}
		}
	}
}

// TestClusterLayout checks the cluster forms of the migrations: local
// tables with replicated or plain engines, Distributed tables under the
// single-server names, views over the local tables.
func TestClusterLayout(t *testing.T) {
	for _, tc := range []struct {
		name          string
		v             Version
		o             Options
		want, notWant []string
	}{
		{"one server", Version{18, 16}, Options{Database: "analytics"},
			[]string{"CREATE TABLE IF NOT EXISTS `analytics`.events\n", "TO `analytics`.query_counts\n", "ENGINE = ReplacingMergeTree\n"},
			[]string{"_local", "ON CLUSTER", "Distributed", "Replicated"}},
		{"replicated cluster", Version{18, 16}, Options{Database: "analytics", Cluster: "cms"},
			[]string{
				"CREATE TABLE IF NOT EXISTS `analytics`.events_local ON CLUSTER `cms`\n",
				"ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/analytics/events_local', '{replica}')",
				"CREATE TABLE IF NOT EXISTS `analytics`.events ON CLUSTER `cms` AS `analytics`.events_local\nENGINE = Distributed('cms', 'analytics', 'events_local', cityHash64(event_id))",
				"ENGINE = ReplicatedSummingMergeTree('/clickhouse/tables/{shard}/analytics/query_counts_local', '{replica}', (asked))",
				"ENGINE = Distributed('cms', 'analytics', 'query_counts_local')",
				"query_counts_mv ON CLUSTER `cms` TO `analytics`.query_counts_local",
				"FROM `analytics`.events_local",
				// Every column from the start: no ALTER ON CLUSTER.
				"    kb_faqs             UInt16,\n",
				"ENGINE = Distributed('cms', 'analytics', 'quarantine_local', cityHash64(event_id))",
				"ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/analytics/query_users_local', '{replica}')",
				"CREATE TABLE IF NOT EXISTS `analytics`.query_users ON CLUSTER `cms` AS `analytics`.query_users_local\nENGINE = Distributed('cms', 'analytics', 'query_users_local')",
				"query_users_mv ON CLUSTER `cms` TO `analytics`.query_users_local",
				// Their successors, and the columns they read from the start.
				"    client_network      String,\n",
				"ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/analytics/query_sources_local', '{replica}')",
				"query_sources_mv ON CLUSTER `cms` TO `analytics`.query_sources_local",
				"ENGINE = ReplicatedSummingMergeTree('/clickhouse/tables/{shard}/analytics/query_counts_daily_local', '{replica}', (asked))",
				"CREATE VIEW IF NOT EXISTS `analytics`.query_counts ON CLUSTER `cms`\nAS SELECT app_id, channel, day, query, asked FROM `analytics`.query_counts_daily",
				"ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/analytics/suggestion_blocks_local', '{replica}', version)",
				"DROP TABLE IF EXISTS `analytics`.query_users_local ON CLUSTER `cms`",
			},
			[]string{"ALTER TABLE", "ENGINE = ReplacingMergeTree"}},
		{"unreplicated cluster layout", Version{23, 8}, Options{Database: "analytics", Cluster: "local", Unreplicated: true, RetentionDays: 30},
			[]string{
				"CREATE TABLE IF NOT EXISTS `analytics`.events_local\n", "ENGINE = ReplacingMergeTree\n",
				"CREATE TABLE IF NOT EXISTS `analytics`.events AS `analytics`.events_local\nENGINE = Distributed('local', 'analytics', 'events_local', cityHash64(event_id))",
				"    kb_faqs             UInt16,\n", "TTL toDateTime(event_time) + INTERVAL 30 DAY",
				// Servers that take IF NOT EXISTS get migration 7's column
				// and indexes in a cluster made before migration 1 had them.
				"ALTER TABLE `analytics`.events_local ADD COLUMN IF NOT EXISTS event_time_source",
				"ALTER TABLE `analytics`.events ADD COLUMN IF NOT EXISTS event_time_source",
				"ALTER TABLE `analytics`.events_local ADD INDEX IF NOT EXISTS session_idx",
			},
			[]string{"ON CLUSTER", "Replicated"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			migs, err := Render(FeaturesOf(tc.v), tc.o)
			if err != nil {
				t.Fatal(err)
			}
			all := ""
			for _, m := range migs {
				for _, st := range m.Statements {
					if err := parse(st); err != nil {
						t.Errorf("migration %d: statement does not parse: %v\n%s", m.Version, err, st)
					}
					all += st + ";\n"
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("lacks %q", w)
				}
			}
			// Every table a materialized view fills counts every insert
			// when replicated.
			if n := strings.Count(all, "SETTINGS replicated_deduplication_window = 0"); tc.o.Cluster != "" && !tc.o.Unreplicated && n != 9 {
				t.Errorf("%d tables count every insert, want 9 (query_counts, query_users, the four rollups, query_sources, query_counts_daily, gap_daily)", n)
			}
			// Only what later migrations replace is dropped.
			for _, drop := range regexp.MustCompile("DROP TABLE IF EXISTS `analytics`\\.(\\w+)").FindAllStringSubmatch(all, -1) {
				switch drop[1] {
				case "query_users_mv", "query_users", "query_users_local", "query_counts_mv", "query_counts", "query_counts_local", "unanswered_daily_mv",
					"unanswered_daily_private_mv", "query_sources_mv", "query_counts_daily_mv", "user_queries_mv",
					// Migration 13's views over the new events table replace
					// those over the older one; the copy's view and, in a
					// cluster, the Distributed tables of the copy and of the
					// older table go.
					"app_daily_mv", "intent_daily_mv", "sessions_mv", "query_sources_mv12", "query_counts_daily_mv12",
					"user_queries_mv12", "unanswered_daily_mv12", "events_v13_mv", "events_v13", "events_v12":
				default:
					t.Errorf("drops %s", drop[1])
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(all, w) {
					t.Errorf("contains %q", w)
				}
			}
			mt, err := MigrationsTable(tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if replicated := tc.o.Cluster != "" && !tc.o.Unreplicated; replicated != strings.Contains(mt, "ReplicatedReplacingMergeTree('/clickhouse/tables/all/analytics/schema_migrations', '{shard}-{replica}')") {
				t.Errorf("migrations table %s", mt)
			}
		})
	}
}

func TestClusterOptionsErrors(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Cluster: "my cluster"}, `cluster name "my cluster"`},
		{Options{Cluster: "a`b"}, "cluster name"},
		{Options{Unreplicated: true}, "needs the cluster's name"},
	} {
		if _, err := Render(Features{}, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Render(%+v) = %v, want an error saying %q", tc.o, err, tc.want)
		}
		if _, err := CreateDatabase(tc.o); err == nil {
			t.Errorf("CreateDatabase(%+v) took a bad option", tc.o)
		}
	}
}
