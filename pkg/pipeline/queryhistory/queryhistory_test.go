package queryhistory

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/chfixture"
	"github.com/assistantcms/cms/internal/devclickhouse"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	chschema "github.com/assistantcms/cms/schemas/clickhouse"
)

// privacyRows are asked queries that test the rules of suggestion: who
// asked what, how often and when.
func privacyRows(now time.Time) *chstore.EventBatch {
	var evs chstore.EventBatch
	n := 0
	ask := func(query string, users, times int, at time.Time, channel string) {
		for u := range users {
			for range times {
				n++
				// Each user in a session of their own, from a network of
				// their own.
				user := fmt.Sprintf("user-%d", u)
				chfixture.Event{EventID: fmt.Sprintf("p-%d", n), AppID: "app-1", EventTime: at, ReceivedAt: now, Channel: channel,
					UserID: user, SessionID: fmt.Sprintf("session-%d", u), RawQuery: query,
					TokenID: "token-1", ClientNetwork: fmt.Sprintf("10.0.%d.0/24", u)}.AddTo(&evs)
			}
		}
	}
	day := 24 * time.Hour
	ask("Where is my ORDER", 6, 2, now, "web")                 // popular: suggested
	ask("my order number is wrong", 7, 1, now, "web")          // names a number, gives none: suggested
	ask("gift cards", 5, 1, now.Add(-30*day), "web")           // just enough users, within the window
	ask("opening hours", 4, 20, now, "web")                    // often, by too few users
	ask("store hours", 9, 3, now.Add(-100*day), "web")         // popular, but before the window
	ask("my email is John.Doe@Example.com", 8, 10, now, "web") // an email address
	ask("call me on +44 20 7946 0958", 8, 10, now, "web")      // a phone number
	ask("my phone number is 555 0100", 8, 10, now, "web")      // a number given as one's own
	ask("order 12345678", 8, 10, now, "web")                   // a long number
	ask("see https://shop.example/p?id=1", 8, 10, now, "web")  // a URL
	ask("is example.org down", 8, 10, now, "web")              // a host name
	ask("i live at 12 baker street", 8, 10, now, "web")        // a street address
	ask("born on 12/03/1990", 8, 10, now, "web")               // a date of birth
	ask("my name is jane doe", 8, 10, now, "web")              // a name given as such
	ask("where is my order", 9, 1, now, "phone")               // another channel
	for i := range 12 {                                        // no user, session or source: never counted
		f := chfixture.Event{EventID: fmt.Sprintf("anon-%d", i), AppID: "app-1", EventTime: now, ReceivedAt: now, Channel: "web",
			UserID: fmt.Sprintf("u%d", i), SessionID: fmt.Sprintf("s%d", i), TokenID: "token-1", ClientNetwork: fmt.Sprintf("10.1.%d.0/24", i)}
		switch i % 3 {
		case 0:
			f.UserID = ""
		case 1:
			f.SessionID = ""
		default:
			f.TokenID, f.ClientNetwork = "", ""
		}
		f.RawQuery = "anonymous question"
		f.AddTo(&evs)
	}
	return &evs
}

// storedQueries returns the queries query_sources holds for the app.
func storedQueries(t *testing.T, s *chstore.Store) map[string]bool {
	t.Helper()
	rows, err := s.Conn().Query(s.Context(context.Background()), "SELECT DISTINCT query FROM query_sources WHERE app_id = 'app-1'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]bool{}
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			t.Fatal(err)
		}
		got[q] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// checkSuggestable checks what TopQueries suggests of privacyRows and
// what query_sources keeps of them, then with texts blocked and let back;
// written runs once blocks are written (a cluster syncs its replicas).
func checkSuggestable(t *testing.T, s *chstore.Store, written func()) {
	t.Helper()
	ctx := context.Background()
	top, err := TopQueries(ctx, s, "app-1", "web", 10, Suggestable{MinUsers: DefaultMinUsers, Days: 90})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(top) != "[{where is my order 12} {my order number is wrong 7} {gift cards 5}]" {
		t.Errorf("suggestable queries %v", top)
	}
	// Fewer users needed: opening hours too; a shorter window: not the
	// gift cards of a month ago.
	if top, err := TopQueries(ctx, s, "app-1", "web", 10, Suggestable{MinUsers: 4, Days: 7}); err != nil ||
		fmt.Sprint(top) != "[{opening hours 80} {where is my order 12} {my order number is wrong 7}]" {
		t.Errorf("with 4 users over 7 days: %v %v", top, err)
	}
	if top, err := TopQueries(ctx, s, "app-1", "web", 10, Suggestable{MinUsers: 1, Days: 365}); err != nil ||
		fmt.Sprint(top) != "[{opening hours 80} {store hours 27} {where is my order 12} {my order number is wrong 7} {gift cards 5}]" {
		t.Errorf("with 1 user over a year: %v %v", top, err)
	}
	if top, err := TopQueries(ctx, s, "app-1", "phone", 10, Suggestable{MinUsers: 9, Days: 1}); err != nil ||
		fmt.Sprint(top) != "[{where is my order 9}]" {
		t.Errorf("another channel: %v %v", top, err)
	}
	stored := storedQueries(t, s)
	for _, q := range []string{"where is my order", "my order number is wrong", "gift cards", "opening hours", "store hours"} {
		if !stored[q] {
			t.Errorf("%q not kept in query_sources: %v", q, stored)
		}
	}
	if len(stored) != 5 {
		t.Errorf("query_sources keeps %d queries, want 5 (none with personal data, none without a user, session or source): %v", len(stored), stored)
	}

	// Blocked on every channel as typed, and on the phone channel: each
	// holds where it was set.
	block := func(channel, query string, blocked bool) {
		t.Helper()
		if _, err := BlockSuggestion(ctx, s, "app-1", channel, query, blocked); err != nil {
			t.Fatal(err)
		}
		written()
	}
	block("", "  GIFT   cards", true)
	block("phone", "where is my order", true)
	for _, tc := range []struct{ channel, want string }{{"web", "[{where is my order 12} {my order number is wrong 7}]"}, {"phone", "[]"}} {
		if top, err := TopQueries(ctx, s, "app-1", tc.channel, 10, Suggestable{MinUsers: DefaultMinUsers, Days: 90}); err != nil || fmt.Sprint(top) != tc.want {
			t.Errorf("blocked, on %s: %v %v, want %s", tc.channel, top, err, tc.want)
		}
	}
	// Another app's block is not this app's.
	if _, err := BlockSuggestion(ctx, s, "app-2", "", "where is my order", true); err != nil {
		t.Fatal(err)
	}
	block("", "gift cards", false)
	if top, err := TopQueries(ctx, s, "app-1", "web", 10, Suggestable{MinUsers: DefaultMinUsers, Days: 90}); err != nil || fmt.Sprint(top) != "[{where is my order 12} {my order number is wrong 7} {gift cards 5}]" {
		t.Errorf("let back: %v %v", top, err)
	}
	list, err := BlockedSuggestions(ctx, s, "app-1")
	if err != nil || len(list) != 1 || list[0].Channel != "phone" || list[0].Query != "where is my order" {
		t.Errorf("blocked in app-1: %+v %v", list, err)
	}
	if all, err := BlockedSuggestions(ctx, s, ""); err != nil || len(all) != 2 {
		t.Errorf("blocked in every app: %+v %v", all, err)
	}
	block("phone", "where is my order", false)
}

func TestSuggestableQueries(t *testing.T) {
	s := chfixture.Migrated(t, nil)
	ctx := context.Background()
	if err := s.InsertEvents(ctx, privacyRows(time.Now().UTC())); err != nil {
		t.Fatal(err)
	}
	checkSuggestable(t, s, func() {})

	// Rows that reached query_sources another way are still not
	// suggested when they look private.
	if err := s.Conn().Exec(s.Context(ctx), "INSERT INTO query_sources SELECT 'app-1', 'web', today(), 'write to me at jo@example.com', "+
		"countState(), uniqState(toString(number)), uniqState(toString(number)), uniqState('t', toString(number)) FROM numbers(20)"); err != nil {
		t.Fatal(err)
	}
	if !storedQueries(t, s)["write to me at jo@example.com"] {
		t.Fatal("the row written straight to query_sources is not there")
	}
	top, err := TopQueries(ctx, s, "app-1", "web", 10, Suggestable{MinUsers: DefaultMinUsers, Days: 90})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range top {
		if strings.Contains(q.Query, "@") {
			t.Errorf("suggested %q", q.Query)
		}
	}
	if len(top) != 3 {
		t.Errorf("suggestable queries %v", top)
	}

	for _, bad := range []Suggestable{{MinUsers: 0, Days: 90}, {MinUsers: 5, Days: 0}, {MinUsers: 5, MinSources: -1, Days: 90}} {
		if _, err := TopQueries(ctx, s, "app-1", "web", 10, bad); err == nil {
			t.Errorf("TopQueries took %+v", bad)
		}
	}
}

// TestSuggestableQueriesOnModernClickHouse writes privacyRows through the
// consumer's column mapping to a ClickHouse 26 engine (chDB), on the
// single-server schema and through the cluster layout's Distributed
// tables, and runs TopQueries' statement there.
func TestSuggestableQueriesOnModernClickHouse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, o := range []chschema.Options{
		{Database: "default"},
		{Database: "default", Cluster: "cms", Unreplicated: true, HistoryDays: 365},
	} {
		t.Run(fmt.Sprintf("cluster %q", o.Cluster), func(t *testing.T) {
			modern := chfixture.ModernMigrated(ctx, t, o)
			chfixture.InsertModern(ctx, t, modern, "default", privacyRows(time.Now().UTC()), nil)
			top := func(channel string, r Suggestable) string {
				t.Helper()
				sql := topQueriesSQL("default")
				r = r.withDefaults()
				for _, arg := range []string{"'app-1'", "'" + channel + "'", fmt.Sprint(r.Days), "'app-1'", "'" + channel + "'",
					fmt.Sprint(r.MinUsers), fmt.Sprint(r.MinUsers), fmt.Sprint(r.MinSources), "10"} {
					sql = strings.Replace(sql, "?", arg, 1)
				}
				res, err := modern.Query(ctx, sql)
				if err != nil {
					t.Fatalf("%v\n%s", err, sql)
				}
				var out []QueryCount
				for _, row := range res.Rows {
					n, err := strconv.ParseUint(fmt.Sprint(row[1]), 10, 64)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, QueryCount{fmt.Sprint(row[0]), n})
				}
				return fmt.Sprint(out)
			}
			for _, tc := range []struct {
				channel string
				r       Suggestable
				want    string
			}{
				{"web", Suggestable{MinUsers: DefaultMinUsers, Days: 90}, "[{where is my order 12} {my order number is wrong 7} {gift cards 5}]"},
				{"web", Suggestable{MinUsers: 4, Days: 7}, "[{opening hours 80} {where is my order 12} {my order number is wrong 7}]"},
				{"phone", Suggestable{MinUsers: 9, Days: 1}, "[{where is my order 9}]"},
			} {
				if got := top(tc.channel, tc.r); got != tc.want {
					t.Errorf("%s %+v: %s, want %s", tc.channel, tc.r, got, tc.want)
				}
			}
			// Blocks, as BlockSuggestion writes them: the latest version
			// of a text on a channel (or on every one) decides.
			for i, b := range []string{"'', 'gift cards', 1", "'phone', 'where is my order', 1", "'web', 'where is my order', 1", "'web', 'where is my order', 0"} {
				if err := modern.Exec(ctx, fmt.Sprintf("INSERT INTO default.%s (app_id, channel, query, blocked, version, changed_at) VALUES ('app-1', %s, %d, now())",
					chfixture.LocalName(o, "suggestion_blocks"), b, i+1)); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := top("web", Suggestable{MinUsers: DefaultMinUsers, Days: 90}), "[{where is my order 12} {my order number is wrong 7}]"; got != want {
				t.Errorf("with blocks, on web: %s, want %s", got, want)
			}
			if got := top("phone", Suggestable{MinUsers: 9, Days: 1}); got != "[]" {
				t.Errorf("with blocks, on phone: %s", got)
			}
			if err := modern.Exec(ctx, "TRUNCATE TABLE default."+chfixture.LocalName(o, "suggestion_blocks")); err != nil {
				t.Fatal(err)
			}
			// The TTL keeps HistoryDays of days: with the default, the
			// questions of 100 days ago are gone once merged, with 365
			// kept.
			if err := modern.Exec(ctx, "OPTIMIZE TABLE default."+chfixture.LocalName(o, "query_sources")+" FINAL"); err != nil {
				t.Fatal(err)
			}
			want := "[{opening hours 80} {where is my order 12} {my order number is wrong 7} {gift cards 5}]"
			if o.HistoryDays == 365 {
				want = "[{opening hours 80} {store hours 27} {where is my order 12} {my order number is wrong 7} {gift cards 5}]"
			}
			if got := top("web", Suggestable{MinUsers: 1, Days: 365}); got != want {
				t.Errorf("over a year after the TTL: %s, want %s", got, want)
			}
			res, err := modern.Query(ctx, "SELECT DISTINCT query FROM default.query_sources WHERE match(query, '@|\\\\d{6}|://|\\\\.(com|org|example)') OR query IN ('anonymous question', "+
				"'my phone number is 555 0100', 'i live at 12 baker street', 'born on 12/03/1990', 'my name is jane doe')")
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Rows) != 0 {
				t.Errorf("query_sources keeps %v", res.Rows)
			}
		})
	}
}

// TestClusterSuggestableQueries counts suggestions through the
// Distributed tables of a 2×2 cluster: distinct users over every shard, a
// user's questions being spread over them by event ID.
func TestClusterSuggestableQueries(t *testing.T) {
	c := devclickhouse.StartClusterForTest(t)
	ctx := context.Background()
	s, err := chstore.Open(ctx, chstore.Config{Addrs: []string{c.Shards[0][1].Addr()}, Cluster: c.Name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.InsertEvents(ctx, privacyRows(time.Now().UTC())); err != nil {
		t.Fatal(err)
	}
	if err := c.SyncReplicas(ctx, "default.query_sources_local"); err != nil {
		t.Fatal(err)
	}
	checkSuggestable(t, s, func() {
		if err := c.SyncReplicas(ctx, "default.suggestion_blocks_local"); err != nil {
			t.Fatal(err)
		}
	})
}
