package analyticsreport

import (
	"context"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/chfixture"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
)

// reportRows are the analysts' rows (today) with more around them: a
// session of theirs that began yesterday, two more sessions yesterday
// (one low-confidence turn, one launch alone), a turn three days ago,
// outside the range the test reads, and another app's turn today.
func reportRows(t0 time.Time) *chstore.EventBatch {
	ev := func(id, app, session, user, name, handler string, at time.Duration) chfixture.Event {
		f := chfixture.Event{EventID: id, AppID: app, OrganizationID: "o", EventTime: t0.Add(at), ReceivedAt: t0.Add(at),
			Type: "AnalyticsEvent", Name: name, SessionID: session, UserID: user, Channel: "web", SelectedHandler: handler, Extra: "{}"}
		if name == "LAUNCH_REQUEST" {
			f.Type = "REQUEST"
		}
		return f
	}
	turn := func(f chfixture.Event, intent, query string, confidence float32) chfixture.Event {
		f.RequestType, f.IntentID, f.RawQuery, f.MatchConfidence = "INTENT_REQUEST", intent, query, chfixture.Confidence(confidence)
		return f
	}
	b := &chstore.EventBatch{}
	for i, f := range []chfixture.Event{
		turn(ev("y1", "demo-app", "session-1", "u1", "REQUEST_RESPONSE", "OpeningHours", -2*time.Hour), "OpeningHours", "When are you open", 0.8),
		turn(ev("y2", "demo-app", "session-3", "u3", "REQUEST_RESPONSE", "OpeningHours", -3*time.Hour), "OpeningHours", "Opening  times", 0.3),
		ev("y3", "demo-app", "session-4", "u4", "LAUNCH_REQUEST", "LaunchRequest", -4*time.Hour),
		turn(ev("old", "demo-app", "session-5", "u5", "REQUEST_RESPONSE", "OrderStatus", -72*time.Hour), "OrderStatus", "order", 0.1),
		turn(ev("x1", "other-app", "session-x", "ux", "REQUEST_RESPONSE", "Other", time.Minute), "Other", "other", 0.2),
	} {
		f.Offset = uint64(100 + i)
		f.AddTo(b)
	}
	return b
}

func TestRead(t *testing.T) {
	s := chfixture.Migrated(t, nil)
	ctx := context.Background()
	t0, batches, _ := chfixture.AnalystRows()
	for _, b := range append(batches, reportRows(t0)) {
		if err := s.InsertEvents(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	// A question that looks like a phone number, in the rollup as if
	// written some other way: the report leaves it out all the same.
	if err := s.Conn().Exec(s.Context(ctx), "INSERT INTO unanswered_daily SELECT 'demo-app', 'web', today(), 'call me on 5551234567', "+
		"uniqState(toString(number)), uniqIfState(toString(number), 1) FROM (SELECT number FROM system.numbers LIMIT 9)"); err != nil {
		t.Fatal(err)
	}

	today := t0.Truncate(24 * time.Hour)
	day := func(n int) string { return today.AddDate(0, 0, n).Format("2006-01-02") }
	got, err := Read(ctx, s, "demo-app", today.AddDate(0, 0, -2), today.Add(23*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	mean := func(v float64) *float64 { return &v }
	want := Report{
		AppID: "demo-app", From: day(-2), To: day(0),
		Days: []DayFigures{
			{Day: day(-2)},
			{Day: day(-1), Conversations: 3, Users: 3, Turns: 2},
			{Day: day(0), Conversations: 2, Users: 2, Turns: 3, FallbackTurns: 1, KnowledgeBaseTurns: 2, Errors: 1},
		},
		// session-1 and u1 were active on both days: once each.
		Totals: Totals{Conversations: 4, Users: 4, Turns: 5, FallbackTurns: 1, KnowledgeBaseTurns: 2, Errors: 1,
			FallbackRate: 0.2, ErrorRate: 0.2, KnowledgeBaseShare: 0.4, MeanConfidence: mean((0.9 + 0.9 + 0.4 + 0.8 + 0.3) / 5)},
		Intents: []IntentFigures{
			{Intent: "OpeningHours", Matched: 2, LowConfidence: 1, MeanConfidence: mean((0.8 + 0.3) / 2)},
			{Intent: "OrderStatus", Matched: 2, LowConfidence: 1, MeanConfidence: mean((0.9 + 0.9 + 0.4) / 3)},
		},
		Unanswered: []UnansweredQuestion{{"blah blah", 1, 1}, {"opening times", 1, 1}, {"where is my order", 1, 1}},
		Sessions: SessionOutcomes{
			Outcome: Outcome{Sessions: 4, Answered: 1, Error: 2, WithoutTurn: 1},
			Endings: []Ending{
				{Handler: "OrderStatus", Outcome: Outcome{Sessions: 2, Error: 2}},
				{Handler: "LaunchRequest", Outcome: Outcome{Sessions: 1, WithoutTurn: 1}},
				{Handler: "OpeningHours", Outcome: Outcome{Sessions: 1, Answered: 1}},
			},
		},
	}
	// Confidences are stored as Float32: compared to within that.
	for _, p := range [][2]**float64{{&got.Totals.MeanConfidence, &want.Totals.MeanConfidence},
		{&got.Intents[0].MeanConfidence, &want.Intents[0].MeanConfidence}, {&got.Intents[1].MeanConfidence, &want.Intents[1].MeanConfidence}} {
		if *p[0] == nil || math.Abs(**p[0]-**p[1]) > 1e-6 {
			t.Errorf("mean confidence %v, want %v", deref(*p[0]), **p[1])
			continue
		}
		*p[0] = *p[1]
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Errorf("report\n%s\nwant\n%s", g, w)
	}

	t.Run("one day", func(t *testing.T) {
		r, err := Read(ctx, s, "demo-app", today, today)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Days) != 1 || r.Days[0] != want.Days[2] || r.Totals.Conversations != 2 || r.Totals.Turns != 3 || r.Sessions.Sessions != 2 {
			t.Errorf("today alone: %+v", r)
		}
	})

	t.Run("an app without rows", func(t *testing.T) {
		// Quotes in the app ID are data, bound rather than spliced in.
		r, err := Read(ctx, s, "demo-app' OR '1' = '1", today.AddDate(0, 0, -1), today)
		if err != nil {
			t.Fatal(err)
		}
		empty := Report{AppID: "demo-app' OR '1' = '1", From: day(-1), To: day(0), Days: []DayFigures{{Day: day(-1)}, {Day: day(0)}}}
		if !reflect.DeepEqual(r, empty) {
			t.Errorf("report %+v, want %+v", r, empty)
		}
		if b, err := json.Marshal(r); err != nil {
			t.Errorf("an empty report does not encode: %v", err)
		} else if want := `"meanConfidence":null`; !json.Valid(b) || !strings.Contains(string(b), want) {
			t.Errorf("empty report %s: want %s", b, want)
		}
	})

	t.Run("apps", func(t *testing.T) {
		apps, err := Apps(ctx, s, today.AddDate(0, 0, -2), today, 10)
		if err != nil || !reflect.DeepEqual(apps, []string{"demo-app", "other-app"}) {
			t.Errorf("apps %v, %v", apps, err)
		}
		apps, err = Apps(ctx, s, today.AddDate(0, 0, -30), today.AddDate(0, 0, -5), 10)
		if err != nil || len(apps) != 0 {
			t.Errorf("apps a month ago %v, %v", apps, err)
		}
	})

	t.Run("a range that ends before it starts", func(t *testing.T) {
		if _, err := Read(ctx, s, "demo-app", today, today.AddDate(0, 0, -1)); err == nil {
			t.Error("no error")
		}
	})
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
