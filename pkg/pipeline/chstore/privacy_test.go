package chstore

import (
	"context"
	"fmt"
	"reflect"
	"slices"
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
	if fmt.Sprint(top) != "[{where is my order 12} {my order number is wrong 7} {gift cards 5}]" {
		t.Errorf("suggestable queries %v", top)
	}
	// Fewer users needed: opening hours too; a shorter window: not the
	// gift cards of a month ago.
	if top, err := s.TopQueries(ctx, "app-1", "web", 10, Suggestable{MinUsers: 4, Days: 7}); err != nil ||
		fmt.Sprint(top) != "[{opening hours 80} {where is my order 12} {my order number is wrong 7}]" {
		t.Errorf("with 4 users over 7 days: %v %v", top, err)
	}
	if top, err := s.TopQueries(ctx, "app-1", "web", 10, Suggestable{MinUsers: 1, Days: 365}); err != nil ||
		fmt.Sprint(top) != "[{opening hours 80} {store hours 27} {where is my order 12} {my order number is wrong 7} {gift cards 5}]" {
		t.Errorf("with 1 user over a year: %v %v", top, err)
	}
	if top, err := s.TopQueries(ctx, "app-1", "phone", 10, Suggestable{MinUsers: 9, Days: 1}); err != nil ||
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
		if _, err := s.BlockSuggestion(ctx, "app-1", channel, query, blocked); err != nil {
			t.Fatal(err)
		}
		written()
	}
	block("", "  GIFT   cards", true)
	block("phone", "where is my order", true)
	for _, tc := range []struct{ channel, want string }{{"web", "[{where is my order 12} {my order number is wrong 7}]"}, {"phone", "[]"}} {
		if top, err := s.TopQueries(ctx, "app-1", tc.channel, 10, Suggestable{MinUsers: DefaultMinUsers, Days: 90}); err != nil || fmt.Sprint(top) != tc.want {
			t.Errorf("blocked, on %s: %v %v, want %s", tc.channel, top, err, tc.want)
		}
	}
	// Another app's block is not this app's.
	if _, err := s.BlockSuggestion(ctx, "app-2", "", "where is my order", true); err != nil {
		t.Fatal(err)
	}
	block("", "gift cards", false)
	if top, err := s.TopQueries(ctx, "app-1", "web", 10, Suggestable{MinUsers: DefaultMinUsers, Days: 90}); err != nil || fmt.Sprint(top) != "[{where is my order 12} {my order number is wrong 7} {gift cards 5}]" {
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
	if len(top) != 3 {
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
					localName(o, "suggestion_blocks"), b, i+1)); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := top("web", Suggestable{MinUsers: DefaultMinUsers, Days: 90}), "[{where is my order 12} {my order number is wrong 7}]"; got != want {
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

// localName is the table holding the rows of table in layout o.
func localName(o chschema.Options, table string) string {
	if o.Cluster != "" {
		return table + chschema.LocalSuffix
	}
	return table
}

// earlierPattern is the personal-data pattern the views of migrations 10
// and 11 were made with by earlier builds. It refused the ordinary
// questions that only named a phone or an order number ("my phone is
// broken"), and versions, as dates.
const earlierPattern = `(?i)[^\s@]+@[^\s@]+|\bat\s+[a-z0-9-]+(?:\s+dot\s+[a-z0-9-]+)*\s+dot\s+[a-z]{2,}\b|[(\[{<]\s*(?:at|dot)\s*[)\]}>]|\bat\s+(?:gmail|googlemail|yahoo|hotmail|outlook|icloud|aol|gmx|protonmail|proton)\b|\bdot\s+(?:com|net|org|edu|gov|info|biz|io|co|uk|de|fr|nl|es|it|eu|us|ca|au)\b|\d{6,}|\+?\d(?:[\s().-]*\d){6,}|[a-z][a-z0-9+.-]*://|\bwww\.|\b[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}\b|\b\d{1,5}[a-z]?\s+(?:[a-z]+\s+){1,3}(?:street|st|str|strasse|road|rd|avenue|ave|lane|ln|boulevard|blvd|crescent)\b|\b\d{1,5}[a-z]?,?\s+(?:rue|via|calle|avenida|chemin)\s+[a-z]|\b[a-z]+(?:strasse|str|weg|gasse|allee)\.?\s+\d{1,4}[a-z]?\b|\bi live (?:at|on)\b|\b\d{1,4}[./-]\d{1,2}[./-]\d{2,4}\b|\b\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b,?\s+\d{2,4}\b|\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b\s+\d{1,2}(?:st|nd|rd|th)?,?\s+\d{2,4}\b|\b(?:born|date of birth|birth ?date|dob|d\.o\.b)\b[^0-9]{0,20}\d|\bmy (?:birthday|birth ?date|date of birth|dob)\b|\bmy (?:[a-z]+ )?(?:name|surname|address|email|e-mail|phone|number|mobile|postcode|post code|zip|zip code|iban|passport) (?:is|was)\b|\bmy name\x27?s\b|\b(?:i am|i\x27m|im) called\b|\bthis is [a-z]+ speaking\b`

// TestMigrationNarrowsThePrivateFilter upgrades a database whose views of
// asked queries filter with earlierPattern, with rows in it: migration 12
// replaces the views, so that the ordinary questions earlierPattern
// refused are counted, suggested and listed as unanswered from then on,
// personal data still is not, and no row written before is lost.
func TestMigrationNarrowsThePrivateFilter(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Config{Addrs: []string{startServer(t).Addr()}, StringColumns: stringColumns})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cctx := s.Context(ctx)
	migs, err := chschema.Render(s.Features(), chschema.Options{Database: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Conn().Exec(cctx, "CREATE TABLE schema_migrations (version UInt32, name String, applied_at DateTime('UTC')) ENGINE = ReplacingMergeTree ORDER BY version"); err != nil {
		t.Fatal(err)
	}
	pattern, earlier := quoteLiteral(chschema.PrivatePattern()), quoteLiteral(earlierPattern)
	replaced := 0
	for _, m := range migs {
		if m.Version > 11 {
			break
		}
		for _, st := range m.Statements {
			replaced += strings.Count(st, pattern)
			if err := s.Conn().Exec(cctx, strings.ReplaceAll(st, pattern, earlier)); err != nil {
				t.Fatalf("migration %d: %v", m.Version, err)
			}
		}
		insert(t, s, "INSERT INTO schema_migrations (version, name, applied_at)", uint32(m.Version), m.Name, time.Now().UTC())
	}
	if replaced == 0 {
		t.Fatal("migrations 1 to 11 do not filter with PrivatePattern")
	}

	refusedBefore := []string{"my phone is broken", "my order number is wrong", "my email is not verified", "version 1.2.30", "3 hour road trip"}
	ordinary := append([]string{"where is my order"}, refusedBefore...)
	personal := []string{"my name is jane doe", "my phone number is 555 123 4567", "i live at 12 baker street"}
	// ask writes each question as a turn not understood, asked by five
	// users, each in a session and from a network of their own.
	ask := func(batch string, at time.Time) {
		t.Helper()
		var b EventBatch
		for i, q := range append(append([]string{}, ordinary...), personal...) {
			for u := range 5 {
				fixture{EventID: fmt.Sprintf("%s-%d-%d", batch, i, u), AppID: "app-1", EventTime: at, ReceivedAt: at,
					Type: "AnalyticsEvent", Name: "REQUEST_RESPONSE", RequestType: "INPUT_UNKNOWN_REQUEST", RawQuery: q, Channel: "web",
					UserID: fmt.Sprintf("user-%d", u), SessionID: fmt.Sprintf("%s-session-%d", batch, u),
					TokenID: "token-1", ClientNetwork: fmt.Sprintf("10.0.%d.0/24", u)}.addTo(&b)
			}
		}
		if err := s.InsertEvents(ctx, &b); err != nil {
			t.Fatal(err)
		}
	}
	// kept returns, per table of asked queries, how often each query was
	// counted there: figures that merges do not change.
	kept := func() map[string]map[string]uint64 {
		t.Helper()
		out := map[string]map[string]uint64{}
		for table, sql := range map[string]string{
			"query_counts_daily": "SELECT query, sum(asked) FROM query_counts_daily GROUP BY query",
			"query_sources":      "SELECT query, countMerge(asked) FROM query_sources GROUP BY query",
			"user_queries":       "SELECT query, uniqExact(user_id) FROM user_queries GROUP BY query",
			"unanswered_daily":   "SELECT query, toUInt64(uniqMerge(asked)) FROM unanswered_daily GROUP BY query",
		} {
			rows, err := s.Conn().Query(cctx, sql)
			if err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
			out[table] = map[string]uint64{}
			for rows.Next() {
				var q string
				var n uint64
				if err := rows.Scan(&q, &n); err != nil {
					t.Fatal(err)
				}
				out[table][q] = n
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			rows.Close()
		}
		return out
	}

	now := time.Now().UTC()
	ask("before", now.Add(-24*time.Hour))
	before := kept()
	for table, counts := range before {
		if fmt.Sprint(counts) != "map[where is my order:5]" {
			t.Fatalf("with the earlier pattern, %s holds %v, want only where is my order, 5 times", table, counts)
		}
	}
	if applied, err := s.Migrate(ctx); err != nil || !slices.Equal(applied, []int{12}) {
		t.Errorf("applied %v, %v; want [12]", applied, err)
	}
	if after := kept(); !reflect.DeepEqual(after, before) {
		t.Errorf("the migration changed the rows: %v, was %v", after, before)
	}

	ask("after", now)
	after := kept()
	for table, counts := range after {
		want := map[string]uint64{"where is my order": 10}
		for _, q := range refusedBefore {
			want[q] = 5
		}
		if table == "user_queries" { // the same five users each time
			want["where is my order"] = 5
		}
		if !reflect.DeepEqual(counts, want) {
			t.Errorf("after the migration, %s holds %v, want %v", table, counts, want)
		}
	}
	// The questions the earlier pattern refused on the days before the
	// migration come back from the events, as docs/operating.md fills
	// them in.
	if err := s.Conn().Exec(cctx, "INSERT INTO query_counts_daily SELECT app_id, channel, toDate(event_time) AS day, query_normalized AS query, "+
		"toUInt64(1) AS asked FROM events WHERE query_normalized != '' AND NOT match(query_normalized, "+pattern+") "+
		"AND toDate(event_time) < (SELECT toDate(max(applied_at)) FROM schema_migrations WHERE version = 12) "+
		"AND (app_id, channel, toDate(event_time), query_normalized) NOT IN (SELECT app_id, channel, day, query FROM query_counts_daily)"); err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{}
	for _, q := range ordinary {
		want[q] = 10
	}
	if got := kept()["query_counts_daily"]; !reflect.DeepEqual(got, want) {
		t.Errorf("filled from the events, query_counts_daily holds %v, want %v", got, want)
	}

	top, err := s.TopQueries(ctx, "app-1", "web", 10, Suggestable{MinUsers: DefaultMinUsers, Days: 90})
	if err != nil {
		t.Fatal(err)
	}
	if len(top) != len(ordinary) || top[0] != (QueryCount{"where is my order", 10}) {
		t.Errorf("suggestable queries %v, want the %d ordinary ones", top, len(ordinary))
	}

	var views []string
	rows, err := s.Conn().Query(cctx, "SELECT name FROM system.tables WHERE database = 'default' AND engine = 'MaterializedView' ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		views = append(views, name)
	}
	if want := []string{"app_daily_mv", "intent_daily_mv", "query_counts_daily_mv12", "query_sources_mv12", "sessions_mv",
		"unanswered_daily_mv12", "user_queries_mv12"}; !slices.Equal(views, want) {
		t.Errorf("materialized views %v, want %v", views, want)
	}
}
