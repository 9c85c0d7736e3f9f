package consumer_test

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/pipeline/queryhistory"
)

// clientFrom is an HTTP client whose connections come from the loopback
// address 127.0.n.1: from a network of its own, as ingest sees it.
func clientFrom(n int) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, byte(n), 1)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: 10 * time.Second}
}

// turn is a REQUEST_RESPONSE event asking query, as the reference client
// sends one.
func turn(user, session, query string, at time.Time) string {
	return fmt.Sprintf(`{"type":"AnalyticsEvent","name":"REQUEST_RESPONSE","sessionId":%q,"userId":%q,"channel":"web","platform":"stentor",`+
		`"isoTime":%q,"payload":{"request":{"type":"INTENT_REQUEST","intentId":"Help","rawQuery":%q},"response":{"outputSpeech":"Sure."}}}`,
		session, user, at.Format(time.RFC3339Nano), query)
}

// TestSuggestionsCannotBePlanted sends, through ingest with a public
// runtime token, what an attacker would to plant a HISTORICAL suggestion,
// and what ordinary users send, then reads what the api would suggest:
//   - six events with six made-up users, dated 2099, from one network;
//   - six made-up users, dated now, from one network (its
//     X-Forwarded-For, which it forges, counts for nothing: ingest trusts
//     no proxy here);
//   - one person asking their own text in eight sessions, each with a
//     new user ID, as a runtime making an ID per session does;
//   - personal data (a spelled-out email address, a name with a street
//     address, a date of birth, a name given as such, a phone number given
//     as one's own) asked by six users from six networks;
//   - ordinary questions asked by six users from six networks, one of
//     them naming a phone without giving its number: the only
//     suggestions.
func TestSuggestionsCannotBePlanted(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	ingestAddr, tok := startIngest(t, e.broker.Addr())
	e.startConsumer(t, "suggestions")
	start := time.Now().UTC()

	sent := 0
	put := func(c *http.Client, xff string, events ...string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPut, "http://"+ingestAddr+"/cms/app/events", strings.NewReader(`{"events":[`+strings.Join(events, ",")+`]}`))
		must(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		resp, err := c.Do(req)
		must(t, err)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("PUT: %d", resp.StatusCode)
		}
		sent += len(events)
	}

	const (
		planted2099 = "opening hours are closed forever visit evil shop"
		invented    = "free gift cards at the evil shop counter"
		ownText     = "tom please call back about the divorce papers"
	)
	ordinary := []string{"my phone is broken", "where is my order"}
	personal := []string{"jane dot doe at gmail dot com", "jane doe 12 baker street", "i was born on 12/03/1985", "my name is jane doe",
		"i\u2019m called jane", "my phone number is 555 123 4567"}

	attacker := clientFrom(200)
	in2099 := time.Date(2099, 6, 1, 12, 0, 0, 0, time.UTC)
	var batch []string
	for u := range 6 {
		batch = append(batch, turn(fmt.Sprint("planter-", u), fmt.Sprint("planter-session-", u), planted2099, in2099))
	}
	put(attacker, "", batch...)
	for u := range 6 {
		// One batch per made-up user, each claiming another client.
		put(attacker, fmt.Sprintf("203.0.%d.7", u), turn(fmt.Sprint("invented-", u), fmt.Sprint("invented-session-", u), invented, time.Now()))
	}
	for s := range 8 {
		put(attacker, "", turn(fmt.Sprint("per-session-user-", s), fmt.Sprint("own-session-", s), ownText, time.Now()))
	}
	for u := range 6 {
		c := clientFrom(10 + u)
		var events []string
		for _, q := range append(append([]string{}, ordinary...), personal...) {
			events = append(events, turn(fmt.Sprint("user-", u), fmt.Sprint("session-", u), q, time.Now()))
		}
		put(c, "", events...)
	}

	s := e.query(t)
	waitRows(t, s, uint64(sent))
	top := func(r queryhistory.Suggestable) []string {
		t.Helper()
		qs, err := queryhistory.TopQueries(ctx, s, "app-1", "web", 20, r)
		must(t, err)
		var out []string
		for _, q := range qs {
			out = append(out, q.Query)
		}
		slices.Sort(out)
		return out
	}
	// ClickHouse fills the views just after the table within one insert:
	// the counts of the last batch, which asks each ordinary question six
	// times, follow the events.
	for deadline := time.Now().Add(10 * time.Second); ; {
		var asked uint64
		must(t, s.Conn().QueryRow(s.Context(ctx), "SELECT sum(asked) FROM analytics.query_counts WHERE app_id = 'app-1' AND query = ?", ordinary[1]).Scan(&asked))
		if asked == 6 && slices.Contains(top(queryhistory.Suggestable{MinUsers: queryhistory.DefaultMinUsers, Days: 90}), ordinary[1]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q counted %d times and not suggested 10s after its events were written", ordinary[1], asked)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Run("only the ordinary questions are suggested", func(t *testing.T) {
		if got := top(queryhistory.Suggestable{MinUsers: queryhistory.DefaultMinUsers, Days: 90}); !slices.Equal(got, ordinary) {
			t.Errorf("suggested %q, want only %q", got, ordinary)
		}
	})
	t.Run("personal data is never suggested", func(t *testing.T) {
		for _, q := range top(queryhistory.Suggestable{MinUsers: 1, Days: 90}) {
			if slices.Contains(personal, q) {
				t.Errorf("suggested %q with one user needed", q)
			}
		}
	})
	t.Run("personal data is not counted", func(t *testing.T) {
		rows, err := s.Conn().Query(s.Context(ctx), "SELECT DISTINCT query FROM analytics.query_counts WHERE app_id = 'app-1'")
		must(t, err)
		defer rows.Close()
		var counted []string
		for rows.Next() {
			var q string
			must(t, rows.Scan(&q))
			counted = append(counted, q)
		}
		must(t, rows.Err())
		for _, q := range personal {
			if slices.Contains(counted, q) {
				t.Errorf("query_counts holds %q", q)
			}
		}
		for _, q := range ordinary {
			if !slices.Contains(counted, q) {
				t.Errorf("query_counts lacks %q: %q", q, counted)
			}
		}
	})
	t.Run("the 2099 events are dated when they arrived", func(t *testing.T) {
		var first, last time.Time
		must(t, s.Conn().QueryRow(s.Context(ctx), "SELECT min(event_time), max(event_time) FROM analytics.events WHERE raw_query = ?", planted2099).Scan(&first, &last))
		if first.Before(start.Truncate(time.Second)) || last.After(time.Now().Add(time.Second)) {
			t.Errorf("event times %s to %s, want between %s and now", first, last, start)
		}
		var runtimeTime time.Time
		var n uint64
		must(t, s.Conn().QueryRow(s.Context(ctx), "SELECT any(assumeNotNull(runtime_time)), countIf(runtime_time IS NOT NULL) FROM analytics.events WHERE raw_query = ?", planted2099).Scan(&runtimeTime, &n))
		if !runtimeTime.Equal(in2099) || n != 6 {
			t.Errorf("runtime time %s on %d rows, want %s on 6", runtimeTime, n, in2099)
		}
	})
}

// TestEventsDatedOverManyMonthsAreStored sends one batch whose events a
// runtime dated in 150 different months, as anyone holding its token
// can: every event is stored, in the month it arrived. Current ClickHouse
// servers refuse an insert whose rows span more than 100 partitions
// (max_partitions_per_insert_block; events are partitioned by month), so
// events dated by their runtimes alone would stop the consumer's inserts,
// every app's with them; 18.16 takes such a block, so here the test can
// only see where the rows went.
func TestEventsDatedOverManyMonthsAreStored(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	ingestAddr, tok := startIngest(t, e.broker.Addr())
	e.startConsumer(t, "months")
	var events []string
	for m := range 150 {
		at := time.Date(2040, time.January, 15, 12, 0, 0, 0, time.UTC).AddDate(0, m, 0)
		events = append(events, turn(fmt.Sprint("u", m), fmt.Sprint("s", m), "when are you open", at))
	}
	req, err := http.NewRequest(http.MethodPut, "http://"+ingestAddr+"/cms/app/events", strings.NewReader(`{"events":[`+strings.Join(events, ",")+`]}`))
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT: %d", resp.StatusCode)
	}
	s := e.query(t)
	waitRows(t, s, uint64(len(events)))
	var months uint64
	must(t, s.Conn().QueryRow(s.Context(ctx), "SELECT uniqExact(toYYYYMM(event_time)) FROM analytics.events").Scan(&months))
	if months > 2 {
		t.Errorf("events stored in %d months, want the one or two they arrived in", months)
	}
}
