package chstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/chfixture"
	"github.com/assistantcms/cms/internal/devclickhouse"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	chschema "github.com/assistantcms/cms/schemas/clickhouse"
)

// stringColumns sizes the String columns of this package's inserts, as
// the consumer's are sized; it is installed before the tests run.
var stringColumns = chstore.InstallStringColumns()

// migrated opens a new server's default database with the schema applied.
func migrated(t *testing.T) *chstore.Store { return chfixture.Migrated(t, stringColumns) }

func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	srv := devclickhouse.StartForTest(t)
	ctx := context.Background()
	cfg := chstore.Config{Addrs: []string{srv.Addr()}, Database: "analytics", RetentionDays: 30}

	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			s, err := chstore.Open(ctx, cfg)
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close()
			if _, err := s.Migrate(ctx); err != nil {
				t.Errorf("concurrent migrate: %v", err)
			}
		})
	}
	wg.Wait()

	s, err := chstore.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	applied, err := s.Migrate(ctx)
	if err != nil || len(applied) != 0 {
		t.Fatalf("second migrate applied %v, err %v; want nothing", applied, err)
	}
	done, err := s.AppliedVersions(ctx)
	if err != nil || !done[1] || !done[2] || !done[3] {
		t.Errorf("applied versions %v, %v", done, err)
	}

	types := map[string]string{}
	rows, err := s.Conn().Query(ctx, "SELECT name, type FROM system.columns WHERE database = 'analytics' AND table = 'events'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			t.Fatal(err)
		}
		types[name] = typ
	}
	rows.Close()
	want := map[string]string{
		"event_id":          "String",
		"app_id":            "LowCardinality(String)",
		"event_time":        "DateTime('UTC')", // 18.16 has no DateTime64
		"match_confidence":  "Nullable(Float32)",
		"display_count":     "UInt16",
		"kafka_offset":      "UInt64",
		"tags":              "Array(String)",
		"error_stack":       "String",
		"kb_used":           "UInt8",
		"kb_faqs":           "UInt16",
		"event_time_source": "Enum8('received' = 1, 'runtime' = 2)",
		"runtime_time":      "Nullable(DateTime('UTC'))",
		"token_id":          "LowCardinality(String)",
		"client_network":    "String",
	}
	for col, typ := range want {
		if types[col] != typ {
			t.Errorf("column %s has type %q, want %q", col, types[col], typ)
		}
	}
	if len(types) != 39 {
		t.Errorf("events has %d columns: %v", len(types), types)
	}
	if n := columnCount(t, s, "analytics", "quarantine"); n != 14 {
		t.Errorf("quarantine has %d columns, want 14", n)
	}
}

func columnCount(t *testing.T, s *chstore.Store, db, table string) int {
	t.Helper()
	var n uint64
	if err := s.Conn().QueryRow(context.Background(), "SELECT count() FROM system.columns WHERE database = ? AND table = ?", db, table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return int(n)
}

// TestMigrateFromEarlierSchema upgrades a database that has the first
// three migrations and rows in it: the new columns are added, the old rows
// read with their defaults, and new rows fill them.
func TestMigrateFromEarlierSchema(t *testing.T) {
	srv := devclickhouse.StartForTest(t)
	ctx := context.Background()
	s, err := chstore.Open(ctx, chstore.Config{Addrs: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	migs, err := chschema.Render(s.Features(), chschema.Options{Database: "default"})
	if err != nil {
		t.Fatal(err)
	}
	cctx := s.Context(ctx)
	if err := s.Conn().Exec(cctx, "CREATE TABLE schema_migrations (version UInt32, name String, applied_at DateTime('UTC')) ENGINE = ReplacingMergeTree ORDER BY version"); err != nil {
		t.Fatal(err)
	}
	for _, m := range migs[:3] {
		for _, st := range m.Statements {
			if err := s.Conn().Exec(cctx, st); err != nil {
				t.Fatalf("migration %d: %v", m.Version, err)
			}
		}
		// The 18.16 server takes inserts only as data blocks.
		insert(t, s, "INSERT INTO schema_migrations (version, name, applied_at)", uint32(m.Version), m.Name, time.Now().UTC())
	}
	now := time.Now().UTC()
	insert(t, s, "INSERT INTO events (event_id, app_id, event_time, received_at, type, name)", "old", "app-1", now, now, "REQUEST", "LAUNCH_REQUEST")
	applied, err := s.Migrate(ctx)
	if err != nil || !slices.Equal(applied, []int{4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}) {
		t.Fatalf("applied %v, %v; want [4 5 6 7 8 9 10 11 12 13 14]", applied, err)
	}
	var b chstore.EventBatch
	runtime := now.Add(-time.Minute).Truncate(time.Second)
	chfixture.Event{EventID: "new", AppID: "app-1", EventTime: now, ReceivedAt: now, Type: "ERROR", Name: "TypeError", Tags: []string{"a", "b"},
		ErrorMessage: "boom", ErrorStack: `[{"file":"x"}]`, Message: "m", KBUsed: true, KBDocuments: 10, KBFAQs: 3,
		TimeSource: chstore.TimeSourceRuntime, RuntimeTime: &runtime, TokenID: "t1", ClientNetwork: "192.0.2.0/24"}.AddTo(&b)
	if err := s.InsertEvents(ctx, &b); err != nil {
		t.Fatal(err)
	}
	rows, err := s.Conn().Query(cctx, "SELECT event_id, tags, tag, error_message, error_stack, message, kb_used, kb_documents, kb_faqs, event_time_source, "+
		"runtime_time, token_id, client_network FROM events ORDER BY event_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var id, tag, msg, stack, message, source, token, network string
		var tags []string
		var used uint8
		var docs, faqs uint16
		var rt *time.Time
		if err := rows.Scan(&id, &tags, &tag, &msg, &stack, &message, &used, &docs, &faqs, &source, &rt, &token, &network); err != nil {
			t.Fatal(err)
		}
		rts := "null"
		if rt != nil {
			rts = fmt.Sprint(rt.Equal(runtime))
		}
		got = append(got, fmt.Sprint(id, tags, tag, msg, stack, message, used, docs, faqs, " ", source, " ", rts, " ", token, " ", network))
	}
	// The old row's times are equal, so its source reads as received; it
	// has no runtime time and no sender.
	want := []string{`new[a b]aboom[{"file":"x"}]m1 10 3 runtime true t1 192.0.2.0/24`, "old[]0 0 0 received null  "}
	if !slices.Equal(got, want) {
		t.Errorf("rows\n%q\nwant\n%q", got, want)
	}
}

func insert(t *testing.T, s *chstore.Store, query string, values ...any) {
	t.Helper()
	b, err := s.Conn().PrepareBatch(s.Context(context.Background()), query)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Append(values...); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}

func TestInsertQuarantine(t *testing.T) {
	s := migrated(t)
	ctx := context.Background()
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	q := chstore.QuarantineRow{EventID: "e-1", AppID: "app-1", OrganizationID: "org-1", ReceivedAt: at, Index: 3,
		Reason: "too_large", Field: "", Message: "event is 2000000 bytes", Errors: `[{"field":"","reason":"too_large"}]`,
		Event: `{"type":"REQUEST","name":"big"}`, EventBytes: 2000000, Partition: 2, Offset: 7}
	// Written twice, as a retried batch would be: the copies collapse.
	rows := []chstore.QuarantineRow{q, q}
	if err := s.InsertQuarantine(ctx, rows); err != nil {
		t.Fatal(err)
	}
	var (
		received                                   time.Time
		app, org, id, reason, field, msg, errs, ev string
		index                                      uint32
		size, offset                               uint64
		truncated                                  uint8
		partition                                  uint16
		count                                      uint64
	)
	if err := s.Conn().QueryRow(s.Context(ctx), "SELECT count() FROM quarantine FINAL").Scan(&count); err != nil || count != 1 {
		t.Fatalf("%d rows after FINAL, %v; want 1", count, err)
	}
	err := s.Conn().QueryRow(s.Context(ctx), "SELECT received_at, app_id, organization_id, event_id, batch_index, reason, field, message, errors, event, "+
		"event_bytes, truncated, kafka_partition, kafka_offset FROM quarantine FINAL").Scan(&received, &app, &org, &id, &index, &reason,
		&field, &msg, &errs, &ev, &size, &truncated, &partition, &offset)
	if err != nil {
		t.Fatal(err)
	}
	if !received.Equal(at) || app != "app-1" || org != "org-1" || id != "e-1" || index != 3 || reason != "too_large" || field != "" ||
		msg != q.Message || errs != q.Errors || ev != q.Event || size != 2000000 || truncated != 0 || partition != 2 || offset != 7 {
		t.Errorf("row: %v %s %s %s %d %s %q %s %s %s %d %d %d %d", received, app, org, id, index, reason, field, msg, errs, ev, size, truncated, partition, offset)
	}
}

func TestQueryCountsView(t *testing.T) {
	s := migrated(t)
	ctx := context.Background()
	cctx := s.Context(ctx)
	b, err := s.Conn().PrepareBatch(cctx, "INSERT INTO events (event_id, app_id, event_time, received_at, channel, raw_query)")
	if err != nil {
		t.Fatal(err)
	}
	// The same queries are written twice: once leaving query_normalized to
	// the column's default, as other writers may, and once as the consumer
	// writes them, normalised in Go. Both must count alike.
	now := time.Now().UTC()
	queries := []string{"  Where IS   my order ", "where is my order", "WHERE IS MY ORDER", "opening\thours", ""}
	var evs chstore.EventBatch
	for i, q := range queries {
		if err := b.Append("d-"+string(rune('a'+i)), "app-1", now, now, "web", q); err != nil {
			t.Fatal(err)
		}
		chfixture.Event{EventID: "g-" + string(rune('a'+i)), AppID: "app-1", EventTime: now, ReceivedAt: now, Channel: "web", RawQuery: q}.AddTo(&evs)
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	if err := s.InsertEvents(ctx, &evs); err != nil {
		t.Fatal(err)
	}
	rows, err := s.Conn().Query(cctx, "SELECT query, sum(asked) FROM query_counts WHERE app_id = 'app-1' AND channel = 'web' GROUP BY query ORDER BY query")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]uint64{}
	for rows.Next() {
		var q string
		var n uint64
		if err := rows.Scan(&q, &n); err != nil {
			t.Fatal(err)
		}
		got[q] = n
	}
	if len(got) != 2 || got["where is my order"] != 6 || got["opening hours"] != 2 {
		t.Errorf("query counts %v", got)
	}
}

// TestMigrationThatMovesATableWaitsForItsLock: while another runner holds
// the lock of migration 13 (which moves events to a new table), Migrate
// runs none of its statements and waits; once that runner has applied it
// and given the lock back, Migrate skips it. Runners moving one table at
// once could deadlock an 18.x server's table locks.
func TestMigrationThatMovesATableWaitsForItsLock(t *testing.T) {
	srv := devclickhouse.StartForTest(t)
	ctx := context.Background()
	cfg := chstore.Config{Addrs: []string{srv.Addr()}, Database: "analytics", RetentionDays: 30}
	s, err := chstore.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	take, give, err := chschema.MigrationLock(chschema.Options{Database: "analytics"}, 13)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Conn().Exec(ctx, "CREATE DATABASE IF NOT EXISTS analytics"); err != nil {
		t.Fatal(err)
	}
	if err := s.Conn().Exec(ctx, take); err != nil {
		t.Fatal(err)
	}
	waiting, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	applied, err := s.Migrate(waiting)
	if err == nil || !strings.Contains(err.Error(), "wait for migration 13") {
		t.Fatalf("Migrate with the lock held elsewhere: applied %v, err %v; want it waiting for migration 13", applied, err)
	}
	if slices.Contains(applied, 13) || !slices.Contains(applied, 12) {
		t.Errorf("applied %v while the lock was held; want up to 12", applied)
	}
	var moved uint64
	if err := s.Conn().QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = 'analytics' AND name = 'events_v13'").Scan(&moved); err != nil || moved != 0 {
		t.Fatalf("events_v13 made while the lock was held elsewhere (%d, %v)", moved, err)
	}

	// The holder finishes: it applies 13 and gives the lock back.
	holder, err := chstore.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if err := holder.Conn().Exec(ctx, give); err != nil {
		t.Fatal(err)
	}
	if applied, err := holder.Migrate(ctx); err != nil || !slices.Equal(applied, []int{13, 14}) {
		t.Fatalf("the holder applied %v, %v; want 13 and 14", applied, err)
	}
	if applied, err := s.Migrate(ctx); err != nil || len(applied) != 0 {
		t.Fatalf("after the holder: applied %v, %v; want nothing", applied, err)
	}
	var locks uint64
	if err := s.Conn().QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = 'analytics' AND name LIKE 'schema_migration_lock%'").Scan(&locks); err != nil || locks != 0 {
		t.Errorf("%d lock tables left (%v)", locks, err)
	}
}
