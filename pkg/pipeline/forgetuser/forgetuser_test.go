package forgetuser

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/chfixture"
	"github.com/assistantcms/cms/internal/devclickhouse"
	"github.com/assistantcms/cms/internal/modernch"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	chschema "github.com/assistantcms/cms/schemas/clickhouse"
)

// forgetRows are rows of two users of app "shop" and of the first user in
// another app: both users asked `where is my order\?` (with a low
// confidence, so it is also unanswered), each asked a query of their own
// that was not understood, and each has quarantined events, one of them
// cut short and one naming the first user only inside the payload.
func forgetRows() (*chstore.EventBatch, []chstore.QuarantineRow) {
	t0 := time.Now().UTC().Truncate(24 * time.Hour).Add(time.Hour)
	ev := func(id, app, session, user string, at time.Duration) chfixture.Event {
		return chfixture.Event{EventID: id, AppID: app, OrganizationID: "o", EventTime: t0.Add(at), ReceivedAt: t0.Add(at),
			Type: "AnalyticsEvent", Name: "REQUEST_RESPONSE", SessionID: session, UserID: user, Channel: "web", Extra: "{}",
			TokenID: "t-" + app, ClientNetwork: "192.0.2.0/24"}
	}
	turn := func(f chfixture.Event, query string, confidence float32) chfixture.Event {
		f.RequestType, f.IntentID, f.RawQuery, f.MatchConfidence = "INTENT_REQUEST", "OrderStatus", query, chfixture.Confidence(confidence)
		return f
	}
	unknown := func(f chfixture.Event, query string) chfixture.Event {
		f.RequestType, f.RawQuery = "INPUT_UNKNOWN_REQUEST", query
		return f
	}
	b := &chstore.EventBatch{}
	for i, f := range []chfixture.Event{
		turn(ev("a1", "shop", "s-a", "ann", 0), `Where is my order\?`, 0.4),
		unknown(ev("a2", "shop", "s-a", "ann", time.Second), "My  secret   plan?"),
		turn(ev("b1", "shop", "s-b", "bob", 2*time.Second), `where is my order\?`, 0.4),
		unknown(ev("b2", "shop", "s-b", "bob", 3*time.Second), "blah blah"),
		unknown(ev("c1", "blog", "s-c", "ann", 4*time.Second), "my secret plan"),
	} {
		f.Offset = uint64(i)
		f.AddTo(b)
	}
	q := func(id, app, event string, truncated bool) chstore.QuarantineRow {
		return chstore.QuarantineRow{EventID: id, AppID: app, OrganizationID: "o", ReceivedAt: t0, Reason: "r", Message: "m", Errors: "[]",
			Event: event, EventBytes: len(event), Truncated: truncated}
	}
	return b, []chstore.QuarantineRow{
		// With a space after the colon, which visitParamExtractString misses.
		q("qa1", "shop", `{"type":"X", "userId": "ann"}`, false),
		q("qa2", "shop", `{"userId":"ann","payload":{"text":"aaaa`, true),
		q("qb1", "shop", `{"payload":{"userId":"ann"},"userId":"bob"}`, false),
		q("qb2", "shop", `{"userId":"bob"}`, false),
		q("qc1", "blog", `{"userId":"ann"}`, false),
	}
}

// forgetStateSQL are, per table, the queries of the rows the forgetting
// tests look at, with the table name's suffix ("" or the shard-local
// suffix) to fill in.
func forgetStateSQL() map[string]string {
	return map[string]string{
		"events":             "SELECT DISTINCT concat(app_id, '/', user_id, '/', event_id) FROM events%s",
		"quarantine":         "SELECT DISTINCT concat(app_id, '/', event_id) FROM quarantine%s",
		"sessions":           "SELECT DISTINCT concat(app_id, '/', session_id) FROM sessions%s",
		"user_queries":       "SELECT DISTINCT concat(app_id, '/', user_id, '/', query) FROM user_queries%s",
		"query_counts_daily": "SELECT DISTINCT concat(app_id, '/', query) FROM query_counts_daily%s",
		"query_sources":      "SELECT DISTINCT concat(app_id, '/', query) FROM query_sources%s",
		"unanswered_daily":   "SELECT DISTINCT concat(app_id, '/', query) FROM unanswered_daily%s",
		"gap_daily":          "SELECT DISTINCT concat(app_id, '/', query) FROM gap_daily%s",
	}
}

// forgetState lists, per table, the rows the forgetting tests look at, of
// tables named with suffix.
func forgetState(t *testing.T, s *chstore.Store, suffix string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for table, sql := range forgetStateSQL() {
		var rows []string
		for _, r := range chfixture.Query(t, s, fmt.Sprintf(sql, suffix)) {
			rows = append(rows, r[0])
		}
		slices.Sort(rows)
		out[table] = rows
	}
	return out
}

// modernForgetState is forgetState on the modern engine.
func modernForgetState(ctx context.Context, t *testing.T, modern *modernch.Session) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for table, sql := range forgetStateSQL() {
		res, err := modern.Query(ctx, fmt.Sprintf(sql, ""))
		if err != nil {
			t.Fatal(err)
		}
		var rows []string
		for _, r := range res.Rows {
			rows = append(rows, fmt.Sprint(r[0]))
		}
		slices.Sort(rows)
		out[table] = rows
	}
	return out
}

// forgetWant are the rows of forgetRows before and after forgetting ann
// of shop.
func forgetWant() (before, after map[string][]string) {
	before = map[string][]string{
		"events":     {"blog/ann/c1", "shop/ann/a1", "shop/ann/a2", "shop/bob/b1", "shop/bob/b2"},
		"quarantine": {"blog/qc1", "shop/qa1", "shop/qa2", "shop/qb1", "shop/qb2"},
		"sessions":   {"blog/s-c", "shop/s-a", "shop/s-b"},
		"user_queries": {"blog/ann/my secret plan", "shop/ann/my secret plan?", `shop/ann/where is my order\?`,
			"shop/bob/blah blah", `shop/bob/where is my order\?`},
		"query_counts_daily": {"blog/my secret plan", "shop/blah blah", "shop/my secret plan?", `shop/where is my order\?`},
		"query_sources":      {"blog/my secret plan", "shop/blah blah", "shop/my secret plan?", `shop/where is my order\?`},
		"unanswered_daily":   {"blog/my secret plan", "shop/blah blah", "shop/my secret plan?", `shop/where is my order\?`},
		"gap_daily":          {"blog/my secret plan", "shop/blah blah", "shop/my secret plan?", `shop/where is my order\?`},
	}
	after = map[string][]string{
		"events":             {"blog/ann/c1", "shop/bob/b1", "shop/bob/b2"},
		"quarantine":         {"blog/qc1", "shop/qb1", "shop/qb2"},
		"sessions":           {"blog/s-c", "shop/s-b"},
		"user_queries":       {"blog/ann/my secret plan", "shop/bob/blah blah", `shop/bob/where is my order\?`},
		"query_counts_daily": {"blog/my secret plan", "shop/blah blah", `shop/where is my order\?`},
		"query_sources":      {"blog/my secret plan", "shop/blah blah", `shop/where is my order\?`},
		"unanswered_daily":   {"blog/my secret plan", "shop/blah blah", `shop/where is my order\?`},
		"gap_daily":          {"blog/my secret plan", "shop/blah blah", `shop/where is my order\?`},
	}
	return before, after
}

// wantForgotten is what forgetting ann of shop finds in forgetRows.
func wantForgotten(dryRun bool) Forgotten {
	return Forgotten{AppID: "shop", UserID: "ann", DryRun: dryRun, Sessions: 1, Queries: 1, Quarantined: 2,
		Rows: []TableRows{{"events", 2}, {"quarantine", 2}, {"sessions", 1}, {"user_queries", 2}, {"query_counts_daily", 1}, {"query_sources", 1}, {"unanswered_daily", 1}, {"gap_daily", 1}}}
}

func writeForgetRows(t *testing.T, s *chstore.Store) {
	t.Helper()
	b, q := forgetRows()
	if err := s.InsertEvents(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if err := s.InsertQuarantine(context.Background(), q); err != nil {
		t.Fatal(err)
	}
}

func TestForgetUser(t *testing.T) {
	s := chfixture.Migrated(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	writeForgetRows(t, s)
	before, after := forgetWant()
	if got := forgetState(t, s, ""); !reflect.DeepEqual(got, before) {
		t.Fatalf("rows written:\n%v\nwant\n%v", got, before)
	}
	for _, tc := range []struct {
		name   string
		dryRun bool
		want   map[string][]string
	}{
		{"dry run", true, before},
		{"forget", false, after},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Forget(ctx, s, Request{AppID: "shop", UserID: "ann", DryRun: tc.dryRun}, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := wantForgotten(tc.dryRun)
			if !tc.dryRun {
				want.Mutations = 8
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("forgotten %+v, want %+v", got, want)
			}
			if rows := forgetState(t, s, ""); !reflect.DeepEqual(rows, tc.want) {
				t.Errorf("rows left:\n%v\nwant\n%v", rows, tc.want)
			}
		})
	}
	// Forgotten again, nothing is left to delete.
	again, err := Forget(ctx, s, Request{AppID: "shop", UserID: "ann"}, nil)
	if err != nil || len(again.Rows) != 0 || again.Mutations != 0 {
		t.Errorf("forgetting again: %+v, %v; want nothing to delete", again, err)
	}
}

// TestForgetUserAfterEventsExpired forgets a user whose events are gone
// already, as retention drops them (a TTL, or partitions dropped by hand
// on servers without TTL) while the tables of queries and sessions still
// hold days of them: those rows are found and deleted all the same.
func TestForgetUserAfterEventsExpired(t *testing.T) {
	s := chfixture.Migrated(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	writeForgetRows(t, s)
	dropEvents(t, s, "")
	_, after := forgetWant()
	after["events"] = nil
	got, err := Forget(ctx, s, Request{AppID: "shop", UserID: "ann"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Forgotten{AppID: "shop", UserID: "ann", Sessions: 1, Queries: 1, Quarantined: 2, Mutations: 7,
		Rows: []TableRows{{"quarantine", 2}, {"sessions", 1}, {"user_queries", 2}, {"query_counts_daily", 1}, {"query_sources", 1}, {"unanswered_daily", 1}, {"gap_daily", 1}}}); !reflect.DeepEqual(got, want) {
		t.Errorf("forgotten %+v, want %+v", got, want)
	}
	if rows := forgetState(t, s, ""); !reflect.DeepEqual(rows, after) {
		t.Errorf("rows left:\n%v\nwant\n%v", rows, after)
	}
}

// dropEvents drops every partition of the events table (named with
// suffix), as retention by hand does.
func dropEvents(t *testing.T, s *chstore.Store, suffix string) {
	t.Helper()
	for _, p := range chfixture.Query(t, s, "SELECT DISTINCT partition FROM system.parts WHERE database = currentDatabase() AND table = 'events"+suffix+"' AND active") {
		if err := s.Conn().Exec(s.Context(context.Background()), "ALTER TABLE events"+suffix+" DROP PARTITION "+p[0]); err != nil {
			t.Fatal(err)
		}
	}
	if n := chfixture.Query(t, s, "SELECT count() FROM events"+suffix)[0][0]; n != "0" {
		t.Fatalf("%s events left after dropping their partitions", n)
	}
}

func TestForgetUserRefusesNoUser(t *testing.T) {
	s := chfixture.Migrated(t, nil)
	for _, f := range []Request{{AppID: "shop"}, {UserID: "ann"}} {
		if _, err := Forget(context.Background(), s, f, nil); err == nil || !strings.Contains(err.Error(), "want an app ID and a user ID") {
			t.Errorf("forget %+v: %v", f, err)
		}
	}
}

func TestForgetUserSplitsLongLists(t *testing.T) {
	s := chfixture.Migrated(t, nil)
	ctx := context.Background()
	// More sessions than one statement's list holds, each with a query
	// only this user asked.
	b := &chstore.EventBatch{}
	at := time.Now().UTC()
	const n = 6000
	for i := range n {
		f := chfixture.Event{EventID: fmt.Sprintf("e%d", i), AppID: "shop", EventTime: at, ReceivedAt: at, Name: "REQUEST_RESPONSE",
			SessionID: fmt.Sprintf("session-%04d-%s", i, strings.Repeat("x", 8)), UserID: "ann", Channel: "web",
			RawQuery: fmt.Sprintf("it's query %d \\ of ann", i), Extra: "{}"}
		f.AddTo(b)
	}
	if err := s.InsertEvents(ctx, b); err != nil {
		t.Fatal(err)
	}
	got, err := Forget(ctx, s, Request{AppID: "shop", UserID: "ann"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Sessions != n || got.Queries != n || got.Mutations < 4 {
		t.Errorf("forgotten %+v: want %d sessions and queries over more than one statement each", got, n)
	}
	if rows := forgetState(t, s, ""); len(rows["events"])+len(rows["sessions"])+len(rows["query_counts_daily"])+len(rows["user_queries"]) != 0 {
		t.Errorf("rows left: %v", rows)
	}
}

func TestTopLevelUserID(t *testing.T) {
	for _, tc := range []struct{ event, want string }{
		{`{"userId":"ann"}`, "ann"},
		{` { "type" : "X" , "userId" : "ann" } `, "ann"},
		{`{"payload":{"userId":"ann"},"userId":"bob"}`, "bob"},
		{`{"payload":{"userId":"ann"}}`, ""},
		{`{"userId":"an\u006e","x":"cut sho`, "ann"},
		{`{"x":"cut sho`, ""},
		{`{"userId":42}`, ""},
		{`["userId","ann"]`, ""},
		{`not json`, ""},
	} {
		if got := topLevelUserID(tc.event); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.event, got, tc.want)
		}
	}
}

func TestInLists(t *testing.T) {
	long := strings.Repeat("v", maxListBytes/2)
	for _, tc := range []struct {
		name   string
		values []string
		want   []string
	}{
		{"one", []string{"a"}, []string{"x IN ('a')"}},
		{"quoted", []string{`it's`, `a\b`}, []string{`x IN ('it\'s', 'a\\b')`}},
		{"split", []string{long, long, "b"}, []string{"x IN ('" + long + "')", "x IN ('" + long + "', 'b')"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := inLists("x IN ", tc.values); !slices.Equal(got, tc.want) {
				t.Errorf("%.200q, want %.200q", got, tc.want)
			}
		})
	}
}

// openOn opens a store on one server of a cluster.
func openOn(t *testing.T, c *devclickhouse.Cluster, s *devclickhouse.Server, db string) *chstore.Store {
	t.Helper()
	st, err := chstore.Open(context.Background(), chstore.Config{Addrs: []string{s.Addr()}, Database: db, Cluster: c.Name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestForgetUserOnACluster forgets a user through the Distributed tables
// of a 2×2 cluster: the rows go from every replica of every shard, the
// other user's stay.
func TestForgetUserOnACluster(t *testing.T) {
	c := devclickhouse.StartClusterForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs := openOn(t, c, c.Shards[1][0], "default")
	if _, err := cs.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	writeForgetRows(t, cs)
	tables := []string{"events_local", "quarantine_local", "sessions_local", "user_queries_local", "query_counts_daily_local", "query_sources_local", "unanswered_daily_local", "gap_daily_local"}
	for i := range tables {
		tables[i] = "default." + tables[i]
	}
	if err := c.SyncReplicas(ctx, tables...); err != nil {
		t.Fatal(err)
	}
	before, after := forgetWant()
	if got := forgetState(t, cs, ""); !reflect.DeepEqual(got, before) {
		t.Fatalf("rows written:\n%v\nwant\n%v", got, before)
	}
	got, err := Forget(ctx, cs, Request{AppID: "shop", UserID: "ann"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := wantForgotten(false)
	want.Mutations = 8
	// Rows are counted through the Distributed tables: the unsharded
	// tables' rows of a query or session are on each shard holding one of
	// its events.
	if got.Sessions != want.Sessions || got.Queries != want.Queries || got.Quarantined != want.Quarantined || got.Mutations != want.Mutations {
		t.Errorf("forgotten %+v, want %+v", got, want)
	}
	if rows := forgetState(t, cs, ""); !reflect.DeepEqual(rows, after) {
		t.Errorf("rows left through the Distributed tables:\n%v\nwant\n%v", rows, after)
	}
	// Each replica holds none of ann's rows of shop, and its shard's
	// partner the same rows as it.
	for i, shard := range c.Shards {
		var first map[string][]string
		for j, srv := range shard {
			rows := forgetState(t, openOn(t, c, srv, "default"), "_local")
			for table, values := range rows {
				for _, v := range values {
					if strings.HasPrefix(v, "shop/ann/") || v == "shop/s-a" || v == "shop/my secret plan?" || v == "shop/qa1" || v == "shop/qa2" {
						t.Errorf("%s: %s still holds %s", devclickhouse.ReplicaName(i, j), table, v)
					}
				}
			}
			if j == 0 {
				first = rows
			} else if !reflect.DeepEqual(rows, first) {
				t.Errorf("%s holds %v, its partner %v", devclickhouse.ReplicaName(i, j), rows, first)
			}
		}
	}
}

// TestForgetUserOnModernClickHouse runs the statements that forget a user
// on a ClickHouse 26 engine (chDB) holding the same rows as an 18.16
// server: the query finding the user's quarantined events, and the
// mutations, planned on the 18.16 server.
func TestForgetUserOnModernClickHouse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	old := chfixture.Migrated(t, nil)
	writeForgetRows(t, old)
	p, err := planForget(ctx, old, "shop", "ann")
	if err != nil {
		t.Fatal(err)
	}
	modern := chfixture.ModernMigrated(ctx, t, chschema.Options{Database: "default"})
	b, q := forgetRows()
	chfixture.InsertModern(ctx, t, modern, "default", b, q)
	before, after := forgetWant()
	if got := modernForgetState(ctx, t, modern); !reflect.DeepEqual(got, before) {
		t.Fatalf("rows written:\n%v\nwant\n%v", got, before)
	}

	sql, err := quarantineCandidates("default.quarantine", "shop", "ann")
	if err != nil {
		t.Fatal(err)
	}
	res, err := modern.Query(ctx, sql)
	if err != nil {
		t.Fatalf("%v\n%s", err, sql)
	}
	var quarantined []string
	for _, r := range res.Rows {
		if topLevelUserID(fmt.Sprint(r[1])) == "ann" {
			quarantined = append(quarantined, fmt.Sprint(r[0]))
		}
	}
	slices.Sort(quarantined)
	if !slices.Equal(quarantined, p.quarantined) {
		t.Errorf("quarantined events of ann: %v, 18.16 finds %v", quarantined, p.quarantined)
	}

	// Mutations return at once unless told to wait.
	if err := modern.Exec(ctx, "SET mutations_sync = 1"); err != nil {
		t.Fatal(err)
	}
	for _, d := range p.deletions() {
		for _, w := range d.wheres {
			st := deleteStatement("default."+d.table, w)
			if err := modern.Exec(ctx, st); err != nil {
				t.Fatalf("%v\n%s", err, st)
			}
		}
	}
	if got := modernForgetState(ctx, t, modern); !reflect.DeepEqual(got, after) {
		t.Errorf("rows left:\n%v\nwant\n%v", got, after)
	}
}
