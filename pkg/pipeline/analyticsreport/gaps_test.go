package analyticsreport

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/chfixture"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
)

func TestGaps(t *testing.T) {
	s := chfixture.Migrated(t, nil)
	ctx := context.Background()
	today := time.Now().UTC().Truncate(24 * time.Hour)
	at := func(days int, minute int) time.Time {
		return today.AddDate(0, 0, days).Add(time.Duration(minute) * time.Minute)
	}
	n := 0
	turn := func(app, user, query string, when time.Time) chfixture.Event {
		n++
		return chfixture.Event{EventID: fmt.Sprint("e", n), AppID: app, OrganizationID: "o", EventTime: when, ReceivedAt: when,
			Type: "AnalyticsEvent", Name: "REQUEST_RESPONSE", SessionID: "s-" + user, UserID: user, Channel: "web", RawQuery: query,
			RequestType: "INTENT_REQUEST", Offset: uint64(n), Extra: "{}"}
	}
	fallback := func(app, user, query string, when time.Time) chfixture.Event {
		f := turn(app, user, query, when)
		f.RequestType = "INPUT_UNKNOWN_REQUEST"
		return f
	}
	matched := func(user, query string, confidence float32, when time.Time) chfixture.Event {
		f := turn("demo-app", user, query, when)
		f.IntentID, f.MatchConfidence = "OpeningHours", chfixture.Confidence(confidence)
		return f
	}
	kbEmpty := turn("demo-app", "u5", "Skateboards  available?", at(0, 3))
	kbEmpty.IntentID, kbEmpty.KBUsed = "AskKnowledgeBase", true
	kbFound := turn("demo-app", "u6", "what is your address", at(0, 4))
	kbFound.IntentID, kbFound.KBUsed, kbFound.KBDocuments = "AskKnowledgeBase", true, 2
	var b chstore.EventBatch
	for _, f := range []chfixture.Event{
		fallback("demo-app", "u1", "Do you sell skateboards", at(0, 1)),
		fallback("demo-app", "u2", "do you sell skateboards", at(0, 2)),
		fallback("demo-app", "u1", "do you sell skateboards", at(-10, 0)),
		fallback("demo-app", "u1", "do you sell skateboards", at(-40, 0)), // before the range
		kbEmpty, kbFound,
		matched("u3", "when are you open", 0.3, at(-1, 0)),
		matched("u4", "opening times", 0.7, at(-2, 0)),
		matched("u4", "where is my order", 0.95, at(-2, 1)),
		fallback("demo-app", "u7", "call me on 5551234567", at(0, 5)),
		fallback("demo-app", "u9", strings.Repeat("long ", 101), at(0, 5)), // over 500 bytes
		matched("u9", "when do you close", 0.7, at(-1, 1)),                 // Float32 0.7 is in the band from 0.7
		matched("u9", "when do you open", 0.9, at(-1, 2)),                  // not kept: at 0.9
		fallback("other-app", "u8", "do you sell skateboards", at(0, 6)),
	} {
		f.AddTo(&b)
	}
	if err := s.InsertEvents(ctx, &b); err != nil {
		t.Fatal(err)
	}
	// The week before counts in a week's range too: the turn of ten days
	// ago is last week's, and not among the range's turns.
	skateboards := GapWording{Query: "do you sell skateboards", Asked: 2, Users: 2, FirstSeen: at(0, 1), LastSeen: at(0, 2), ThisWeek: 2, LastWeek: 1, Reason: "fallback"}
	available := GapWording{Query: "skateboards available?", Asked: 1, Users: 1, FirstSeen: at(0, 3), LastSeen: at(0, 3), ThisWeek: 1, Reason: "knowledge_base"}
	open := GapWording{Query: "when are you open", Asked: 1, Users: 1, FirstSeen: at(-1, 0), LastSeen: at(-1, 0), ThisWeek: 1, Reason: "low_confidence"}
	times := GapWording{Query: "opening times", Asked: 1, Users: 1, FirstSeen: at(-2, 0), LastSeen: at(-2, 0), ThisWeek: 1, Reason: "low_confidence"}
	closes := GapWording{Query: "when do you close", Asked: 1, Users: 1, FirstSeen: at(-1, 1), LastSeen: at(-1, 1), ThisWeek: 1, Reason: "low_confidence"}
	month := skateboards
	month.Asked, month.FirstSeen = 3, at(-10, 0)
	for _, tc := range []struct {
		name      string
		from      int
		threshold float64
		limit     int
		want      []GapWording
	}{
		{"a week, default threshold", -6, 0.5, 100, []GapWording{skateboards, available, open}},
		{"a month", -29, 0.5, 100, []GapWording{month, available, open}},
		{"a higher threshold", -6, 0.8, 100, []GapWording{skateboards, times, available, open, closes}},
		{"a threshold of 0.7", -6, 0.7, 100, []GapWording{skateboards, available, open}},
		{"the lowest threshold", -6, 0.05, 100, []GapWording{skateboards, available}},
		{"limited", -6, 0.5, 1, []GapWording{skateboards}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Gaps(ctx, s, GapQuery{AppID: "demo-app", From: today.AddDate(0, 0, tc.from), To: today, LowConfidence: tc.threshold, Limit: tc.limit})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("gaps\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
	for _, bad := range []float64{0, 0.33, 0.95, -0.5} {
		if _, err := Gaps(ctx, s, GapQuery{AppID: "demo-app", From: today, To: today, LowConfidence: bad, Limit: 10}); err == nil {
			t.Errorf("threshold %v accepted", bad)
		}
	}
}
