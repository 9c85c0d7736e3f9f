package chstore

import (
	"context"
	"fmt"

	"github.com/assistantcms/cms/pkg/event"
)

// Row is one event with where it came from on the topic.
type Row struct {
	event.Decoded
	Partition int
	Offset    int64
}

// eventColumns are named in every insert: old servers need the list, and
// it keeps inserts working when later migrations add columns.
const eventColumns = "event_id, app_id, organization_id, event_time, received_at, type, name, " +
	"session_id, user_id, channel, platform, selected_handler, current_handler, environment, " +
	"request_type, intent_id, raw_query, match_confidence, output_display_text, output_ssml, " +
	"display_count, tag, payload, extra, kafka_partition, kafka_offset"

// InsertEvents writes rows in one insert. ClickHouse either takes the whole
// block or none of it.
func (s *Store) InsertEvents(ctx context.Context, rows []Row) error {
	if len(rows) == 0 {
		return nil
	}
	ctx = s.Context(ctx)
	b, err := s.conn.PrepareBatch(ctx, "INSERT INTO `"+s.cfg.Database+"`.events ("+eventColumns+")")
	if err != nil {
		return fmt.Errorf("prepare insert of %d events: %w", len(rows), err)
	}
	for i := range rows {
		r := &rows[i]
		displays := r.DisplayCount
		if displays > 65535 {
			displays = 65535
		}
		if err := b.Append(
			r.EventID, r.AppID, r.OrganizationID, r.EventTime, r.ReceivedAt, r.Type, r.Name,
			r.SessionID, r.UserID, r.Channel, r.Platform, r.SelectedHandler, r.CurrentHandler, r.Environment,
			r.RequestType, r.IntentID, r.RawQuery, r.MatchConfidence, r.DisplayText, r.SSML,
			uint16(displays), r.Tag, r.Payload, r.Extra, uint16(r.Partition), uint64(r.Offset),
		); err != nil {
			_ = b.Abort()
			return fmt.Errorf("encode event %s for insert: %w", r.EventID, err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("insert %d events: %w", len(rows), err)
	}
	return nil
}
