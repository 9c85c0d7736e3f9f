package analyticsreport

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/chfixture"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
)

// TestErrorCounts counts ERROR events received since a time, by app, on
// the ClickHouse server: by when they were received, whatever the
// runtime's clock said, an event stored twice once, other types and
// apps apart.
func TestErrorCounts(t *testing.T) {
	s := chfixture.Migrated(t, nil)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	since := now.Add(-time.Minute)
	n := 0
	event := func(app, typ string, runtime, received time.Time) chfixture.Event {
		n++
		return chfixture.Event{EventID: fmt.Sprint("e", n), AppID: app, OrganizationID: "o", EventTime: runtime, ReceivedAt: received,
			Type: typ, Name: "x", SessionID: "s", UserID: "u", Channel: "web", Offset: uint64(n), Extra: "{}"}
	}
	twice := event("a", "ERROR", now, now)
	var b chstore.EventBatch
	for _, e := range []chfixture.Event{
		event("a", "ERROR", now, now),
		event("a", "ERROR", now.Add(-3*time.Minute), now.Add(-10*time.Second)), // the runtime's clock behind
		twice, twice,
		event("a", "ERROR", now.Add(-2*time.Minute), now.Add(-2*time.Minute)), // before since
		event("a", "AnalyticsEvent", now, now),
		event("b", "ERROR", now, now),
		event("c", "ERROR", now, now), // not asked for
	} {
		e.AddTo(&b)
	}
	if err := s.InsertEvents(ctx, &b); err != nil {
		t.Fatal(err)
	}
	got, err := ErrorCounts(ctx, s, []string{"a", "b", "none"}, since)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "map[a:3 b:1]" {
		t.Errorf("ErrorCounts = %v, want map[a:3 b:1]", got)
	}
	if got, err := ErrorCounts(ctx, s, nil, since); err != nil || len(got) != 0 {
		t.Errorf("ErrorCounts of no apps = %v, %v", got, err)
	}
}
