package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/AfterShip/clickhouse-sql-parser/parser"

	"github.com/assistantcms/cms/internal/modernch"
)

// singleServerTables are the tables of the single-server schema, with
// their engines.
var singleServerTables = map[string]string{"events": "ReplacingMergeTree", "events_v12": "ReplacingMergeTree", "quarantine": "ReplacingMergeTree",
	"query_counts": "View", "query_counts_daily": "SummingMergeTree", "query_counts_daily_mv13": "MaterializedView",
	"query_sources": "AggregatingMergeTree", "query_sources_mv13": "MaterializedView",
	"user_queries": "ReplacingMergeTree", "user_queries_mv13": "MaterializedView",
	"suggestion_blocks": "ReplacingMergeTree",
	"app_daily":         "AggregatingMergeTree", "app_daily_mv13": "MaterializedView",
	"intent_daily": "AggregatingMergeTree", "intent_daily_mv13": "MaterializedView",
	"unanswered_daily": "AggregatingMergeTree", "unanswered_daily_mv13": "MaterializedView",
	"sessions": "AggregatingMergeTree", "sessions_mv13": "MaterializedView",
	"gap_daily": "AggregatingMergeTree", "gap_daily_mv": "MaterializedView"}

// clusterTables are the tables of the cluster layout: shard-local tables
// behind Distributed ones under the single-server names.
var clusterTables = map[string]string{
	"events_local": "ReplacingMergeTree", "events": "Distributed", "events_v12_local": "ReplacingMergeTree",
	"quarantine_local": "ReplacingMergeTree", "quarantine": "Distributed",
	"query_counts": "View", "schema_migrations": "ReplacingMergeTree",
	"query_counts_daily_local": "SummingMergeTree", "query_counts_daily": "Distributed", "query_counts_daily_mv13": "MaterializedView",
	"query_sources_local": "AggregatingMergeTree", "query_sources": "Distributed", "query_sources_mv13": "MaterializedView",
	"user_queries_local": "ReplacingMergeTree", "user_queries": "Distributed", "user_queries_mv13": "MaterializedView",
	"suggestion_blocks_local": "ReplacingMergeTree", "suggestion_blocks": "Distributed",
	"app_daily_local": "AggregatingMergeTree", "app_daily": "Distributed", "app_daily_mv13": "MaterializedView",
	"intent_daily_local": "AggregatingMergeTree", "intent_daily": "Distributed", "intent_daily_mv13": "MaterializedView",
	"unanswered_daily_local": "AggregatingMergeTree", "unanswered_daily": "Distributed", "unanswered_daily_mv13": "MaterializedView",
	"sessions_local": "AggregatingMergeTree", "sessions": "Distributed", "sessions_mv13": "MaterializedView",
	"gap_daily_local": "AggregatingMergeTree", "gap_daily": "Distributed", "gap_daily_mv": "MaterializedView",
}

// modernRenderings are the renderings for current servers that
// TestModernDDLRunsOnCurrentClickHouse executes, one line each, with the
// tables each must create.
var modernRenderings = []struct {
	name    string
	version string
	o       Options
	tables  map[string]string
}{
	{"single server, retention", "26.7", Options{Database: "analytics", RetentionDays: 400}, singleServerTables},
	{"single server, kept forever", "24.8", Options{}, singleServerTables},
	// The cluster DDL without replication (the engine has no ZooKeeper),
	// over a cluster of one local shard.
	{"cluster, unreplicated", "26.7", Options{Database: "analytics", Cluster: "cms", Unreplicated: true, RetentionDays: 30, HistoryDays: 30}, clusterTables},
}

// TestModernDDLRunsOnCurrentClickHouse executes every statement rendered
// for current servers on a ClickHouse 26 engine (chDB), twice, as
// consumers starting at once do, and checks what it created: a parser
// accepts statements such a server refuses.
func TestModernDDLRunsOnCurrentClickHouse(t *testing.T) {
	for _, r := range modernRenderings {
		t.Run(r.name, func(t *testing.T) {
			v, err := ParseVersion(r.version)
			if err != nil {
				t.Fatal(err)
			}
			f := FeaturesOf(v)
			migs, err := Render(f, r.o)
			if err != nil {
				t.Fatal(err)
			}
			s := modernch.OpenForTestWith(t, modernch.Options{Cluster: r.o.Cluster})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			db := r.o.Database
			if db == "" {
				db = "default"
			}
			// The migration runner creates the database first; on a
			// cluster the migrations table too.
			first := []string{"CREATE DATABASE IF NOT EXISTS " + quoteIdent(db)}
			if r.o.Cluster != "" {
				create, err := CreateDatabase(r.o)
				if err != nil {
					t.Fatal(err)
				}
				table, err := MigrationsTable(r.o)
				if err != nil {
					t.Fatal(err)
				}
				first = []string{create, table}
			}
			for _, st := range first {
				if err := s.Exec(ctx, st); err != nil {
					t.Fatalf("%v\n%s", err, st)
				}
			}
			for round := 1; round <= 2; round++ {
				for _, m := range migs {
					if err := runModern(ctx, s, m); err != nil {
						t.Fatalf("round %d: %v", round, err)
					}
				}
			}
			checkModernSchema(ctx, t, s, db, r.o, r.tables)
		})
	}
}

// runModern runs a migration on the modern engine as the migration runner
// does, skipping what is done already.
func runModern(ctx context.Context, s *modernch.Session, m Migration) error {
	return m.Run(func(st string) error {
		if err := s.Exec(ctx, st); err != nil {
			return fmt.Errorf("%w\n%s", err, st)
		}
		return nil
	}, func(q string) (bool, error) {
		res, err := s.Query(ctx, q)
		if err != nil {
			return false, err
		}
		return len(res.Rows) == 1 && fmt.Sprint(res.Rows[0]...) == "1", nil
	})
}

// checkModernSchema checks the tables the migrations created, as the
// server describes them.
func checkModernSchema(ctx context.Context, t *testing.T, s *modernch.Session, db string, o Options, want map[string]string) {
	t.Helper()
	res, err := s.Query(ctx, "SELECT name, engine, create_table_query FROM system.tables WHERE database = '"+db+"' ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	engines := map[string]string{}
	created := map[string]string{}
	for _, row := range res.Rows {
		name := fmt.Sprint(row[0])
		engines[name], created[name] = fmt.Sprint(row[1]), fmt.Sprint(row[2])
	}
	if len(engines) != len(want) {
		t.Errorf("tables %v, want %v", engines, want)
	}
	for name, engine := range want {
		if engines[name] != engine {
			t.Errorf("table %s has engine %q, want %s", name, engines[name], engine)
		}
	}
	// Storage (TTL, codecs) belongs to the tables holding the rows: on a
	// cluster, the shard-local ones.
	local := ""
	if o.Cluster != "" {
		local = LocalSuffix
	}
	// Every table of asked queries expires with the events.
	for _, table := range []string{"events", "quarantine", "query_counts_daily", "user_queries", "unanswered_daily", "gap_daily"} {
		hasTTL := strings.Contains(created[table+local], " TTL ")
		if hasTTL != (o.RetentionDays > 0) {
			t.Errorf("%s with retention %d days: TTL %v\n%s", table+local, o.RetentionDays, hasTTL, created[table+local])
		}
	}
	// query_sources keeps its days, never longer than the events.
	historyDays := o.HistoryDays
	if historyDays == 0 {
		historyDays = DefaultHistoryDays
	}
	if o.RetentionDays > 0 {
		historyDays = min(historyDays, o.RetentionDays)
	}
	if ttl := fmt.Sprintf(" TTL day + toIntervalDay(%d)", historyDays); !strings.Contains(created["query_sources"+local], ttl) {
		t.Errorf("query_sources%s lacks%s:\n%s", local, ttl, created["query_sources"+local])
	}

	res, err = s.Query(ctx, "SELECT table, name, type, compression_codec FROM system.columns WHERE database = '"+db+"' AND table = 'events"+local+"' ORDER BY position")
	if err != nil {
		t.Fatal(err)
	}
	types, codecs := map[string]string{}, map[string]string{}
	var order []string
	for _, row := range res.Rows {
		name := fmt.Sprint(row[1])
		order = append(order, name)
		types[name], codecs[name] = fmt.Sprint(row[2]), fmt.Sprint(row[3])
	}
	for col, typ := range map[string]string{"event_time": "DateTime64(3, 'UTC')", "app_id": "LowCardinality(String)",
		"match_confidence": "Nullable(Float32)", "tags": "Array(String)", "kb_faqs": "UInt16"} {
		if types[col] != typ {
			t.Errorf("events.%s has type %q, want %s", col, types[col], typ)
		}
	}
	for _, col := range []string{"raw_query", "payload", "error_stack", "message"} {
		if codecs[col] != "CODEC(ZSTD(3))" {
			t.Errorf("events.%s has codec %q", col, codecs[col])
		}
	}
	// The added columns sit after tag, in the order the migrations give.
	if got := strings.Join(order, ","); !strings.Contains(got, "tag,tags,error_message,error_stack,message,kb_used,kb_documents,kb_faqs,event_time_source,runtime_time,token_id,client_network,payload") {
		t.Errorf("events columns in order %s", got)
	}
	if typ := types["event_time_source"]; typ != "Enum8('received' = 1, 'runtime' = 2)" {
		t.Errorf("events.event_time_source has type %q", typ)
	}
	if typ := types["runtime_time"]; typ != "Nullable(DateTime64(3, 'UTC'))" {
		t.Errorf("events.runtime_time has type %q", typ)
	}
	for _, index := range []string{"INDEX session_idx session_id TYPE bloom_filter(0.01) GRANULARITY 2", "INDEX user_idx user_id TYPE bloom_filter(0.01) GRANULARITY 2"} {
		if !strings.Contains(created["events"+local], index) {
			t.Errorf("events%s lacks %s:\n%s", local, index, created["events"+local])
		}
	}

	// The view feeds query_counts, and query_normalized's default
	// normalises what writers leave empty.
	events := quoteIdent(db) + ".events"
	if err := s.Exec(ctx, "INSERT INTO "+events+" (event_id, app_id, channel, event_time, received_at, raw_query) VALUES "+
		"('e1', 'a', 'web', now64(3), now64(3), '  Where   IS my order '), ('e2', 'a', 'web', now64(3), now64(3), 'where is my ORDER')"); err != nil {
		t.Fatal(err)
	}
	res, err = s.Query(ctx, "SELECT query, sum(asked) FROM "+quoteIdent(db)+".query_counts GROUP BY query")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 || fmt.Sprint(res.Rows[0]...) != "where is my order2" {
		t.Errorf("query_counts after two inserted events: %v", res.Rows)
	}

	// query_sources counts users', sessions' and sources' questions,
	// without those of no user, session or source, or holding personal
	// data.
	if err := s.Exec(ctx, "INSERT INTO "+events+" (event_id, app_id, channel, user_id, session_id, token_id, client_network, event_time, received_at, raw_query) VALUES "+
		"('e3', 'a', 'web', 'u1', 's1', 't', '192.0.2.0/24', now64(3), now64(3), 'Where is my order'), "+
		"('e4', 'a', 'web', 'u2', 's2', 't', '198.51.100.0/24', now64(3), now64(3), 'where is my order'), "+
		"('e5', 'a', 'web', 'u3', 's3', 't', '198.51.100.0/24', now64(3), now64(3), 'where is my order'), "+
		"('e6', 'a', 'web', 'u1', 's1', 't', '', now64(3), now64(3), 'where is my order'), "+
		"('e7', 'a', 'web', 'u1', 's1', 't', '192.0.2.0/24', now64(3), now64(3), 'I am Jo@Example.com'), "+
		"('e8', 'a', 'web', 'u1', 's1', 't', '192.0.2.0/24', now64(3), now64(3), 'jane dot doe at gmail dot com'), "+
		"('e9', 'a', 'web', 'u1', 's1', 't', '192.0.2.0/24', now64(3), now64(3), 'call 555-123-4567')"); err != nil {
		t.Fatal(err)
	}
	res, err = s.Query(ctx, "SELECT query, countMerge(asked), uniqMerge(users), uniqMerge(sessions), uniqMerge(sources) FROM "+quoteIdent(db)+".query_sources WHERE day = today() GROUP BY query")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 || fmt.Sprint(res.Rows[0]...) != "where is my order3332" {
		t.Errorf("query_sources after seven inserted events: %v", res.Rows)
	}
	// query_counts_daily counts them all but the private ones, and
	// user_queries records who asked what.
	res, err = s.Query(ctx, "SELECT query, sum(asked) FROM "+quoteIdent(db)+".query_counts_daily GROUP BY query")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 || fmt.Sprint(res.Rows[0]...) != "where is my order6" {
		t.Errorf("query_counts_daily: %v", res.Rows)
	}
	res, err = s.Query(ctx, "SELECT user_id, count() FROM (SELECT DISTINCT user_id, query FROM "+quoteIdent(db)+".user_queries) GROUP BY user_id ORDER BY user_id")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(res.Rows) != "[[ 1] [u1 1] [u2 1] [u3 1]]" {
		t.Errorf("user_queries: %v", res.Rows)
	}
}

// TestParserAcceptsWhatCurrentClickHouseRefuses shows why the modern DDL
// runs on a real engine: the parser the other tests use takes statements
// a current server refuses.
func TestParserAcceptsWhatCurrentClickHouseRefuses(t *testing.T) {
	cases := []struct {
		name string
		sql  string
		code int // the server's error code
	}{
		{"plain column in an AggregatingMergeTree",
			"CREATE TABLE rollup (app_id String, day Date, hits UInt64, users AggregateFunction(uniq, String)) ENGINE = AggregatingMergeTree ORDER BY (app_id, day)",
			36}, // BAD_ARGUMENTS: hits is neither in the sorting key nor an aggregate
		{"unknown column type",
			"CREATE TABLE typo (event_id Strin) ENGINE = MergeTree ORDER BY event_id",
			50}, // UNKNOWN_TYPE
		{"sorting key on a column the table lacks",
			"CREATE TABLE key (event_id String) ENGINE = ReplacingMergeTree ORDER BY (app_id, event_id)",
			47}, // UNKNOWN_IDENTIFIER
		{"materialized view reading a column its source lacks",
			"CREATE MATERIALIZED VIEW counts_mv TO query_counts AS SELECT app_id, channel, raw_query_normalised AS query, toUInt64(1) AS asked FROM events",
			47}, // UNKNOWN_IDENTIFIER
	}
	s := modernch.OpenForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The view's case needs the real tables beside it.
	v, _ := ParseVersion("26.7")
	migs, err := Render(FeaturesOf(v), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migs {
		for _, st := range m.Statements {
			if err := s.Exec(ctx, st); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parser.NewParser(tc.sql).ParseStmts(); err != nil {
				t.Fatalf("the parser refuses it too, so it shows nothing: %v", err)
			}
			err := s.Exec(ctx, tc.sql)
			var refused *modernch.Error
			if !errors.As(err, &refused) {
				t.Fatalf("the engine took it: %v", err)
			}
			if refused.Code != tc.code {
				t.Errorf("refused with code %d, want %d: %v", refused.Code, tc.code, refused)
			}
		})
	}
}

// TestMigration7CompletesAnOlderCluster builds a cluster's events tables
// as migration 1 made them before it held event_time_source and the skip
// indexes, then runs migration 7 twice: the column reaches both tables and
// the indexes the local one.
func TestMigration7CompletesAnOlderCluster(t *testing.T) {
	o := Options{Database: "analytics", Cluster: "cms", Unreplicated: true}
	v, _ := ParseVersion("26.7")
	migs, err := Render(FeaturesOf(v), o)
	if err != nil {
		t.Fatal(err)
	}
	s := modernch.OpenForTestWith(t, modernch.Options{Cluster: o.Cluster})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	create, err := CreateDatabase(o)
	if err != nil {
		t.Fatal(err)
	}
	older := []string{create}
	for _, st := range migs[0].Statements {
		// The older migration 1: without the column and the indexes.
		st = regexp.MustCompile(`(?m)^\s+event_time_source .*\n`).ReplaceAllString(st, "")
		st = regexp.MustCompile(`,\s+INDEX session_idx[^\n]*\n\s+INDEX user_idx[^\n]*`).ReplaceAllString(st, "")
		older = append(older, st)
	}
	for _, st := range older {
		if err := s.Exec(ctx, st); err != nil {
			t.Fatalf("%v\n%s", err, st)
		}
	}
	describe := func() string {
		res, err := s.Query(ctx, "SELECT table, count() FROM system.columns WHERE database = 'analytics' AND name = 'event_time_source' GROUP BY table ORDER BY table")
		if err != nil {
			t.Fatal(err)
		}
		idx, err := s.Query(ctx, "SELECT name FROM system.data_skipping_indices WHERE database = 'analytics' AND table = 'events_local' ORDER BY name")
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(res.Rows, idx.Rows)
	}
	if got := describe(); got != "[] []" {
		t.Fatalf("the older tables already have %s", got)
	}
	var seven Migration
	for _, m := range migs {
		if m.Version == 7 {
			seven = m
		}
	}
	for round := 1; round <= 2; round++ {
		for _, st := range seven.Statements {
			if err := s.Exec(ctx, st); err != nil {
				t.Fatalf("round %d: %v\n%s", round, err, st)
			}
		}
	}
	if got, want := describe(), "[[events 1] [events_local 1]] [[session_idx] [user_idx]]"; got != want {
		t.Errorf("after migration 7: %s, want %s", got, want)
	}
}

// TestMigration9CompletesAnOlderCluster builds a cluster's events tables
// as migration 1 made them before they held runtime_time, token_id and
// client_network, then runs migration 9 twice: the columns reach both
// tables, where the query views of migrations 10 and 11 read them.
func TestMigration9CompletesAnOlderCluster(t *testing.T) {
	o := Options{Database: "analytics", Cluster: "cms", Unreplicated: true}
	v, _ := ParseVersion("26.7")
	migs, err := Render(FeaturesOf(v), o)
	if err != nil {
		t.Fatal(err)
	}
	s := modernch.OpenForTestWith(t, modernch.Options{Cluster: o.Cluster})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	create, err := CreateDatabase(o)
	if err != nil {
		t.Fatal(err)
	}
	older := []string{create}
	for _, st := range migs[0].Statements {
		older = append(older, regexp.MustCompile(`(?m)^\s+(runtime_time|token_id|client_network) .*\n`).ReplaceAllString(st, ""))
	}
	for _, st := range older {
		if err := s.Exec(ctx, st); err != nil {
			t.Fatalf("%v\n%s", err, st)
		}
	}
	describe := func() string {
		res, err := s.Query(ctx, "SELECT table, groupArray(name) FROM (SELECT table, name FROM system.columns WHERE database = 'analytics' "+
			"AND name IN ('runtime_time', 'token_id', 'client_network') ORDER BY table, position) GROUP BY table ORDER BY table")
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(res.Rows)
	}
	if got := describe(); got != "[]" {
		t.Fatalf("the older tables already have %s", got)
	}
	for round := 1; round <= 2; round++ {
		for _, m := range migs[1:] {
			if err := runModern(ctx, s, m); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
	// Migration 13 keeps the older local table as events_v12_local, and
	// its copy has the columns too.
	if got, want := describe(), "[[events [runtime_time token_id client_network]] [events_local [runtime_time token_id client_network]] "+
		"[events_v12_local [runtime_time token_id client_network]]]"; got != want {
		t.Errorf("after migration 9: %s, want %s", got, want)
	}
}

// TestQueryTablesExpireWithEvents checks, on a ClickHouse 26 engine
// (chDB), that no table of asked queries keeps a day longer than the
// events it came from: with a retention of 30 days, the questions of 40
// days ago are gone from every one of them once merged, even where
// HISTORY_DAYS asks for 90, and today's stay.
func TestQueryTablesExpireWithEvents(t *testing.T) {
	o := Options{Database: "analytics", RetentionDays: 30, HistoryDays: 90}
	v, _ := ParseVersion("26.7")
	migs, err := Render(FeaturesOf(v), o)
	if err != nil {
		t.Fatal(err)
	}
	s := modernch.OpenForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Exec(ctx, "CREATE DATABASE analytics"); err != nil {
		t.Fatal(err)
	}
	for _, m := range migs {
		for _, st := range m.Statements {
			if err := s.Exec(ctx, st); err != nil {
				t.Fatalf("migration %d: %v\n%s", m.Version, err, st)
			}
		}
	}
	tables := []string{"query_counts_daily", "query_sources", "user_queries", "unanswered_daily", "gap_daily", "events"}
	// Merges wait until the rows are seen, so that the TTL's work shows.
	for _, table := range tables {
		if err := s.Exec(ctx, "SYSTEM STOP TTL MERGES analytics."+table); err != nil {
			t.Fatal(err)
		}
	}
	insert := "INSERT INTO analytics.events (event_id, app_id, channel, user_id, session_id, token_id, client_network, name, request_type, event_time, received_at, raw_query) VALUES "
	var values []string
	for i, daysAgo := range []int{0, 40} {
		for u := range 2 {
			values = append(values, fmt.Sprintf("('e%d-%d', 'a', 'web', 'u%d', 's%d', 't', '192.0.%d.0/24', 'REQUEST_RESPONSE', 'INPUT_UNKNOWN_REQUEST', "+
				"now64(3) - INTERVAL %d DAY, now64(3) - INTERVAL %d DAY, 'asked %d days ago')", i, u, u, u, u, daysAgo, daysAgo, daysAgo))
		}
	}
	if err := s.Exec(ctx, insert+strings.Join(values, ", ")); err != nil {
		t.Fatal(err)
	}
	queries := func() string {
		var out []string
		for _, table := range tables {
			column := "query"
			if table == "events" {
				column = "raw_query"
			}
			res, err := s.Query(ctx, "SELECT DISTINCT "+column+" FROM analytics."+table+" ORDER BY "+column)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprint(table, res.Rows))
		}
		return strings.Join(out, " ")
	}
	if got, want := queries(), "query_counts_daily[[asked 0 days ago] [asked 40 days ago]] query_sources[[asked 0 days ago] [asked 40 days ago]] "+
		"user_queries[[asked 0 days ago] [asked 40 days ago]] unanswered_daily[[asked 0 days ago] [asked 40 days ago]] "+
		"gap_daily[[asked 0 days ago] [asked 40 days ago]] events[[asked 0 days ago] [asked 40 days ago]]"; got != want {
		t.Fatalf("before the merge: %s\nwant %s", got, want)
	}
	for _, table := range tables {
		if err := s.Exec(ctx, "SYSTEM START TTL MERGES analytics."+table); err != nil {
			t.Fatal(err)
		}
		if err := s.Exec(ctx, "OPTIMIZE TABLE analytics."+table+" FINAL"); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for _, table := range tables {
		want = append(want, table+"[[asked 0 days ago]]")
	}
	if got := queries(); got != strings.Join(want, " ") {
		t.Errorf("after the merge: %s\nwant %s", got, strings.Join(want, " "))
	}
	// query_counts, the view analysts knew, reads the same.
	res, err := s.Query(ctx, "SELECT query, sum(asked) FROM analytics.query_counts GROUP BY query")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(res.Rows) != "[[asked 0 days ago 2]]" {
		t.Errorf("query_counts: %v", res.Rows)
	}
}

// TestFirstCopyWinsOnCurrentClickHouse checks migration 13 on a
// ClickHouse 26 engine (chDB), on one server and in the cluster layout:
// two copies of an event written before it, unmerged, where FINAL shows
// the later one, show the first after it; a later copy written after it,
// with the rank the consumer sends, loses to the first too, and the views
// made over the new table count what is written.
func TestFirstCopyWinsOnCurrentClickHouse(t *testing.T) {
	for _, o := range []Options{{Database: "analytics"}, {Database: "analytics", Cluster: "cms", Unreplicated: true}} {
		t.Run(fmt.Sprint(o.Cluster != ""), func(t *testing.T) {
			v, _ := ParseVersion("26.7")
			migs, err := Render(FeaturesOf(v), o)
			if err != nil {
				t.Fatal(err)
			}
			s := modernch.OpenForTestWith(t, modernch.Options{Cluster: o.Cluster})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			create, err := CreateDatabase(o)
			if err != nil {
				t.Fatal(err)
			}
			exec := func(st string) {
				t.Helper()
				if err := s.Exec(ctx, st); err != nil {
					t.Fatalf("%v\n%s", err, st)
				}
			}
			query := func(q string) string {
				t.Helper()
				res, err := s.Query(ctx, q)
				if err != nil {
					t.Fatalf("%v\n%s", err, q)
				}
				return fmt.Sprint(res.Rows)
			}
			exec(create)
			for _, m := range migs {
				if m.Version == 13 {
					break
				}
				if err := runModern(ctx, s, m); err != nil {
					t.Fatal(err)
				}
			}
			local := "analytics.events"
			if o.Cluster != "" {
				local += LocalSuffix
			}
			exec("SYSTEM STOP MERGES " + local)
			// Inserted one at a time, as two batches are, the later
			// receipt last; written by an earlier consumer, without a rank.
			for _, row := range []string{"'alice', 'where is my order', '2026-11-20 10:00:00.100'", "'mallory', 'refund everything', '2026-11-20 10:00:00.101'"} {
				exec("INSERT INTO analytics.events (event_id, app_id, session_id, user_id, raw_query, received_at, event_time) " +
					"SETTINGS insert_distributed_sync = 1 VALUES ('copied', 'a', 's', " + row + ", '2026-11-20 10:00:00')")
			}
			final := "SELECT user_id, raw_query FROM analytics.events FINAL WHERE event_id = 'copied'"
			if got := query(final); got != "[[mallory refund everything]]" {
				t.Fatalf("before migration 13 FINAL reads %s: the test no longer shows the later copy winning", got)
			}
			for round := 1; round <= 2; round++ {
				if err := runModern(ctx, s, migs[12]); err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
			}
			if got := query(final); got != "[[alice where is my order]]" {
				t.Errorf("after migration 13 FINAL reads %s, want alice's copy", got)
			}
			// A copy received now, with the rank the consumer gives it.
			exec(fmt.Sprintf("INSERT INTO analytics.events (event_id, app_id, session_id, user_id, raw_query, received_at, event_time, arrival_rank) "+
				"SETTINGS insert_distributed_sync = 1 VALUES ('copied', 'a', 's', 'mallory', 'refund everything', now64(3), '2026-11-20 10:00:00', %d)",
				ArrivalRank(time.Now())))
			exec("INSERT INTO analytics.events (event_id, app_id, session_id, received_at, event_time) " +
				"SETTINGS insert_distributed_sync = 1 VALUES ('fresh', 'a', 's', now64(3), '2026-11-20 10:00:00')")
			if got := query(final); got != "[[alice where is my order]]" {
				t.Errorf("after a later copy FINAL reads %s, want alice's copy", got)
			}
			exec("OPTIMIZE TABLE " + local + " FINAL")
			if got := query("SELECT user_id FROM analytics.events WHERE event_id = 'copied'"); got != "[[alice]]" {
				t.Errorf("after the merge the rows are %s, want alice's alone", got)
			}
			if got := query("SELECT uniqMerge(events) FROM analytics.app_daily"); got != "[[2]]" {
				t.Errorf("app_daily counts %s events, want 2 (the copies once, and the one written after the migration)", got)
			}
		})
	}
}
