package chstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// QuarantineFilter chooses quarantined events; zero fields choose all.
type QuarantineFilter struct {
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

// QuarantineKeys lists the quarantined events the filter chooses, oldest
// first. Only keys are read, so that the events themselves can be read a
// few at a time.
func (s *Store) QuarantineKeys(ctx context.Context, f QuarantineFilter) ([]QuarantineKey, error) {
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
	q := "SELECT app_id, organization_id, event_id, received_at, truncated FROM `" + s.cfg.Database + "`.quarantine FINAL"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY received_at, app_id, event_id"
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	rows, err := s.conn.Query(s.Context(ctx), q, args...)
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

// byApp groups event IDs by app, for queries that use the tables' order.
func byApp(keys []QuarantineKey) map[string][]string {
	ids := map[string][]string{}
	for _, k := range keys {
		ids[k.AppID] = append(ids[k.AppID], k.EventID)
	}
	return ids
}

// set renders values as ('a', 'b'), which every server takes after IN; a
// plain slice renders as an array, which old servers refuse there.
func set(values []string) clickhouse.GroupSet {
	s := clickhouse.GroupSet{Value: make([]any, len(values))}
	for i, v := range values {
		s.Value[i] = v
	}
	return s
}

// StoredEventIDs returns which of the events the events table holds.
func (s *Store) StoredEventIDs(ctx context.Context, keys []QuarantineKey) (map[EventKey]bool, error) {
	out := map[EventKey]bool{}
	for app, ids := range byApp(keys) {
		rows, err := s.conn.Query(s.Context(ctx), "SELECT DISTINCT event_id FROM `"+s.cfg.Database+"`.events WHERE app_id = ? AND event_id IN ?", app, set(ids))
		if err != nil {
			return nil, fmt.Errorf("look up %d events of app %s: %w", len(ids), app, err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("look up events of app %s: %w", app, err)
			}
			out[EventKey{app, id}] = true
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("look up events of app %s: %w", app, err)
		}
	}
	return out, nil
}

// QuarantinedEvents reads the events, as sent, of the keys.
func (s *Store) QuarantinedEvents(ctx context.Context, keys []QuarantineKey) (map[EventKey]string, error) {
	out := make(map[EventKey]string, len(keys))
	for app, ids := range byApp(keys) {
		rows, err := s.conn.Query(s.Context(ctx), "SELECT event_id, any(event) FROM `"+s.cfg.Database+"`.quarantine WHERE app_id = ? AND event_id IN ? GROUP BY event_id", app, set(ids))
		if err != nil {
			return nil, fmt.Errorf("read %d quarantined events of app %s: %w", len(ids), app, err)
		}
		for rows.Next() {
			var id, ev string
			if err := rows.Scan(&id, &ev); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read quarantined events of app %s: %w", app, err)
			}
			out[EventKey{app, id}] = ev
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("read quarantined events of app %s: %w", app, err)
		}
	}
	return out, nil
}
