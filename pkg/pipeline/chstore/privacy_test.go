package chstore_test

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
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	"github.com/assistantcms/cms/pkg/pipeline/queryhistory"
	chschema "github.com/assistantcms/cms/schemas/clickhouse"
)

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
	s, err := chstore.Open(ctx, chstore.Config{Addrs: []string{devclickhouse.StartForTest(t).Addr()}, StringColumns: stringColumns})
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
	pattern, earlier := sqlLiteral(chschema.PrivatePattern()), sqlLiteral(earlierPattern)
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
		var b chstore.EventBatch
		for i, q := range append(append([]string{}, ordinary...), personal...) {
			for u := range 5 {
				chfixture.Event{EventID: fmt.Sprintf("%s-%d-%d", batch, i, u), AppID: "app-1", EventTime: at, ReceivedAt: at,
					Type: "AnalyticsEvent", Name: "REQUEST_RESPONSE", RequestType: "INPUT_UNKNOWN_REQUEST", RawQuery: q, Channel: "web",
					UserID: fmt.Sprintf("user-%d", u), SessionID: fmt.Sprintf("%s-session-%d", batch, u),
					TokenID: "token-1", ClientNetwork: fmt.Sprintf("10.0.%d.0/24", u)}.AddTo(&b)
			}
		}
		insert := s.InsertEvents
		if batch == "before" {
			insert = s.InsertEventsBeforeArrivalRank
		}
		if err := insert(ctx, &b); err != nil {
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
	if applied, err := s.Migrate(ctx); err != nil || !slices.Equal(applied, []int{12, 13, 14}) {
		t.Errorf("applied %v, %v; want [12 13 14]", applied, err)
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

	top, err := queryhistory.TopQueries(ctx, s, "app-1", "web", 10, queryhistory.Suggestable{MinUsers: queryhistory.DefaultMinUsers, Days: 90})
	if err != nil {
		t.Fatal(err)
	}
	if len(top) != len(ordinary) || top[0] != (queryhistory.QueryCount{Query: "where is my order", Asked: 10}) {
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
	// Migration 13 makes every view again over the new events table;
	// migration 14 adds the gaps'.
	if want := []string{"app_daily_mv13", "gap_daily_mv", "intent_daily_mv13", "query_counts_daily_mv13", "query_sources_mv13", "sessions_mv13",
		"unanswered_daily_mv13", "user_queries_mv13"}; !slices.Equal(views, want) {
		t.Errorf("materialized views %v, want %v", views, want)
	}
}

// sqlLiteral quotes s as the migrations write a string literal.
func sqlLiteral(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}
