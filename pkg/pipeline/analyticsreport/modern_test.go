package analyticsreport

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/chfixture"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	chschema "github.com/assistantcms/cms/schemas/clickhouse"
)

// TestReadsOnCurrentClickHouse runs the gap inbox's and the
// conversations' statements on a ClickHouse 26 engine (chDB), over the
// schema rendered for it and the same rows as on the 18.16 server, and
// checks that both answer the same.
func TestReadsOnCurrentClickHouse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	old := chfixture.Migrated(t, nil)
	modern := chfixture.ModernMigrated(ctx, t, chschema.Options{Database: "default"})

	today := time.Now().UTC().Truncate(24 * time.Hour)
	at := func(days, minute int) time.Time {
		return today.AddDate(0, 0, days).Add(time.Duration(minute) * time.Minute)
	}
	var b chstore.EventBatch
	n := 0
	turn := func(session, user, query, request, intent string, confidence *float32, kb bool, when time.Time) {
		n++
		f := chfixture.Event{EventID: fmt.Sprint("m", n), AppID: "shop", OrganizationID: "o", EventTime: when, ReceivedAt: when,
			Type: "AnalyticsEvent", Name: "REQUEST_RESPONSE", SessionID: session, UserID: user, Channel: "web", RawQuery: query,
			DisplayText: "answer to " + query, SelectedHandler: "H", RequestType: request, IntentID: intent, MatchConfidence: confidence,
			KBUsed: kb, Offset: uint64(n), Extra: "{}"}
		f.AddTo(&b)
	}
	turn("s1", "u1", "do you sell skateboards", "INPUT_UNKNOWN_REQUEST", "", nil, false, at(0, 1))
	turn("s1", "u1", "when are you open", "INTENT_REQUEST", "Hours", chfixture.Confidence(0.3), false, at(0, 2))
	turn("s2", "u2", "do you sell skateboards", "INPUT_UNKNOWN_REQUEST", "", nil, false, at(-1, 3))
	turn("s2", "u2", "opening times", "INTENT_REQUEST", "Hours", chfixture.Confidence(0.7), false, at(-1, 4))
	turn("s3", "u3", "skateboards available?", "INTENT_REQUEST", "KB", nil, true, at(-10, 5))
	turn("s3", "u3", "do you sell skateboards", "INPUT_UNKNOWN_REQUEST", "", nil, false, at(-10, 6))
	if err := old.InsertEvents(ctx, &b); err != nil {
		t.Fatal(err)
	}
	chfixture.InsertModern(ctx, t, modern, "default", &b, nil)

	type statement struct {
		name string
		sql  string
		args []any
	}
	var statements []statement
	for _, g := range []struct {
		days      int
		threshold float64
	}{{30, 0.5}, {7, 0.5}, {7, 0.8}} {
		sql, args, err := gapsSQL(old.Table, GapQuery{AppID: "shop", From: today.AddDate(0, 0, 1-g.days), To: today, LowConfidence: g.threshold, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		statements = append(statements, statement{fmt.Sprintf("gaps of %d days below %v", g.days, g.threshold), sql, args})
	}
	first := SessionsQuery{AppID: "shop", From: today.AddDate(0, 0, -29), To: today, Limit: 2}
	sql, args := sessionsSQL(old.Table, first)
	statements = append(statements, statement{"sessions", sql, args})
	next := first
	next.AfterStart, next.AfterSession = at(-1, 3), "s2"
	sql, args = sessionsSQL(old.Table, next)
	statements = append(statements, statement{"sessions, the next page", sql, args})
	sql, args = sessionDaysSQL(old.Table, "shop", "s2")
	statements = append(statements, statement{"a session's days", sql, args})
	sql, args = turnsSQL(old.Table, "shop", "s1", today, today, 0, 10)
	statements = append(statements, statement{"a conversation", sql, args})
	sql, args = turnsSQL(old.Table, "shop", "s1", today, today, 1, 1)
	statements = append(statements, statement{"a conversation's second page", sql, args})
	sql, args = samplesSQL(old.Table, "shop", "do you sell skateboards", today.AddDate(0, 0, -1))
	statements = append(statements, statement{"sample conversations", sql, args})

	for _, st := range statements {
		t.Run(st.name, func(t *testing.T) {
			sql, err := chfixture.Literal(st.sql, st.args...)
			if err != nil {
				t.Fatal(err)
			}
			want := chfixture.Query(t, old, sql)
			if len(want) == 0 {
				t.Fatalf("18.16 returned no rows:\n%s", sql)
			}
			res, err := modern.Query(ctx, sql)
			if err != nil {
				t.Fatalf("%v\n%s", err, sql)
			}
			if got := chfixture.ModernRows(t, res); !slices.EqualFunc(got, want, slices.Equal) {
				t.Errorf("ClickHouse 26 answers\n%q\n18.16 answers\n%q", got, want)
			}
		})
	}
}
