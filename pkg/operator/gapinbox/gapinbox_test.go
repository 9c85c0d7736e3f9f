package gapinbox

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/pipeline/analyticsreport"
	chschema "github.com/assistantcms/cms/schemas/clickhouse"
)

// fakeSource answers every app with the same wordings, counting reads.
type fakeSource struct {
	words []analyticsreport.GapWording
	reads atomic.Int32
	last  analyticsreport.GapQuery
}

func (f *fakeSource) Gaps(_ context.Context, q analyticsreport.GapQuery) ([]analyticsreport.GapWording, error) {
	f.reads.Add(1)
	f.last = q
	return f.words[:min(len(f.words), q.Limit)], nil
}

// every asks b for every group of an inbox, open or not.
func every(ctx context.Context, b *Builder, app string, days int, lowConfidence float64) (Inbox, error) {
	return b.Answer(ctx, Request{App: app, Days: days, LowConfidence: &lowConfidence, State: StateAll})
}

func TestBuild(t *testing.T) {
	day := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	w := func(q string, users uint64, reason string, at int) analyticsreport.GapWording {
		return analyticsreport.GapWording{Query: q, Asked: users + 1, Users: users, Reason: reason, ThisWeek: users,
			FirstSeen: day.Add(time.Duration(at) * time.Hour), LastSeen: day.Add(time.Duration(at+1) * time.Hour)}
	}
	src := &fakeSource{words: []analyticsreport.GapWording{
		w("opening hours", 9, "fallback", 1),
		w("do you sell skateboards", 5, "fallback", 2),
		w("your opening hours", 4, "low_confidence", 0),
		w("skateboards do you sell them", 3, "knowledge_base", 3),
		w("parking", 1, "fallback", 4),
	}}
	b := New(src, nil, nil, Config{MaxWordings: 4, FreshFor: time.Minute})
	now := day.Add(10 * time.Hour)
	b.now = func() time.Time { return now }
	in, err := every(context.Background(), b, "shop", 7, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if src.last.AppID != "shop" || src.last.Limit != 5 || !src.last.From.Equal(day.AddDate(0, 0, -6)) || !src.last.To.Equal(day) || src.last.LowConfidence != 0.5 {
		t.Errorf("read %+v", src.last)
	}
	// Four of five wordings read; the opening hours together, ranked
	// first by their users.
	if !in.Truncated || in.Wordings != 4 || in.GroupedBy != "words" || len(in.Groups) != 2 {
		t.Fatalf("inbox %+v", in)
	}
	g := in.Groups[0]
	if g.Representative != "opening hours" || g.Users != 13 || g.Asked != 15 || g.ThisWeek != 13 || len(g.Wordings) != 2 ||
		!g.FirstSeen.Equal(day) || !g.LastSeen.Equal(day.Add(2*time.Hour)) || fmt.Sprint(g.Reasons) != "map[fallback:10 low_confidence:5]" {
		t.Errorf("first group %+v", g)
	}
	if in.Groups[1].Representative != "do you sell skateboards" || in.Groups[1].Users != 8 {
		t.Errorf("second group %+v", in.Groups[1])
	}
	// Fresh: answered again without a read; stale, read again.
	if _, err := every(context.Background(), b, "shop", 7, 0.5); err != nil || src.reads.Load() != 1 {
		t.Errorf("a fresh inbox read again: %d reads, %v", src.reads.Load(), err)
	}
	if _, err := every(context.Background(), b, "shop", 7, 0.8); err != nil || src.reads.Load() != 2 {
		t.Errorf("another threshold not read: %d reads, %v", src.reads.Load(), err)
	}
	now = now.Add(time.Minute)
	if _, err := every(context.Background(), b, "shop", 7, 0.5); err != nil || src.reads.Load() != 3 {
		t.Errorf("a stale inbox not read again: %d reads, %v", src.reads.Load(), err)
	}
	if _, err := every(context.Background(), b, "shop", 7, 0.33); err == nil {
		t.Error("a threshold between bands accepted")
	}
}

// TestBuildsKeptAreBounded: inboxes of ever more apps (or thresholds)
// keep at most maxRecent builds.
func TestBuildsKeptAreBounded(t *testing.T) {
	src := &fakeSource{words: []analyticsreport.GapWording{{Query: "q", Users: 1, Asked: 1}}}
	b := New(src, nil, nil, Config{})
	for i := range maxRecent + 50 {
		if _, err := every(context.Background(), b, fmt.Sprint("app-", i), 30, 0.5); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(b.recent); n > maxRecent {
		t.Errorf("%d builds kept, want at most %d", n, maxRecent)
	}
}

// TestBuildWaitsItsTurn: a build past its deadline waiting for another
// says the process is busy.
func TestBuildWaitsItsTurn(t *testing.T) {
	b := New(&fakeSource{}, nil, nil, Config{})
	b.turn <- struct{}{} // another build holds the turn
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := every(ctx, b, "shop", 30, 0.5); !errors.Is(err, ErrBusy) {
		t.Errorf("err %v, want ErrBusy", err)
	}
}

func TestDecide(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	group := func(id string, users uint64, last time.Time, wordings ...string) Group {
		g := Group{ID: id, Users: users, LastSeen: last}
		for _, w := range wordings {
			g.Wordings = append(g.Wordings, Wording{Query: w})
		}
		return g
	}
	decisions := []content.GapDecision{ // newest first
		{GroupID: "new-id", State: content.GapDismissed, Reason: "spam", Wordings: []string{"buy crypto"}, Users: 4, DecidedAt: at, AuditID: 9},
		{GroupID: "g-res", State: content.GapResolved, Wordings: []string{"opening hours"}, Users: 5, DecidedAt: at, AuditID: 8},
		{GroupID: "g-old", State: content.GapResolved, Wordings: []string{"buy crypto"}, Users: 1, DecidedAt: at.Add(-time.Hour), AuditID: 2},
	}
	for _, tc := range []struct {
		name     string
		g        Group
		state    string
		reopened bool
		by       string
	}{
		{"undecided", group("g-x", 3, at, "parking"), StateOpen, false, ""},
		{"resolved, not asked since", group("g-res", 5, at, "opening hours"), StateResolved, false, "g-res"},
		{"resolved, asked since", group("g-res", 6, at.Add(time.Minute), "opening hours"), StateOpen, true, "g-res"},
		{"resolved by a wording it shares", group("g-other", 2, at.Add(-time.Minute), "when are you open", "opening hours"), StateResolved, false, "g-res"},
		{"dismissed, the newest decision of its wording", group("g-old", 7, at, "buy crypto"), StateDismissed, false, "new-id"},
		{"dismissed, grown by the factor", group("g-old", 8, at, "buy crypto"), StateOpen, true, "new-id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gs := []Group{tc.g}
			decide(gs, decisions, 2)
			g := gs[0]
			by := ""
			if g.Decision != nil {
				by = g.Decision.GroupID
			}
			if g.State != tc.state || g.Reopened != tc.reopened || by != tc.by {
				t.Errorf("state %s, reopened %v, by %q; want %s, %v, %q", g.State, g.Reopened, by, tc.state, tc.reopened, tc.by)
			}
		})
	}
}

// fakeContent keeps decisions and settings in memory.
type fakeContent struct {
	decisions []content.GapDecision
	settings  content.GapSettings
}

func (f *fakeContent) ListRecords(context.Context, string, content.Kind) ([]content.Record, error) {
	return nil, nil
}
func (f *fakeContent) GapDecisions(context.Context, string) ([]content.GapDecision, error) {
	return f.decisions, nil
}
func (f *fakeContent) GapSettings(context.Context, string) (content.GapSettings, error) {
	return f.settings, nil
}

// TestAnswer: the app's threshold is read unless the request sets one,
// decisions apply at once to a fresh build, and groups are listed by
// state.
func TestAnswer(t *testing.T) {
	day := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	src := &fakeSource{words: []analyticsreport.GapWording{
		{Query: "opening hours", Users: 5, Asked: 5, LastSeen: day},
		{Query: "parking", Users: 3, Asked: 3, LastSeen: day},
	}}
	c := &fakeContent{settings: content.GapSettings{LowConfidence: 0.7, RegrowFactor: 2}}
	b := New(src, c, nil, Config{})
	b.now = func() time.Time { return day.Add(time.Hour) }
	ctx := context.Background()
	in, err := b.Answer(ctx, Request{App: "shop", Days: 30})
	if err != nil || src.last.LowConfidence != 0.7 || in.State != StateOpen || len(in.Groups) != 2 {
		t.Fatalf("%+v, %v; read %+v", in, err, src.last)
	}
	c.decisions = []content.GapDecision{{GroupID: in.Groups[0].ID, State: content.GapDismissed, Reason: "r", Wordings: []string{"opening hours"}, Users: 5, DecidedAt: day, AuditID: 1}}
	if in, _ := b.Answer(ctx, Request{App: "shop", Days: 30}); len(in.Groups) != 1 || in.Groups[0].Representative != "parking" || src.reads.Load() != 1 {
		t.Errorf("open after a dismissal: %+v (%d reads)", in.Groups, src.reads.Load())
	}
	if in, _ := b.Answer(ctx, Request{App: "shop", Days: 30, State: StateDismissed}); len(in.Groups) != 1 || in.Groups[0].Decision == nil || in.Groups[0].Decision.Reason != "r" {
		t.Errorf("dismissed: %+v", in.Groups)
	}
	if in, _ := b.Answer(ctx, Request{App: "shop", Days: 30, State: StateAll}); len(in.Groups) != 2 {
		t.Errorf("all: %+v", in.Groups)
	}
	low := 0.3
	if _, err := b.Answer(ctx, Request{App: "shop", Days: 30, LowConfidence: &low}); err != nil || src.last.LowConfidence != 0.3 {
		t.Errorf("a threshold of the request: read %+v, %v", src.last, err)
	}
}

// TestBuildsOfOneAppAreBounded: an app's authors asking for inbox after
// inbox of other ranges are refused past the app's builds a minute,
// while another app's inbox is built, and a fresh build is answered.
func TestBuildsOfOneAppAreBounded(t *testing.T) {
	src := &fakeSource{words: []analyticsreport.GapWording{{Query: "q", Users: 1, Asked: 1}}}
	b := New(src, nil, nil, Config{BuildsPerMinute: 3})
	ctx := context.Background()
	for days := 1; days <= 3; days++ {
		if _, err := every(ctx, b, "shop", days, 0.5); err != nil {
			t.Fatal(err)
		}
	}
	var many *TooManyBuilds
	if _, err := every(ctx, b, "shop", 4, 0.5); !errors.As(err, &many) || many.RetryAfter <= 0 {
		t.Errorf("a fourth build in a minute: %v", err)
	}
	if _, err := every(ctx, b, "shop", 1, 0.5); err != nil {
		t.Errorf("a fresh build refused: %v", err)
	}
	if _, err := every(ctx, b, "other", 4, 0.5); err != nil {
		t.Errorf("another app's build refused: %v", err)
	}
}

// TestBoundsAgree: the content model checks decisions and settings with
// the bounds the rollup keeps.
func TestBoundsAgree(t *testing.T) {
	if content.GapBand != chschema.GapBand || content.MaxLowConfidence != chschema.MaxGapThreshold ||
		content.DefaultGapLowConfidence != chschema.LowConfidence || content.MaxGapWordingBytes != chschema.MaxGapQueryBytes ||
		content.MaxGapWordings != MaxListed {
		t.Error("the content model's gap bounds differ from the rollup's or the inbox's")
	}
}
