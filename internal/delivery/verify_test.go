package delivery

import (
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/devclickhouse"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
)

// TestVerifyFindsLossAndDuplicates writes rows by hand into a real
// ClickHouse and checks that Verify counts what is missing, what is doubled
// after deduplication and what was stored without acknowledgement.
func TestVerifyFindsLossAndDuplicates(t *testing.T) {
	srv := devclickhouse.StartForTest(t)
	ctx := t.Context()
	store, err := chstore.Open(ctx, chstore.Config{Addrs: []string{srv.Addr()}, Database: "analytics"})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}

	// Batches 0 and 1 acknowledged, batch 2 not; three events per batch.
	l := &Load{cfg: Config{RunID: "v1", BatchSize: 3}.withDefaults(), acked: []bool{true, true, false}, answers: map[string]int64{}}
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	rows := []struct {
		id string
		at time.Time
	}{
		{"v1-0-0", at}, {"v1-0-1", at}, {"v1-0-2", at},
		{"v1-0-1", at},                     // a retry: the same row again, which FINAL collapses
		{"v1-0-0", at.Add(48 * time.Hour)}, // another day: FINAL cannot collapse it
		{"v1-1-0", at}, {"v1-1-1", at},     // v1-1-2 is lost
		{"v1-2-0", at},  // stored, though its batch was never answered 200
		{"v10-0-0", at}, // another run whose ID shares the prefix
	}
	b, err := store.Conn().PrepareBatch(ctx, "INSERT INTO analytics.events (event_id, app_id, event_time, received_at)")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := b.Append(r.id, "app", r.at, r.at); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}

	c, err := l.Verify(ctx, store.Conn(), "analytics")
	if err != nil {
		t.Fatal(err)
	}
	want := Check{Acknowledged: 6, Stored: 5, Missing: 1, Duplicates: 1, RowsBeforeDedup: 8, Unacknowledged: 1}
	if c != want {
		t.Errorf("got  %s\nwant %s", c, want)
	}
	if c.OK() {
		t.Error("a check with a missing event is OK")
	}
}
