package analyticsreport

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/chfixture"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
)

var (
	benchDays  = flag.Int("gap-days", 30, "days of turns BenchmarkGapInbox writes")
	benchTurns = flag.Int("gap-turns", 1_000_000, "turns a day BenchmarkGapInbox writes")
)

// writeBusyApp writes, server-side, turns a day for days ending today
// into the events of app "big", through the materialized views as the
// consumer's inserts go: a tenth not understood, and of the rest most
// matched with confidence, a tenth between 0.5 and 0.9 and a tenth below
// 0.5. Questions follow a long tail over 200,000 wordings (a wording's
// rank is log-uniform), asked by 150,000 users.
func writeBusyApp(ctx context.Context, tb testing.TB, s *chstore.Store, days, turns int) {
	tb.Helper()
	today := time.Now().UTC().Truncate(24 * time.Hour)
	for d := range days {
		day := today.AddDate(0, 0, -d)
		start := time.Now()
		seed := d * turns
		err := s.Conn().Exec(s.Context(ctx), fmt.Sprintf(`INSERT INTO %s (event_id, app_id, organization_id, event_time, received_at, type, name,
			session_id, user_id, channel, request_type, intent_id, raw_query, match_confidence, output_display_text, arrival_rank)
			SELECT concat('b%d-', toString(number)), 'big', 'o', toDateTime(%d + intDiv(number * 86400, %d), 'UTC'), toDateTime(%d + intDiv(number * 86400, %d), 'UTC'),
				'AnalyticsEvent', 'REQUEST_RESPONSE',
				concat('s%d-', toString(intHash32(number + %d) %% 150000)), concat('u', toString(intHash32(number + %d) %% 150000)), 'web',
				if(number %% 10 = 0, 'INPUT_UNKNOWN_REQUEST', 'INTENT_REQUEST'), if(number %% 10 = 0, '', concat('intent', toString(number %% 50))),
				concat('question ', toString(toUInt32(exp(log(200000) * (intHash32(number + %d + 1) / 4294967296.))))),
				if(number %% 10 = 0, NULL, toFloat32(multiIf(number %% 10 = 1, 0.3, number %% 10 = 2, 0.7, 0.95))),
				'an answer', 18446744073709551615 - number
			FROM system.numbers LIMIT %d`,
			s.Table("events"), d, day.Unix(), turns, day.Unix(), turns, d, seed, seed, seed, turns))
		if err != nil {
			tb.Fatalf("write day %d: %v", d, err)
		}
		tb.Logf("day %d: %d turns written in %v", d, turns, time.Since(start).Round(time.Millisecond))
	}
}

// BenchmarkGapInbox reads the gap inbox of an app with a million turns a
// day (-gap-turns) for 30 days (-gap-days) from gap_daily on a real
// ClickHouse server: the 5,000 wordings asked by most users, and a
// week's. It reports the rollup's rows and the wordings read.
func BenchmarkGapInbox(b *testing.B) {
	s := chfixture.Migrated(b, nil)
	ctx := context.Background()
	writeBusyApp(ctx, b, s, *benchDays, *benchTurns)
	if err := s.Conn().Exec(s.Context(ctx), "OPTIMIZE TABLE "+s.Table("gap_daily")+" FINAL"); err != nil {
		b.Fatal(err)
	}
	var rows uint64
	if err := s.Conn().QueryRow(s.Context(ctx), "SELECT count() FROM "+s.Table("gap_daily")+" WHERE app_id = 'big'").Scan(&rows); err != nil {
		b.Fatal(err)
	}
	to := time.Now().UTC()
	for _, days := range []int{30, 7} {
		b.Run(fmt.Sprintf("%ddays", days), func(b *testing.B) {
			var n int
			for b.Loop() {
				w, err := Gaps(ctx, s, GapQuery{AppID: "big", From: to.AddDate(0, 0, 1-days), To: to, LowConfidence: 0.5, Limit: 5000})
				if err != nil {
					b.Fatal(err)
				}
				n = len(w)
			}
			b.ReportMetric(float64(rows), "rollup-rows")
			b.ReportMetric(float64(n), "wordings")
		})
	}
}
