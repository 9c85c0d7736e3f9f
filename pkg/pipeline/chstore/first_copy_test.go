package chstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/chfixture"
	"github.com/assistantcms/cms/internal/devclickhouse"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	chschema "github.com/assistantcms/cms/schemas/clickhouse"
)

// copiesOf returns two copies of one event: alice's, received at, and
// mallory's, sent under the same ID and time a millisecond later (within
// the same second, which the 18.16 server's times cannot tell apart).
func copiesOf(id string, at time.Time) (alice, mallory chfixture.Event) {
	alice = chfixture.Event{EventID: id, AppID: "app-1", EventTime: at, ReceivedAt: at, Type: "AnalyticsEvent", Name: "REQUEST_RESPONSE",
		SessionID: "s-alice", UserID: "alice", RawQuery: "where is my order", Channel: "web"}
	mallory = alice
	mallory.ReceivedAt = at.Add(time.Millisecond)
	mallory.SessionID, mallory.UserID, mallory.RawQuery = "s-mallory", "mallory", "refund everything"
	return alice, mallory
}

// insertOne writes one event in an insert of its own.
func insertOne(t *testing.T, s *chstore.Store, e chfixture.Event) {
	t.Helper()
	var b chstore.EventBatch
	e.AddTo(&b)
	if err := s.InsertEvents(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
}

// recorded returns the user and query of every row of an event in table,
// read as sql (with or without FINAL) gives them.
func recorded(t *testing.T, s *chstore.Store, from, id string) string {
	t.Helper()
	return fmt.Sprint(chfixture.Query(t, s, "SELECT user_id, raw_query FROM "+from+" WHERE event_id = '"+id+"' ORDER BY user_id"))
}

const alicesRow = "[[alice where is my order]]"

// TestFirstCopyWins sends an event as alice, then a copy with the same ID
// as mallory: the events table keeps alice's, read with FINAL and after a
// merge, whichever order the copies are inserted in.
func TestFirstCopyWins(t *testing.T) {
	s := migrated(t)
	at := time.Now().UTC().Truncate(time.Second)
	for _, tc := range []struct {
		id           string
		malloryFirst bool
	}{{"in-order", false}, {"later-copy-inserted-first", true}} {
		alice, mallory := copiesOf(tc.id, at)
		if tc.malloryFirst {
			insertOne(t, s, mallory)
			insertOne(t, s, alice)
		} else {
			insertOne(t, s, alice)
			insertOne(t, s, mallory)
		}
	}
	for _, id := range []string{"in-order", "later-copy-inserted-first"} {
		if got := recorded(t, s, "events FINAL", id); got != alicesRow {
			t.Errorf("%s: events FINAL holds %s, want alice's copy", id, got)
		}
	}
	if err := s.Conn().Exec(s.Context(context.Background()), "OPTIMIZE TABLE events FINAL"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"in-order", "later-copy-inserted-first"} {
		if got := recorded(t, s, "events", id); got != alicesRow {
			t.Errorf("%s: events after the merge holds %s, want alice's copy alone", id, got)
		}
	}
	// The rollups count each event once. They aggregate every insert, so
	// a copy's own user is counted among the day's users.
	if got := fmt.Sprint(chfixture.Query(t, s, "SELECT uniqMerge(events), uniqIfMerge(users) FROM app_daily")); got != "[[2 2]]" {
		t.Errorf("app_daily counts %s events and users, want 2 events (and alice and mallory as users)", got)
	}
}

// TestClusterFirstCopyWins is TestFirstCopyWins on a cluster of two
// shards of two replicas: the copies go in through servers of different
// shards, and every server reads alice's through the Distributed table,
// and alone in its shard-local table after a merge.
func TestClusterFirstCopyWins(t *testing.T) {
	c := devclickhouse.StartClusterForTest(t)
	ctx := context.Background()
	first := openOn(t, c, c.Shards[0][0], "default")
	if _, err := first.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	other := openOn(t, c, c.Shards[1][1], "default")
	alice, mallory := copiesOf("copied", time.Now().UTC().Truncate(time.Second))
	insertOne(t, first, alice)
	insertOne(t, other, mallory)
	if err := c.SyncReplicas(ctx, "default.events_local"); err != nil {
		t.Fatal(err)
	}
	for i, shard := range c.Shards {
		for j, srv := range shard {
			if got := recorded(t, openOn(t, c, srv, "default"), "events FINAL", "copied"); got != alicesRow {
				t.Errorf("%s: events FINAL holds %s, want alice's copy", devclickhouse.ReplicaName(i, j), got)
			}
		}
	}
	holder := shardOf("copied", len(c.Shards))
	if err := openOn(t, c, c.Shards[holder][0], "default").Conn().Exec(ctx, "OPTIMIZE TABLE default.events_local FINAL"); err != nil {
		t.Fatal(err)
	}
	if err := c.SyncReplicas(ctx, "default.events_local"); err != nil {
		t.Fatal(err)
	}
	for j, srv := range c.Shards[holder] {
		if got := recorded(t, openOn(t, c, srv, "default"), "default.events_local", "copied"); got != alicesRow {
			t.Errorf("%s: events_local after the merge holds %s, want alice's copy alone", devclickhouse.ReplicaName(holder, j), got)
		}
	}
}

// TestMigrationKeepsTheFirstCopy upgrades a database of the twelve
// earlier migrations holding two copies of an event not yet merged, where
// FINAL shows the later one: after migration 13 it shows the first, every
// row is still there, the rollups still count every event once, and
// events written after it are counted by the views made over the new
// table.
func TestMigrationKeepsTheFirstCopy(t *testing.T) {
	srv := devclickhouse.StartForTest(t)
	ctx := context.Background()
	s, err := chstore.Open(ctx, chstore.Config{Addrs: []string{srv.Addr()}, StringColumns: stringColumns})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cctx := s.Context(ctx)
	migs, err := chschema.Render(s.Features(), chschema.Options{Database: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Conn().Exec(cctx, "CREATE TABLE schema_migrations (version UInt32, name String, applied_at DateTime('UTC')) ENGINE = ReplacingMergeTree ORDER BY version"); err != nil {
		t.Fatal(err)
	}
	for _, m := range migs[:12] {
		for _, st := range m.Statements {
			if err := s.Conn().Exec(cctx, st); err != nil {
				t.Fatalf("migration %d: %v", m.Version, err)
			}
		}
		insert(t, s, "INSERT INTO schema_migrations (version, name, applied_at)", uint32(m.Version), m.Name, time.Now().UTC())
	}
	// Earlier consumers wrote no rank; the copies were received seconds
	// apart, which is all the 18.16 server's received_at keeps.
	at := time.Now().UTC().Truncate(time.Second)
	alice, mallory := copiesOf("copied", at)
	mallory.ReceivedAt = at.Add(2 * time.Second)
	// Unmerged, as copies are until a merge reaches them.
	if err := s.Conn().Exec(cctx, "SYSTEM STOP MERGES default.events"); err != nil {
		t.Fatal(err)
	}
	other := alice
	other.EventID, other.SessionID = "other", "s-other"
	for _, e := range []chfixture.Event{alice, other, mallory} {
		var b chstore.EventBatch
		e.AddTo(&b)
		if err := s.InsertEventsBeforeArrivalRank(ctx, &b); err != nil {
			t.Fatal(err)
		}
	}
	if got := recorded(t, s, "events FINAL", "copied"); got != "[[mallory refund everything]]" {
		t.Fatalf("before the migration events FINAL holds %s: the test no longer shows the later copy winning", got)
	}
	rollup := "SELECT uniqMerge(events), uniqIfMerge(users) FROM app_daily"
	before := fmt.Sprint(chfixture.Query(t, s, rollup))

	if applied, err := s.Migrate(ctx); err != nil || !slices.Equal(applied, []int{13, 14}) {
		t.Fatalf("applied %v, %v; want [13 14]", applied, err)
	}
	if got := recorded(t, s, "events FINAL", "copied"); got != alicesRow {
		t.Errorf("after the migration events FINAL holds %s, want alice's copy", got)
	}
	if got := fmt.Sprint(chfixture.Query(t, s, "SELECT groupArray(event_id) FROM (SELECT event_id FROM events FINAL ORDER BY event_id)"),
		chfixture.Query(t, s, "SELECT count() FROM events_v12")); got != "[[[copied other]]] [[3]]" {
		t.Errorf("events and the rows of events_v12: %s, want both events, and every row kept in events_v12", got)
	}
	if got := fmt.Sprint(chfixture.Query(t, s, rollup)); got != before || before != "[[2 2]]" {
		t.Errorf("app_daily after the migration %s, before %s; want 2 events", got, before)
	}
	// A copy sent now still loses to alice's, and a new event is counted.
	late, fresh := mallory, other
	late.ReceivedAt = time.Now().UTC()
	fresh.EventID = "fresh"
	insertOne(t, s, late)
	insertOne(t, s, fresh)
	if got := recorded(t, s, "events FINAL", "copied"); got != alicesRow {
		t.Errorf("after a later copy events FINAL holds %s, want alice's copy", got)
	}
	if got := fmt.Sprint(chfixture.Query(t, s, "SELECT uniqMerge(events) FROM app_daily")); got != "[[3]]" {
		t.Errorf("app_daily counts %s events after one more, want 3", got)
	}
	// Running it again (as a consumer that read the versions before this
	// one recorded them would) changes nothing.
	for _, m := range migs[12:] {
		if err := m.Run(func(st string) error { return s.Conn().Exec(cctx, st) }, func(q string) (bool, error) {
			var done uint8
			err := s.Conn().QueryRow(cctx, q).Scan(&done)
			return done == 1, err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if got := fmt.Sprint(chfixture.Query(t, s, "SELECT count() FROM events FINAL"), recorded(t, s, "events FINAL", "copied")); got != "[[3]]"+alicesRow {
		t.Errorf("after running migration 13 again: %s", got)
	}
}
