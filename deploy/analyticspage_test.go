package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/localstack"
	"github.com/assistantcms/cms/pkg/operator/analyticspage"
	"github.com/assistantcms/cms/pkg/pipeline/analyticsreport"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
)

// rawDay is one day of an app counted from the events themselves, as the
// rollups count it.
type rawDay struct {
	Conversations, Users, Turns, FallbackTurns, KnowledgeBaseTurns, Errors uint64
}

// rawFigures counts day of appID exactly from the events table.
func rawFigures(ctx context.Context, t *testing.T, s *chstore.Store, appID, day string) rawDay {
	t.Helper()
	var r rawDay
	err := s.Conn().QueryRow(s.Context(ctx), "SELECT uniqExactIf(session_id, session_id != ''), uniqExactIf(user_id, user_id != ''), "+
		"uniqExactIf(event_id, name = 'REQUEST_RESPONSE'), "+
		"uniqExactIf(event_id, name = 'REQUEST_RESPONSE' AND (request_type = 'INPUT_UNKNOWN_REQUEST' OR (request_type = 'INTENT_REQUEST' AND intent_id = ''))), "+
		"uniqExactIf(event_id, name = 'REQUEST_RESPONSE' AND kb_used = 1), uniqExactIf(event_id, type = 'ERROR') "+
		"FROM events WHERE app_id = ? AND toDate(event_time) = toDate(?)", appID, day).
		Scan(&r.Conversations, &r.Users, &r.Turns, &r.FallbackTurns, &r.KnowledgeBaseTurns, &r.Errors)
	if err != nil {
		t.Fatalf("count the events of %s on %s: %v", appID, day, err)
	}
	return r
}

// analyticsData reads the page's report from base, the api's operator
// address.
func analyticsData(t *testing.T, base, appID string, days int) analyticsreport.Report {
	t.Helper()
	u := base + analyticspage.DataPath + "?app=" + appID + "&days=" + strconv.Itoa(days)
	r := do(t, http.MethodGet, u, "", "")
	if r.code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", u, r.code, r.body)
	}
	var rep analyticsreport.Report
	if err := json.Unmarshal([]byte(r.body), &rep); err != nil {
		t.Fatalf("GET %s: %v\n%s", u, err, r.body)
	}
	return rep
}

// checkAnalyticsPage reads the analytics of the demo traffic from base,
// the api's operator address, checks today's figures against the events in ClickHouse, and
// checks that the page draws every series that has data, and none that
// has not.
func checkAnalyticsPage(ctx context.Context, t *testing.T, st *localstack.Stack, base string) {
	t.Helper()
	const app = "demo-app"
	store, err := chstore.Open(ctx, chstore.Config{Addrs: []string{st.ClickHouse}})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()

	var rep analyticsreport.Report
	waitFor(t, 60*time.Second, "analytics data with turns", func() bool {
		rep = analyticsData(t, base, app, 1)
		return rep.Totals.Turns > 0
	})
	// Events may still be on their way to ClickHouse: the rollups are
	// written with them, so once both are read after the last insert they
	// agree.
	var today analyticsreport.DayFigures
	var raw rawDay
	defer func() {
		if t.Failed() {
			t.Logf("last read: rollups %+v, events %+v", today, raw)
		}
	}()
	waitFor(t, 60*time.Second, "today's rollups equal to the events' exact counts", func() bool {
		rep = analyticsData(t, base, app, 1)
		if len(rep.Days) != 1 {
			t.Fatalf("one day of analytics has days %+v", rep.Days)
		}
		today = rep.Days[0]
		raw = rawFigures(ctx, t, store, app, rep.To)
		return raw == rawDay{today.Conversations, today.Users, today.Turns, today.FallbackTurns, today.KnowledgeBaseTurns, today.Errors}
	})
	tt := rep.Totals
	if tt.Conversations != today.Conversations || tt.Users != today.Users || tt.Turns != today.Turns || tt.Errors != today.Errors {
		t.Errorf("one day's totals %+v differ from the day %+v", tt, today)
	}
	if rep.Sessions.Sessions != raw.Conversations {
		t.Errorf("sessions by outcome count %d, the events %d", rep.Sessions.Sessions, raw.Conversations)
	}
	var matched uint64
	for _, in := range rep.Intents {
		matched += in.Matched
	}
	if matched == 0 || matched > tt.Turns {
		t.Errorf("the top intents matched %d turns of %d", matched, tt.Turns)
	}
	month := analyticsData(t, base, app, 30)
	if len(month.Days) != 30 || month.Days[29] != today || month.Totals.Turns != tt.Turns {
		t.Errorf("30 days: %d days, the last %+v, %d turns; want today %+v last and %d turns", len(month.Days), month.Days[29], month.Totals.Turns, today, tt.Turns)
	}

	// Asserted drawn: every series the demo traffic always has (its mix
	// holds fallback, knowledge-base, low-confidence and failed turns;
	// checkDocumentedQueries requires each). Asserted against the report:
	// the session outcomes other than answered, which depend on which
	// turn came last, drawn when the report counts some and absent when it
	// counts none.
	var confident, low uint64
	for _, in := range rep.Intents {
		confident += in.Matched - min(in.LowConfidence, in.Matched)
		low += min(in.LowConfidence, in.Matched)
	}
	s := rep.Sessions
	series := []struct {
		name, color string
		n           uint64
		required    bool
	}{
		{"conversations", analyticspage.ColorConversations, tt.Conversations, true},
		{"users", analyticspage.ColorUsers, tt.Users, true},
		{"answered turns", analyticspage.ColorAnswered, tt.Turns - tt.FallbackTurns, true},
		{"fallback turns", analyticspage.ColorFallback, tt.FallbackTurns, true},
		{"knowledge-base turns", analyticspage.ColorKnowledgeBase, tt.KnowledgeBaseTurns, true},
		{"errors", analyticspage.ColorErrors, tt.Errors, true},
		{"confidently matched intents", analyticspage.ColorIntentMatched, confident, true},
		{"low-confidence intents", analyticspage.ColorIntentLowConfidence, low, true},
		{"unanswered questions", analyticspage.ColorUnanswered, uint64(len(rep.Unanswered)), true},
		{"sessions answered", analyticspage.ColorOutcomeAnswered, s.Answered, true},
		{"sessions fallen back", analyticspage.ColorOutcomeFallback, s.Fallback, false},
		{"sessions failed", analyticspage.ColorOutcomeError, s.Error, false},
		{"sessions without a turn", analyticspage.ColorOutcomeWithoutTurn, s.WithoutTurn, false},
		{"handlers where sessions ended", analyticspage.ColorEnding, uint64(len(s.Endings)), true},
	}
	// STATUS_SCREENSHOT keeps the status page's picture for the README;
	// ANALYTICS_SCREENSHOT=path.png keeps the 30 days' one.
	keep := os.Getenv("ANALYTICS_SCREENSHOT")
	for _, days := range []int{30, 1} {
		t.Setenv("STATUS_SCREENSHOT", "")
		if days == 30 && keep != "" {
			t.Setenv("STATUS_SCREENSHOT", keep)
		}
		shot := screenshot(ctx, t, base+analyticspage.Path+"?app="+app+"&days="+strconv.Itoa(days))
		for _, sr := range series {
			n := shaded(shot, rgb(t, sr.color))
			switch {
			case sr.required && sr.n == 0:
				t.Errorf("%d days: the report counts no %s", days, sr.name)
			case sr.n > 0 && n < 12:
				// The smallest bar drawn is 4 pixels by 7 or more.
				t.Errorf("%d days: %s: %d counted, %d pixels of their colour %s, want at least 12", days, sr.name, sr.n, n, sr.color)
			case sr.n == 0 && n > 0:
				t.Errorf("%d days: %s: none counted, yet %d pixels of their colour %s", days, sr.name, n, sr.color)
			}
		}
		if n := shaded(shot, [3]uint8{0x00, 0x00, 0xff}); n > 0 {
			t.Errorf("%d days: %d pixels shaded in a colour no series has", days, n)
		}
	}
}

// rgb parses a colour written #rrggbb.
func rgb(t *testing.T, c string) [3]uint8 {
	t.Helper()
	var out [3]uint8
	if _, err := fmt.Sscanf(c, "#%02x%02x%02x", &out[0], &out[1], &out[2]); err != nil {
		t.Fatalf("colour %q: %v", c, err)
	}
	return out
}
