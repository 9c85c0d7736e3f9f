package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Check is what ClickHouse holds of a load.
type Check struct {
	// Acknowledged events were answered 200; Stored of them have a row.
	Acknowledged, Stored int64
	// Missing are acknowledged events without a row: lost.
	Missing int64
	// Duplicates are rows beyond one per event ID that analysts still see
	// after deduplication (with FINAL).
	Duplicates int64
	// RowsBeforeDedup counts the run's rows without FINAL: retries and
	// redelivery show here until ReplacingMergeTree merges them.
	RowsBeforeDedup int64
	// Unacknowledged counts stored events whose batch was never answered
	// 200 (a request the server finished after the client gave up on it,
	// never retried because the load was stopped first).
	Unacknowledged int64
}

// OK reports whether nothing was lost and nothing is doubled.
func (c Check) OK() bool { return c.Missing == 0 && c.Duplicates == 0 }

func (c Check) String() string {
	return fmt.Sprintf("acknowledged %d, stored %d, missing %d, duplicates after deduplication %d, rows before deduplication %d, stored without acknowledgement %d",
		c.Acknowledged, c.Stored, c.Missing, c.Duplicates, c.RowsBeforeDedup, c.Unacknowledged)
}

func (l *Load) pattern() string { return l.cfg.RunID + "-%" }

// WaitStored polls until ClickHouse has a row for as many distinct events
// of the run as were acknowledged, or ctx ends. Call it after Stop.
func (l *Load) WaitStored(ctx context.Context, conn driver.Conn, database string) error {
	want := l.Stats().AcknowledgedEvents
	var have uint64
	for {
		err := conn.QueryRow(ctx, "SELECT uniqExact(event_id) FROM "+database+".events WHERE event_id LIKE ?", l.pattern()).Scan(&have)
		if err == nil && int64(have) >= want {
			return nil
		}
		t := time.NewTimer(250 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			if err != nil {
				return fmt.Errorf("wait for %d events in ClickHouse (have %d): %w (last query: %w)", want, have, ctx.Err(), err)
			}
			return fmt.Errorf("wait for %d events in ClickHouse (have %d): %w", want, have, ctx.Err())
		}
	}
}

// Verify compares ClickHouse with what was acknowledged. Call it after
// Stop (and usually WaitStored).
func (l *Load) Verify(ctx context.Context, conn driver.Conn, database string) (Check, error) {
	l.mu.Lock()
	acked := append([]bool(nil), l.acked...)
	l.mu.Unlock()
	bs := l.cfg.BatchSize
	seen := make([]uint8, len(acked)*bs)

	rows, err := conn.Query(ctx, "SELECT event_id, count() FROM "+database+".events FINAL WHERE event_id LIKE ? GROUP BY event_id", l.pattern())
	if err != nil {
		return Check{}, fmt.Errorf("read the run's events from ClickHouse: %w", err)
	}
	defer rows.Close()
	var c Check
	for rows.Next() {
		var id string
		var n uint64
		if err := rows.Scan(&id, &n); err != nil {
			return Check{}, fmt.Errorf("read the run's events from ClickHouse: %w", err)
		}
		b, k, ok := parseEventID(l.cfg.RunID, id)
		if !ok || b >= len(acked) || k >= bs {
			return Check{}, fmt.Errorf("ClickHouse holds event %q, which this run never sent", id)
		}
		c.Duplicates += int64(n) - 1
		if !acked[b] {
			c.Unacknowledged++
			continue
		}
		seen[b*bs+k] = 1
	}
	if err := rows.Err(); err != nil {
		return Check{}, fmt.Errorf("read the run's events from ClickHouse: %w", err)
	}
	for b, ok := range acked {
		if !ok {
			continue
		}
		c.Acknowledged += int64(bs)
		for k := range bs {
			c.Stored += int64(seen[b*bs+k])
		}
	}
	c.Missing = c.Acknowledged - c.Stored
	var before uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM "+database+".events WHERE event_id LIKE ?", l.pattern()).Scan(&before); err != nil {
		return Check{}, fmt.Errorf("count the run's rows in ClickHouse: %w", err)
	}
	c.RowsBeforeDedup = int64(before)
	if c.Acknowledged == 0 {
		return c, errors.New("no event was acknowledged, so there is nothing to check")
	}
	return c, nil
}
