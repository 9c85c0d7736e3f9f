package deploy_test

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/analyticsdoc"
	"github.com/assistantcms/cms/internal/demotraffic"
	"github.com/assistantcms/cms/internal/localstack"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
)

// busySessions are the sessions keepBusy adds to the demo traffic's: one
// session of launches, by a user the demo traffic does not have.
const busySessions = 1

// checkDocumentedQueries runs every query of docs/analytics.md on the
// stack's ClickHouse once the traffic sent through the one address is
// written, and holds each answer to what ingest accepted: the rollups'
// counts to the demo traffic's own tally of its turns, and the raw-table
// queries to their rollup counterparts. It fails on a documented query it
// does not check.
func checkDocumentedQueries(ctx context.Context, t *testing.T, st *localstack.Stack, sent demotraffic.TurnStats) {
	queries, err := analyticsdoc.Queries("../docs/analytics.md")
	if err != nil {
		t.Fatal(err)
	}
	s, err := chstore.Open(ctx, chstore.Config{Addrs: []string{st.ClickHouse}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := func(t *testing.T, heading string) []map[string]string {
		t.Helper()
		sql, ok := queries[heading]
		if !ok {
			t.Fatalf("docs/analytics.md has no query %q", heading)
		}
		return rowsOf(ctx, t, s, sql)
	}
	if sent.Fallback == 0 || sent.Failed == 0 || sent.KnowledgeBase == 0 || sent.LowConfidence == 0 {
		t.Fatalf("the demo traffic lacks a kind of turn the queries count: %+v", sent)
	}
	turns := sent.Answered + sent.Fallback
	// The rollups have every turn once the consumer has written them.
	waitFor(t, 60*time.Second, "the rollups to count every accepted turn", func() bool {
		return sumOf(run(t, "Conversations per day"), "turn_count") == turns
	})

	checks := map[string]func(t *testing.T, rows []map[string]string){
		"Conversations per day": func(t *testing.T, rows []map[string]string) {
			expect(t, "conversations", sumOf(rows, "conversation_count"), sent.Sessions+busySessions)
			expect(t, "users", sumOf(rows, "user_count"), sent.Users+busySessions)
		},
		"Fallback, knowledge-base and error rates": func(t *testing.T, rows []map[string]string) {
			expect(t, "turns", sumOf(rows, "turn_count"), turns)
			expect(t, "fallback turns", sumOf(rows, "fallback_count"), sent.Fallback)
			expect(t, "knowledge-base turns", sumOf(rows, "knowledge_base_count"), sent.KnowledgeBase)
			expect(t, "errors", sumOf(rows, "error_count"), sent.Failed)
			if len(rows) == 1 && turns > 0 {
				rate, _ := strconv.ParseFloat(rows[0]["fallback_rate"], 64)
				if want := float64(sent.Fallback) / float64(turns); fmt.Sprintf("%.4f", rate) != fmt.Sprintf("%.4f", want) {
					t.Errorf("fallback rate %v, want %v", rate, want)
				}
			}
		},
		"Top intents, with low-confidence matches": func(t *testing.T, rows []map[string]string) {
			low := int64(0)
			for _, r := range rows {
				expect(t, "turns matched to "+r["intent_id"], atoi(t, r["matched"]), sent.ByIntent[r["intent_id"]])
				low += atoi(t, r["low_confidence"])
			}
			if len(rows) == 0 || len(rows) < min(20, len(sent.ByIntent)) {
				t.Errorf("%d intents listed, %d matched", len(rows), len(sent.ByIntent))
			}
			if len(rows) == len(sent.ByIntent) {
				expect(t, "low-confidence turns", low, sent.LowConfidence)
			}
		},
		"Top unanswered questions": func(t *testing.T, rows []map[string]string) {
			got := map[string]int64{}
			for _, r := range rows {
				got[r["query"]] = atoi(t, r["times"])
			}
			if len(sent.Unanswered) <= 50 && !maps.Equal(got, sent.Unanswered) {
				t.Errorf("unanswered questions %v, sent %v", got, sent.Unanswered)
			}
		},
		"Unanswered questions by reason": func(t *testing.T, rows []map[string]string) {
			// Every fallback and low-confidence question, as often as
			// sent; knowledge-base turns that found nothing may add more.
			got := map[string]int64{}
			for _, r := range rows {
				got[r["query"]] = atoi(t, r["times"])
			}
			for q, n := range sent.Unanswered {
				if len(sent.Unanswered) <= 50 && got[q] != n {
					t.Errorf("unanswered questions by reason: %q asked %d times, sent %d", q, got[q], n)
				}
			}
		},
		"Sessions": func(t *testing.T, rows []map[string]string) {
			if want := min(100, int(sent.Sessions+busySessions)); len(rows) != want {
				t.Errorf("%d sessions listed, want %d", len(rows), want)
			}
			for _, r := range rows {
				if atoi(t, r["event_count"]) < 1 || !strings.HasPrefix(r["handlers_visited"], "[") {
					t.Errorf("session %v", r)
				}
			}
		},
		"Where conversations end": func(t *testing.T, rows []map[string]string) {
			// Every session ends somewhere. Which turn was last is not
			// compared: this server keeps event times to the second, and
			// the demo traffic's turns are milliseconds apart.
			total := int64(0)
			for _, r := range rows {
				total += atoi(t, r["session_count"])
				if o := r["ended_with"]; o != "answered" && o != "fallback" && o != "error" && (o != "" || r["left_at"] != "LaunchRequest") {
					t.Errorf("sessions ending %v", r)
				}
			}
			expect(t, "sessions", total, sent.Sessions+busySessions)
		},
	}
	// The raw-table queries answer what their rollup counterparts do, or
	// what the traffic holds.
	rawChecks := map[string]func(t *testing.T, rows []map[string]string){
		"Events per day, per app and channel": func(t *testing.T, rows []map[string]string) {
			if sumOf(rows, "events") < sent.Sessions+3*(turns+sent.Failed) {
				t.Errorf("events per day %v, fewer than the demo traffic's", rows)
			}
		},
		"Daily active users and sessions": func(t *testing.T, rows []map[string]string) {
			expect(t, "sessions", sumOf(rows, "sessions"), sent.Sessions+busySessions)
			expect(t, "users", sumOf(rows, "users"), sent.Users+busySessions)
		},
		"Top intents": func(t *testing.T, rows []map[string]string) {
			for _, r := range rows {
				expect(t, "requests of "+r["intent_id"], atoi(t, r["requests"]), sent.ByIntent[r["intent_id"]])
			}
		},
		"Unanswered or low-confidence queries": func(t *testing.T, rows []map[string]string) {
			for _, r := range rows {
				if q := r["query"]; sent.Unanswered[q] > 0 {
					expect(t, "times "+q+" went unanswered", atoi(t, r["times"]), sent.Unanswered[q])
				}
			}
		},
		"Error rate by handler": func(t *testing.T, rows []map[string]string) {
			expect(t, "errors", sumOf(rows, "errors"), sent.Failed)
		},
		"Every query asked, as counted":                                    nonEmpty,
		"Suggestable queries (what HISTORICAL suggestions are drawn from)": nonEmpty,
		"Knowledge-base turns": func(t *testing.T, rows []map[string]string) {
			expect(t, "turns", sumOf(rows, "turns"), turns)
			expect(t, "knowledge-base turns", sumOf(rows, "knowledge_base_turns"), sent.KnowledgeBase)
		},
		"Errors by message": func(t *testing.T, rows []map[string]string) {
			// A failed turn sends an ERROR and a LambdaErrorEvent.
			expect(t, "errors and failed turns", sumOf(rows, "times"), 2*sent.Failed)
		},
		"Turns by tag": func(t *testing.T, rows []map[string]string) {
			if len(rows) != 0 {
				t.Errorf("turns by tag %v; the demo traffic sends no tags", rows)
			}
		},
		"Quarantined events by reason": func(t *testing.T, rows []map[string]string) {
			if len(rows) != 1 || rows[0]["reason"] != rejectedReason {
				t.Errorf("quarantine by reason %v, want one row of %s", rows, rejectedReason)
			}
		},
		"Quarantined events not yet recovered": func(t *testing.T, rows []map[string]string) {
			if len(rows) != 1 || rows[0]["reason"] != rejectedReason {
				t.Errorf("quarantined events %v, want the one refused", rows)
			}
		},
	}
	maps.Copy(checks, rawChecks)
	// The transcript and history queries name a session and a user of the
	// traffic instead of the examples'.
	var session, user string
	if err := s.Conn().QueryRow(s.Context(ctx), "SELECT session_id, any(user_id) FROM events WHERE app_id = 'demo-app' "+
		"AND name = 'REQUEST_RESPONSE' GROUP BY session_id ORDER BY count() DESC, session_id LIMIT 1").Scan(&session, &user); err != nil {
		t.Fatal(err)
	}
	exact := func(where string) int64 {
		var n uint64
		if err := s.Conn().QueryRow(s.Context(ctx), "SELECT uniqExact(event_id) FROM events WHERE app_id = 'demo-app' AND "+where).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return int64(n)
	}
	// The demo traffic's channel is web-chat.
	channel := func(heading string) string {
		return strings.Replace(queries[heading], "channel = 'web'", "channel = 'web-chat'", 1)
	}
	rewritten := map[string]string{
		"A session's transcript":        strings.Replace(queries["A session's transcript"], "'session-1'", "'"+session+"'", 1),
		"A user's history":              strings.Replace(queries["A user's history"], "'u1'", "'"+user+"'", 1),
		"Every query asked, as counted": channel("Every query asked, as counted"),
		"Suggestable queries (what HISTORICAL suggestions are drawn from)": channel("Suggestable queries (what HISTORICAL suggestions are drawn from)"),
	}
	checks["A session's transcript"] = func(t *testing.T, rows []map[string]string) {
		expect(t, "events in the transcript", int64(len(rows)), exact("session_id = '"+session+"'"))
	}
	checks["A user's history"] = func(t *testing.T, rows []map[string]string) {
		expect(t, "events in the history", int64(len(rows)), exact("user_id = '"+user+"'"))
	}

	for heading, sql := range queries {
		t.Run(heading, func(t *testing.T) {
			check, ok := checks[heading]
			if !ok {
				t.Fatalf("docs/analytics.md has a query this test does not check")
			}
			if r, ok := rewritten[heading]; ok {
				if r == sql {
					t.Fatalf("the example's session, user or channel is not in the query any more:\n%s", sql)
				}
				sql = r
			}
			check(t, rowsOf(ctx, t, s, sql))
		})
	}
}

// rowsOf runs sql and returns its rows as maps of column name to value
// formatted by %v.
func rowsOf(ctx context.Context, t *testing.T, s *chstore.Store, sql string) []map[string]string {
	t.Helper()
	names, values, err := analyticsdoc.Query(s.Context(ctx), s.Conn(), sql)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]map[string]string, len(values))
	for i, vals := range values {
		out[i] = map[string]string{}
		for j, v := range vals {
			out[i][names[j]] = fmt.Sprint(v)
		}
	}
	return out
}

func sumOf(rows []map[string]string, column string) int64 {
	var n int64
	for _, r := range rows {
		v, _ := strconv.ParseInt(r[column], 10, 64)
		n += v
	}
	return n
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%q is not a count: %v", s, err)
	}
	return n
}

func expect(t *testing.T, what string, got, want int64) {
	t.Helper()
	if got != want {
		t.Errorf("%s: %d, want %d", what, got, want)
	}
}

func nonEmpty(t *testing.T, rows []map[string]string) {
	t.Helper()
	if len(rows) == 0 {
		t.Error("no rows")
	}
}
