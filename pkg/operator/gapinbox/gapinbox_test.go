package gapinbox

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/pipeline/analyticsreport"
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
	b := New(src, nil, Config{MaxWordings: 4, FreshFor: time.Minute})
	now := day.Add(10 * time.Hour)
	b.now = func() time.Time { return now }
	in, err := b.Build(context.Background(), "shop", 7, 0.5)
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
	if _, err := b.Build(context.Background(), "shop", 7, 0.5); err != nil || src.reads.Load() != 1 {
		t.Errorf("a fresh inbox read again: %d reads, %v", src.reads.Load(), err)
	}
	if _, err := b.Build(context.Background(), "shop", 7, 0.8); err != nil || src.reads.Load() != 2 {
		t.Errorf("another threshold not read: %d reads, %v", src.reads.Load(), err)
	}
	now = now.Add(time.Minute)
	if _, err := b.Build(context.Background(), "shop", 7, 0.5); err != nil || src.reads.Load() != 3 {
		t.Errorf("a stale inbox not read again: %d reads, %v", src.reads.Load(), err)
	}
	if _, err := b.Build(context.Background(), "shop", 7, 0.33); err == nil {
		t.Error("a threshold between bands accepted")
	}
}

// TestBuildsKeptAreBounded: inboxes of ever more apps (or thresholds)
// keep at most maxRecent builds.
func TestBuildsKeptAreBounded(t *testing.T) {
	src := &fakeSource{words: []analyticsreport.GapWording{{Query: "q", Users: 1, Asked: 1}}}
	b := New(src, nil, Config{})
	for i := range maxRecent + 50 {
		if _, err := b.Build(context.Background(), fmt.Sprint("app-", i), 30, 0.5); err != nil {
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
	b := New(&fakeSource{}, nil, Config{})
	b.turn <- struct{}{} // another build holds the turn
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := b.Build(ctx, "shop", 30, 0.5); !errors.Is(err, ErrBusy) {
		t.Errorf("err %v, want ErrBusy", err)
	}
}
