package chstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/analyticsdoc"
)

// fixture is a row of the events table, for tests.
type fixture struct {
	EventID, AppID, OrganizationID                     string
	EventTime, ReceivedAt                              time.Time
	Type, Name, SessionID, UserID, Channel, Platform   string
	SelectedHandler, CurrentHandler, Environment       string
	RequestType, IntentID, RawQuery, DisplayText, SSML string
	MatchConfidence                                    *float32
	DisplayCount                                       uint16
	Tags                                               []string
	ErrorMessage, ErrorStack, Message                  string
	KBUsed                                             bool
	KBDocuments, KBFAQs                                uint16
	Payload, Extra                                     string
	Partition                                          uint16
	Offset                                             uint64
	TimeSource                                         int8
	RuntimeTime                                        *time.Time
	TokenID, ClientNetwork                             string
}

func (f fixture) addTo(b *EventBatch) {
	i := b.AddRow()
	b.EventID[i], b.AppID[i], b.OrganizationID[i], b.EventTime[i], b.ReceivedAt[i] = f.EventID, f.AppID, f.OrganizationID, f.EventTime, f.ReceivedAt
	b.Type[i], b.Name[i], b.SessionID[i], b.UserID[i], b.Channel[i], b.Platform[i] = f.Type, f.Name, f.SessionID, f.UserID, f.Channel, f.Platform
	b.SelectedHandler[i], b.CurrentHandler[i], b.Environment[i] = f.SelectedHandler, f.CurrentHandler, f.Environment
	b.RequestType[i], b.IntentID[i], b.RawQuery[i], b.DisplayText[i], b.SSML[i] = f.RequestType, f.IntentID, f.RawQuery, f.DisplayText, f.SSML
	if f.MatchConfidence != nil {
		b.SetMatchConfidence(i, *f.MatchConfidence)
	}
	b.DisplayCount[i] = f.DisplayCount
	b.SetTags(i, f.Tags)
	b.ErrorMessage[i], b.ErrorStack[i], b.Message[i] = f.ErrorMessage, f.ErrorStack, f.Message
	if f.KBUsed {
		b.KBUsed[i] = 1
	}
	b.KBDocuments[i], b.KBFAQs[i] = f.KBDocuments, f.KBFAQs
	b.Payload[i], b.Extra[i], b.KafkaPartition[i], b.KafkaOffset[i] = f.Payload, f.Extra, f.Partition, f.Offset
	if f.TimeSource != 0 {
		b.EventTimeSource[i] = f.TimeSource
	}
	if f.RuntimeTime != nil {
		b.SetRuntimeTime(i, *f.RuntimeTime)
	}
	b.TokenID[i], b.ClientNetwork[i] = f.TokenID, f.ClientNetwork
}

// docQueries returns the SQL blocks of docs/analytics.md by heading.
func docQueries(t *testing.T) map[string]string {
	t.Helper()
	qs, err := analyticsdoc.Queries("../../../docs/analytics.md")
	if err != nil {
		t.Fatal(err)
	}
	return qs
}

// query runs sql and returns its rows with every value formatted by %v.
func query(t *testing.T, s *Store, sql string) [][]string {
	t.Helper()
	_, rows := queryColumns(t, s, sql)
	return rows
}

// queryColumns is query that returns the result's column names too.
func queryColumns(t *testing.T, s *Store, sql string) (names []string, out [][]string) {
	t.Helper()
	names, values, err := analyticsdoc.Query(s.Context(context.Background()), s.Conn(), sql)
	if err != nil {
		t.Fatal(err)
	}
	for _, vals := range values {
		row := make([]string, len(vals))
		for i, v := range vals {
			switch x := v.(type) {
			case time.Time:
				row[i] = x.UTC().Format(time.RFC3339)
			case float32, float64:
				row[i] = fmt.Sprintf("%.3g", x)
			default:
				row[i] = fmt.Sprint(x)
			}
		}
		out = append(out, row)
	}
	return names, out
}

func conf(f float32) *float32 { return &f }

// analystRows are the rows the analysts' queries are tested on, as the
// consumer writes them: two event batches (the second retries an event of
// the first) and quarantined events. t0 is today, 01:00 UTC.
func analystRows() (t0 time.Time, batches []*EventBatch, quarantine []QuarantineRow) {
	t0 = time.Now().UTC().Truncate(24 * time.Hour).Add(time.Hour)
	ev := func(id, session, user, channel, typ, name, handler string, at time.Duration) fixture {
		return fixture{EventID: id, AppID: "demo-app", OrganizationID: "o", EventTime: t0.Add(at), ReceivedAt: t0.Add(at),
			Type: typ, Name: name, SessionID: session, UserID: user, Channel: channel, SelectedHandler: handler, Extra: "{}",
			TokenID: "0123456789abcdef", ClientNetwork: "192.0.2.0/24"}
	}
	launch := ev("e1", "session-1", "u1", "web", "REQUEST", "LAUNCH_REQUEST", "LaunchRequest", 0)
	rr1 := ev("e2", "session-1", "u1", "web", "AnalyticsEvent", "REQUEST_RESPONSE", "OrderStatus", time.Second)
	rr1.RequestType, rr1.IntentID, rr1.RawQuery, rr1.MatchConfidence, rr1.DisplayText = "INTENT_REQUEST", "OrderStatus", "Where is my order", conf(0.9), "Soon."
	rr1.Tags = []string{"orders", "status"}
	unknown := ev("e3", "session-1", "u1", "web", "AnalyticsEvent", "REQUEST_RESPONSE", "Fallback", 2*time.Second)
	unknown.RequestType, unknown.RawQuery, unknown.DisplayText = "INPUT_UNKNOWN_REQUEST", "blah blah", "Sorry?"
	unknown.KBUsed, unknown.KBDocuments, unknown.KBFAQs, unknown.Tags = true, 10, 2, []string{"kb"}
	failure := ev("e4", "session-1", "u1", "web", "ERROR", "HandlerError", "OrderStatus", 3*time.Second)
	failure.ErrorMessage, failure.ErrorStack = "boom", `[{"file":"index.js"}]`
	rr2 := ev("e5", "session-2", "u2", "sms", "AnalyticsEvent", "REQUEST_RESPONSE", "OrderStatus", 4*time.Second)
	rr2.RequestType, rr2.IntentID, rr2.RawQuery, rr2.MatchConfidence = "INTENT_REQUEST", "OrderStatus", "where is my order", conf(0.4)
	rr2.KBUsed, rr2.KBDocuments, rr2.Tags = true, 4, []string{"orders"}
	finished := ev("e6", "session-2", "u2", "sms", "LambdaErrorEvent", "Lambda Finished", "OrderStatus", 5*time.Second)
	finished.ErrorMessage, finished.Message = "boom", "boom"
	first, retry := &EventBatch{}, &EventBatch{}
	for i, f := range []fixture{launch, rr1, unknown, failure, rr2, finished} {
		f.Offset = uint64(i)
		f.addTo(first)
	}
	rr1.Offset = 1
	rr1.addTo(retry) // rr1 twice, as a retry writes it
	quarantined := func(id, reason, field string, at time.Duration) QuarantineRow {
		return QuarantineRow{EventID: id, AppID: "demo-app", OrganizationID: "o", ReceivedAt: t0.Add(at),
			Reason: reason, Field: field, Message: "m", Errors: "[]", Event: "{}", EventBytes: 2}
	}
	// q-1 and q-2 wait; e5 was quarantined once and has been resubmitted.
	quarantine = []QuarantineRow{quarantined("q-1", "too_large", "", 0), quarantined("q-2", "type_not_allowed", "type", time.Second),
		quarantined("e5", "too_large", "", 2*time.Second)}
	return t0, []*EventBatch{first, retry}, quarantine
}

func TestAnalystQueries(t *testing.T) {
	analystQueries(t, migrated(t), func() {})
}

// analystQueries writes the analysts' rows to s, runs every query of
// docs/analytics.md once written has returned, and checks the results; it
// returns them by heading.
func analystQueries(t *testing.T, s *Store, written func()) map[string][][]string {
	t.Helper()
	ctx := context.Background()
	t0, batches, quarantine := analystRows()
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
			got := query(t, s, sql)
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
