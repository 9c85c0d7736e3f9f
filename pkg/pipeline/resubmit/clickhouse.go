package resubmit

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/assistantcms/cms/pkg/pipeline/chstore"
)

// Filter chooses the quarantined events to resubmit; zero fields choose
// all.
type Filter struct {
	AppID, Reason string
	// Since and Until bound when the events were received: Since <= t < Until.
	Since, Until time.Time
	// Limit caps how many events are chosen; 0 means no cap.
	Limit int
}

// QuarantineKey names one quarantined event.
type QuarantineKey struct {
	AppID, OrganizationID, EventID string
	ReceivedAt                     time.Time
	// Truncated says only the event's first part was kept.
	Truncated bool
}

// EventKey identifies an event across apps.
type EventKey struct{ AppID, EventID string }

// ClickHouse is the Store of the pipeline's ClickHouse tables: the
// quarantine table, and the events table to look stored events up in.
type ClickHouse struct{ store *chstore.Store }

// NewClickHouse returns the Store reading the tables of s.
func NewClickHouse(s *chstore.Store) *ClickHouse { return &ClickHouse{store: s} }

// QuarantineKeys lists the quarantined events the filter chooses, oldest
// first. Only keys are read, so that the events themselves can be read a
// few at a time.
func (c *ClickHouse) QuarantineKeys(ctx context.Context, f Filter) ([]QuarantineKey, error) {
	var where []string
	var args []any
	if f.AppID != "" {
		where, args = append(where, "app_id = ?"), append(args, f.AppID)
	}
	if f.Reason != "" {
		where, args = append(where, "reason = ?"), append(args, f.Reason)
	}
	// Seconds, as every server version stores at least.
	if !f.Since.IsZero() {
		where, args = append(where, "received_at >= toDateTime(?)"), append(args, f.Since.Unix())
	}
	if !f.Until.IsZero() {
		where, args = append(where, "received_at < toDateTime(?)"), append(args, f.Until.Unix())
	}
	q := "SELECT app_id, organization_id, event_id, received_at, truncated FROM " + c.store.Table("quarantine") + " FINAL"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY received_at, app_id, event_id"
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	rows, err := c.store.Conn().Query(c.store.Context(ctx), q, args...)
	if err != nil {
		return nil, fmt.Errorf("list quarantined events: %w", err)
	}
	defer rows.Close()
	var out []QuarantineKey
	for rows.Next() {
		var k QuarantineKey
		var truncated uint8
		if err := rows.Scan(&k.AppID, &k.OrganizationID, &k.EventID, &k.ReceivedAt, &truncated); err != nil {
			return nil, fmt.Errorf("list quarantined events: %w", err)
		}
		k.ReceivedAt, k.Truncated = k.ReceivedAt.UTC(), truncated != 0
		out = append(out, k)
	}
	return out, rows.Err()
}

// inTuple renders values as the tuple ('a', 'b'), which every server
// takes after IN; a plain slice renders as an array, which old servers
// refuse there.
func inTuple(values []string) clickhouse.GroupSet {
	s := clickhouse.GroupSet{Value: make([]any, len(values))}
	for i, v := range values {
		s.Value[i] = v
	}
	return s
}

// StoredEventIDs returns which of the events the events table holds.
func (c *ClickHouse) StoredEventIDs(ctx context.Context, keys []QuarantineKey) (map[EventKey]bool, error) {
	out := map[EventKey]bool{}
	err := c.perApp(ctx, keys, "look up events", "SELECT DISTINCT event_id FROM "+c.store.Table("events")+" WHERE app_id = ? AND event_id IN ?",
		func(app string, rows driver.Rows) error {
			var id string
			err := rows.Scan(&id)
			out[EventKey{app, id}] = true
			return err
		})
	return out, err
}

// QuarantinedEvents reads the events, as sent, of the keys.
func (c *ClickHouse) QuarantinedEvents(ctx context.Context, keys []QuarantineKey) (map[EventKey]string, error) {
	out := make(map[EventKey]string, len(keys))
	err := c.perApp(ctx, keys, "read quarantined events", "SELECT event_id, any(event) FROM "+c.store.Table("quarantine")+" WHERE app_id = ? AND event_id IN ? GROUP BY event_id",
		func(app string, rows driver.Rows) error {
			var id, ev string
			err := rows.Scan(&id, &ev)
			out[EventKey{app, id}] = ev
			return err
		})
	return out, err
}

// perApp runs query, which takes an app and a set of event IDs, once per
// app of keys, so that it reads along the tables' order, and hands each
// row to scan.
func (c *ClickHouse) perApp(ctx context.Context, keys []QuarantineKey, what, query string, scan func(app string, rows driver.Rows) error) error {
	ids := map[string][]string{}
	for _, k := range keys {
		ids[k.AppID] = append(ids[k.AppID], k.EventID)
	}
	for app, appIDs := range ids {
		rows, err := c.store.Conn().Query(c.store.Context(ctx), query, app, inTuple(appIDs))
		if err != nil {
			return fmt.Errorf("%s: %d of app %s: %w", what, len(appIDs), app, err)
		}
		for rows.Next() {
			if err = scan(app, rows); err != nil {
				break
			}
		}
		if err == nil {
			err = rows.Err()
		}
		rows.Close()
		if err != nil {
			return fmt.Errorf("%s of app %s: %w", what, app, err)
		}
	}
	return nil
}
