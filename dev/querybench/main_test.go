package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/devclickhouse"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
)

// TestQueryBenchSmall runs the benchmark at a tiny size against a real
// 18.16 server: both forms of each query answer the same, and the rollup
// reads fewer rows than the raw table.
func TestQueryBenchSmall(t *testing.T) {
	srv := devclickhouse.StartForTestWith(t, devclickhouse.Options{Config: queryLogConfig})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := chstore.Open(ctx, chstore.Config{Addrs: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep, err := benchmark(ctx, s, "default", options{events: 20000, chunk: 10000, runs: 1, days: 30})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rep.print(&out)
	t.Log(out.String())
	if err := rep.agreement(); err != nil {
		t.Fatal(err)
	}
	if n := len(rep.result("conversations-raw").answer); n != 30 {
		t.Errorf("conversations on %d days, want 30", n)
	}
	if n := len(rep.result("transcript-final").answer); n < 4 {
		t.Errorf("a transcript of %d events, want at least 4 (a session's shortest)", n)
	}
	for _, pair := range [][2]string{{"conversations-raw", "conversations-rollup"}, {"daily-raw", "daily-rollup"}} {
		raw, rollup := rep.result(pair[0]), rep.result(pair[1])
		// So few sessions and events a day are far from uniq's
		// approximation: the counts must be exact.
		if rollup.maxDiff != 0 {
			t.Errorf("%s: the rollup's counts differ from the exact ones by up to %.3f%% (%s), want none at this size",
				rollup.query, 100*rollup.maxDiff, rollup.maxDiffAt)
		}
		if rollup.rows() == 0 || rollup.rows() >= raw.rows() {
			t.Errorf("%s: the rollup read %d rows, the raw table %d: want fewer, and some", rollup.query, rollup.rows(), raw.rows())
		}
	}
	for _, r := range rep.results {
		if len(r.times) != 1 || len(r.readRows) != 1 || len(r.readBytes) != 1 {
			t.Errorf("%s, %s: %d times, %d rows-read and %d bytes-read figures, want one of each",
				r.query, r.name, len(r.times), len(r.readRows), len(r.readBytes))
		}
	}
}

// TestAgreementNamesDifferences: a form answering differently from its
// query's first form fails the benchmark, saying where.
func TestAgreementNamesDifferences(t *testing.T) {
	rep := &report{}
	for _, f := range forms("default", "s1", time.Now(), time.Now()) {
		rep.results = append(rep.results, &result{form: f, answer: [][]string{{"2026-11-01", "3"}}})
	}
	rep.result("daily-rollup").answer = [][]string{{"2026-11-01", "4"}}
	rep.compareAnswers()
	err := rep.agreement()
	if err == nil || !strings.Contains(err.Error(), "rollup `app_daily`") || !strings.Contains(err.Error(), "row 1") {
		t.Fatalf("agreement: %v, want the rollup's first differing row named", err)
	}
}

// TestWindowDays: the window holds Days calendar days, the last of them
// today unless too little of today has passed, and ends ten minutes
// before now or before it.
func TestWindowDays(t *testing.T) {
	day := func(d int, h, m int) time.Time { return time.Date(2026, 11, d, h, m, 0, 0, time.UTC) }
	for _, tc := range []struct {
		now             time.Time
		first, lastDay  time.Time
		endsBeforeNowBy time.Duration
	}{
		{day(26, 0, 10), day(27-31, 0, 0), day(25, 0, 0), 10*time.Minute + 10*time.Minute},
		{day(26, 5, 59), day(27-31, 0, 0), day(25, 0, 0), 5*time.Hour + 59*time.Minute + 10*time.Minute},
		{day(26, 6, 0), day(26-29, 0, 0), day(26, 0, 0), 10 * time.Minute},
		{day(26, 23, 0), day(26-29, 0, 0), day(26, 0, 0), 10 * time.Minute},
	} {
		w := newWindow(tc.now, 30)
		end := w.base.Add(time.Duration(w.span) * time.Second)
		lastDay := time.Date(end.Year(), end.Month(), end.Day(), 0, 0, 0, 0, time.UTC)
		if !w.base.Equal(tc.first) || !lastDay.Equal(tc.lastDay) || tc.now.Sub(end) != tc.endsBeforeNowBy {
			t.Errorf("at %s: from %s, last day %s, ends %s before now; want %s, %s, %s",
				tc.now, w.base, lastDay, tc.now.Sub(end), tc.first, tc.lastDay, tc.endsBeforeNowBy)
		}
	}
}
