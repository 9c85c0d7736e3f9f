package chstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	chschema "github.com/assistantcms/cms/schemas/clickhouse"
)

// privacyRows are asked queries that test the rules of suggestion: who
// asked what, how often and when.
func privacyRows(now time.Time) *EventBatch {
	var evs EventBatch
	n := 0
	ask := func(query string, users, times int, at time.Time, channel string) {
		for u := range users {
			for range times {
				n++
				// Each user in a session of their own, from a network of
				// their own.
				user := fmt.Sprintf("user-%d", u)
				fixture{EventID: fmt.Sprintf("p-%d", n), AppID: "app-1", EventTime: at, ReceivedAt: now, Channel: channel,
					UserID: user, SessionID: fmt.Sprintf("session-%d", u), RawQuery: query,
					TokenID: "token-1", ClientNetwork: fmt.Sprintf("10.0.%d.0/24", u)}.addTo(&evs)
			}
		}
	}
	day := 24 * time.Hour
	ask("Where is my ORDER", 6, 2, now, "web")                 // popular: suggested
	ask("gift cards", 5, 1, now.Add(-30*day), "web")           // just enough users, within the window
	ask("opening hours", 4, 20, now, "web")                    // often, by too few users
	ask("store hours", 9, 3, now.Add(-100*day), "web")         // popular, but before the window
	ask("my email is John.Doe@Example.com", 8, 10, now, "web") // an email address
	ask("call me on +44 20 7946 0958", 8, 10, now, "web")      // a phone number
	ask("order 12345678", 8, 10, now, "web")                   // a long number
	ask("see https://shop.example/p?id=1", 8, 10, now, "web")  // a URL
	ask("is example.org down", 8, 10, now, "web")              // a host name
	ask("where is my order", 9, 1, now, "phone")               // another channel
	for i := range 12 {                                        // no user, session or source: never counted
		f := fixture{EventID: fmt.Sprintf("anon-%d", i), AppID: "app-1", EventTime: now, ReceivedAt: now, Channel: "web",
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
		f.addTo(&evs)
	}
	return &evs
}

// storedQueries returns the queries query_sources holds for the app.
func storedQueries(t *testing.T, s *Store) map[string]bool {
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
func checkSuggestable(t *testing.T, s *Store, written func()) {
	t.Helper()
	ctx := context.Background()
	top, err := s.TopQueries(ctx, "app-1", "web", 10, Suggestable{MinUsers: DefaultMinUsers, Days: 90})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(top) != "[{where is my order 12} {gift cards 5}]" {
		t.Errorf("suggestable queries %v", top)
	}
	// Fewer users needed: opening hours too; a shorter window: not the
	// gift cards of a month ago.
	if top, err := s.TopQueries(ctx, "app-1", "web", 10, Suggestable{MinUsers: 4, Days: 7}); err != nil ||
		fmt.Sprint(top) != "[{opening hours 80} {where is my order 12}]" {
		t.Errorf("with 4 users over 7 days: %v %v", top, err)
	}
	if top, err := s.TopQueries(ctx, "app-1", "web", 10, Suggestable{MinUsers: 1, Days: 365}); err != nil ||
		fmt.Sprint(top) != "[{opening hours 80} {store hours 27} {where is my order 12} {gift cards 5}]" {
		t.Errorf("with 1 user over a year: %v %v", top, err)
	}
	if top, err := s.TopQueries(ctx, "app-1", "phone", 10, Suggestable{MinUsers: 9, Days: 1}); err != nil ||
		fmt.Sprint(top) != "[{where is my order 9}]" {
		t.Errorf("another channel: %v %v", top, err)
	}
	stored := storedQueries(t, s)
	for _, q := range []string{"where is my order", "gift cards", "opening hours", "store hours"} {
		if !stored[q] {
			t.Errorf("%q not kept in query_sources: %v", q, stored)
		}
	}
	if len(stored) != 4 {
		t.Errorf("query_sources keeps %d queries, want 4 (none with personal data, none without a user, session or source): %v", len(stored), stored)
	}

	// Blocked on every channel as typed, and on the phone channel: each
	// holds where it was set.
	block := func(channel, query string, blocked bool) {
		t.Helper()
		if _, err := s.BlockSuggestion(ctx, "app-1", channel, query, blocked); err != nil {
			t.Fatal(err)
		}
		written()
	}
	block("", "  GIFT   cards", true)
	block("phone", "where is my order", true)
	for _, tc := range []struct{ channel, want string }{{"web", "[{where is my order 12}]"}, {"phone", "[]"}} {
		if top, err := s.TopQueries(ctx, "app-1", tc.channel, 10, Suggestable{MinUsers: DefaultMinUsers, Days: 90}); err != nil || fmt.Sprint(top) != tc.want {
			t.Errorf("blocked, on %s: %v %v, want %s", tc.channel, top, err, tc.want)
		}
	}
	// Another app's block is not this app's.
	if _, err := s.BlockSuggestion(ctx, "app-2", "", "where is my order", true); err != nil {
		t.Fatal(err)
	}
	block("", "gift cards", false)
	if top, err := s.TopQueries(ctx, "app-1", "web", 10, Suggestable{MinUsers: DefaultMinUsers, Days: 90}); err != nil || fmt.Sprint(top) != "[{where is my order 12} {gift cards 5}]" {
		t.Errorf("let back: %v %v", top, err)
	}
	list, err := s.BlockedSuggestions(ctx, "app-1")
	if err != nil || len(list) != 1 || list[0].Channel != "phone" || list[0].Query != "where is my order" {
		t.Errorf("blocked in app-1: %+v %v", list, err)
	}
	if all, err := s.BlockedSuggestions(ctx, ""); err != nil || len(all) != 2 {
		t.Errorf("blocked in every app: %+v %v", all, err)
	}
	block("phone", "where is my order", false)
}

func TestSuggestableQueries(t *testing.T) {
	s := migrated(t)
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
	top, err := s.TopQueries(ctx, "app-1", "web", 10, Suggestable{MinUsers: DefaultMinUsers, Days: 90})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range top {
		if strings.Contains(q.Query, "@") {
			t.Errorf("suggested %q", q.Query)
		}
	}
	if len(top) != 2 {
		t.Errorf("suggestable queries %v", top)
	}

	for _, bad := range []Suggestable{{MinUsers: 0, Days: 90}, {MinUsers: 5, Days: 0}, {MinUsers: 5, MinSources: -1, Days: 90}} {
		if _, err := s.TopQueries(ctx, "app-1", "web", 10, bad); err == nil {
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
			modern := modernMigrated(ctx, t, o)
			evs := privacyRows(time.Now().UTC())
			rows, err := eventRows(evs)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := modern.Insert(ctx, "default.events", strings.Split(eventColumns, ", "), "JSONCompactEachRow", rows); err != nil || n != evs.Len() {
				t.Fatalf("insert: %d rows of %d, %v", n, evs.Len(), err)
			}
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
				{"web", Suggestable{MinUsers: DefaultMinUsers, Days: 90}, "[{where is my order 12} {gift cards 5}]"},
				{"web", Suggestable{MinUsers: 4, Days: 7}, "[{opening hours 80} {where is my order 12}]"},
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
					localName(o, "suggestion_blocks"), b, i+1)); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := top("web", Suggestable{MinUsers: DefaultMinUsers, Days: 90}), "[{where is my order 12}]"; got != want {
				t.Errorf("with blocks, on web: %s, want %s", got, want)
			}
			if got := top("phone", Suggestable{MinUsers: 9, Days: 1}); got != "[]" {
				t.Errorf("with blocks, on phone: %s", got)
			}
			if err := modern.Exec(ctx, "TRUNCATE TABLE default."+localName(o, "suggestion_blocks")); err != nil {
				t.Fatal(err)
			}
			// The TTL keeps HistoryDays of days: with the default, the
			// questions of 100 days ago are gone once merged, with 365
			// kept.
			if err := modern.Exec(ctx, "OPTIMIZE TABLE default."+localName(o, "query_sources")+" FINAL"); err != nil {
				t.Fatal(err)
			}
			want := "[{opening hours 80} {where is my order 12} {gift cards 5}]"
			if o.HistoryDays == 365 {
				want = "[{opening hours 80} {store hours 27} {where is my order 12} {gift cards 5}]"
			}
			if got := top("web", Suggestable{MinUsers: 1, Days: 365}); got != want {
				t.Errorf("over a year after the TTL: %s, want %s", got, want)
			}
			res, err := modern.Query(ctx, "SELECT DISTINCT query FROM default.query_sources WHERE match(query, '@|\\\\d{6}|://|\\\\.(com|org|example)') OR query = 'anonymous question'")
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Rows) != 0 {
				t.Errorf("query_sources keeps %v", res.Rows)
			}
		})
	}
}

// localName is the table holding the rows of table in layout o.
func localName(o chschema.Options, table string) string {
	if o.Cluster != "" {
		return table + chschema.LocalSuffix
	}
	return table
}
