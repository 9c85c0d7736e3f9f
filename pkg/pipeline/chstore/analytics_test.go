package chstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/analyticsdoc"
	"github.com/assistantcms/cms/internal/chfixture"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
)

// docQueries returns the SQL blocks of docs/analytics.md by heading.
func docQueries(t *testing.T) map[string]string {
	t.Helper()
	qs, err := analyticsdoc.Queries("../../../docs/analytics.md")
	if err != nil {
		t.Fatal(err)
	}
	return qs
}

func TestAnalystQueries(t *testing.T) {
	analystQueries(t, migrated(t), func() {})
}

// analystQueries writes the analysts' rows to s, runs every query of
// docs/analytics.md once written has returned, and checks the results; it
// returns them by heading.
func analystQueries(t *testing.T, s *chstore.Store, written func()) map[string][][]string {
	t.Helper()
	ctx := context.Background()
	t0, batches, quarantine := chfixture.AnalystRows()
	for _, b := range batches {
		if err := s.InsertEvents(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.InsertQuarantine(ctx, quarantine); err != nil {
		t.Fatal(err)
	}
	written()

	day := t0.Format("2006-01-02")
	want := map[string]string{
		"Conversations per day":                    day + "T00:00:00Z 2 2 3",
		"Fallback, knowledge-base and error rates": day + "T00:00:00Z 3 1 2 1 0.333 0.667 0.333 0.733",
		"Top intents, with low-confidence matches": "OrderStatus 2 1 0.733",
		"Top unanswered questions":                 "blah blah 1 1|where is my order 1 1",
		"Unanswered questions by reason": "blah blah 1 1 " + t0.Add(2*time.Second).Format(time.RFC3339) + " " + t0.Add(2*time.Second).Format(time.RFC3339) +
			"|where is my order 1 1 " + t0.Add(4*time.Second).Format(time.RFC3339) + " " + t0.Add(4*time.Second).Format(time.RFC3339),
		"Sessions": "session-1 u1 web " + t0.Format(time.RFC3339) + " " + t0.Add(3*time.Second).Format(time.RFC3339) + " 4 2 [Fallback LaunchRequest OrderStatus] OrderStatus error|" +
			"session-2 u2 sms " + t0.Add(4*time.Second).Format(time.RFC3339) + " " + t0.Add(5*time.Second).Format(time.RFC3339) + " 2 1 [OrderStatus] OrderStatus error",
		"Where conversations end":              "OrderStatus error 2",
		"A user's history":                     "",
		"Events per day, per app and channel":  day + "T00:00:00Z demo-app sms 2|" + day + "T00:00:00Z demo-app web 4",
		"Daily active users and sessions":      day + "T00:00:00Z 2 2",
		"Top intents":                          "OrderStatus 2 0.65",
		"Unanswered or low-confidence queries": "blah blah 1 <nil>|where is my order 1 0.4",
		"Error rate by handler":                "OrderStatus 1 4 0.25|Fallback 0 1 0|LaunchRequest 0 1 0",
		"A session's transcript":               "",
		"Every query asked, as counted":        "where is my order 2|blah blah 1",
		"Suggestable queries (what HISTORICAL suggestions are drawn from)": "where is my order 2 1 1 1|blah blah 1 1 1 1",
		"Knowledge-base turns":                 day + "T00:00:00Z 3 2 7 1",
		"Errors by message":                    `ERROR HandlerError boom 1 [{"file":"index.js"}]|LambdaErrorEvent Lambda Finished boom 1 `,
		"Turns by tag":                         "orders 2|kb 1|status 1",
		"Quarantined events by reason":         "too_large  2 " + t0.Format(time.RFC3339) + " " + t0.Add(2*time.Second).Format(time.RFC3339) + "|type_not_allowed type 1 " + t0.Add(time.Second).Format(time.RFC3339) + " " + t0.Add(time.Second).Format(time.RFC3339),
		"Quarantined events not yet recovered": t0.Format(time.RFC3339) + " q-1 too_large  m|" + t0.Add(time.Second).Format(time.RFC3339) + " q-2 type_not_allowed type m",
	}
	queries := docQueries(t)
	if len(queries) != len(want) {
		t.Fatalf("docs/analytics.md has %d queries, the test knows %d", len(queries), len(want))
	}
	results := map[string][][]string{}
	for heading, sql := range queries {
		t.Run(heading, func(t *testing.T) {
			exp, ok := want[heading]
			if !ok {
				t.Fatalf("no expectation for %q", heading)
			}
			got := chfixture.Query(t, s, sql)
			results[heading] = got
			switch heading {
			case "A session's transcript":
				if len(got) != 4 || got[1][2] != "Where is my order" || got[2][1] != "REQUEST_RESPONSE" || got[3][1] != "HandlerError" {
					t.Errorf("transcript %v", got)
				}
				return
			case "A user's history":
				if len(got) != 4 || got[0][1] != "session-1" || got[1][3] != "Where is my order" || got[3][2] != "HandlerError" {
					t.Errorf("history %v", got)
				}
				return
			}
			lines := make([]string, len(got))
			for i, r := range got {
				lines[i] = strings.Join(r, " ")
			}
			if g := strings.Join(lines, "|"); g != exp {
				t.Errorf("got  %s\nwant %s", g, exp)
			}
		})
	}
	return results
}
