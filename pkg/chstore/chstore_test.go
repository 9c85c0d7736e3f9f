package chstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/devclickhouse"
	"github.com/assistantcms/cms/pkg/event"
)

func startServer(t *testing.T) *devclickhouse.Server { return devclickhouse.StartForTest(t) }

func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	cfg := Config{Addrs: []string{srv.Addr()}, Database: "analytics", RetentionDays: 30}

	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			s, err := Open(ctx, cfg)
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

	s, err := Open(ctx, cfg)
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
		"event_id":         "String",
		"app_id":           "LowCardinality(String)",
		"event_time":       "DateTime('UTC')", // 18.16 has no DateTime64
		"match_confidence": "Nullable(Float32)",
		"display_count":    "UInt16",
		"kafka_offset":     "UInt64",
	}
	for col, typ := range want {
		if types[col] != typ {
			t.Errorf("column %s has type %q, want %q", col, types[col], typ)
		}
	}
	if len(types) != 27 {
		t.Errorf("events has %d columns: %v", len(types), types)
	}
}

func TestQueryCountsView(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	s, err := Open(ctx, Config{Addrs: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
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
	var evs []Row
	for i, q := range queries {
		if err := b.Append("d-"+string(rune('a'+i)), "app-1", now, now, "web", q); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, Row{Decoded: event.Decoded{EventID: "g-" + string(rune('a'+i)), AppID: "app-1",
			EventTime: now, ReceivedAt: now, Channel: "web", RawQuery: q}})
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	if err := s.InsertEvents(ctx, evs); err != nil {
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
	top, err := s.TopQueries(ctx, "app-1", "web", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(top) != 2 || top[0] != (QueryCount{"where is my order", 6}) || top[1] != (QueryCount{"opening hours", 2}) {
		t.Errorf("TopQueries %v", top)
	}
	if top, err := s.TopQueries(ctx, "app-1", "other", 10); err != nil || len(top) != 0 {
		t.Errorf("TopQueries of another channel: %v %v", top, err)
	}
}
