package chstore

import (
	"context"
	"fmt"
	"time"

	"github.com/assistantcms/cms/pkg/pipeline/event"
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
	"request_type, intent_id, raw_query, query_normalized, match_confidence, output_display_text, output_ssml, " +
	"display_count, tag, tags, error_message, error_stack, message, kb_used, kb_documents, kb_faqs, " +
	"payload, extra, kafka_partition, kafka_offset"

// columns holds a batch column by column: clickhouse-go appends a whole
// column at once far more cheaply than it converts row after row.
type columns struct {
	eventID, appID, orgID, typ, name, session, user, channel, platform         []string
	selected, current, environment, requestType, intentID, rawQuery, queryNorm []string
	displayText, ssml, tag, payload, extra                                     []string
	errorMessage, errorStack, message                                          []string
	tags                                                                       [][]string
	eventTime, receivedAt                                                      []time.Time
	confidence                                                                 []*float32
	displays, partition, kbDocuments, kbFAQs                                   []uint16
	kbUsed                                                                     []uint8
	offset                                                                     []uint64
}

func (c *columns) add(r *Row) {
	c.eventID = append(c.eventID, r.EventID)
	c.appID = append(c.appID, r.AppID)
	c.orgID = append(c.orgID, r.OrganizationID)
	c.eventTime = append(c.eventTime, r.EventTime)
	c.receivedAt = append(c.receivedAt, r.ReceivedAt)
	c.typ = append(c.typ, r.Type)
	c.name = append(c.name, r.Name)
	c.session = append(c.session, r.SessionID)
	c.user = append(c.user, r.UserID)
	c.channel = append(c.channel, r.Channel)
	c.platform = append(c.platform, r.Platform)
	c.selected = append(c.selected, r.SelectedHandler)
	c.current = append(c.current, r.CurrentHandler)
	c.environment = append(c.environment, r.Environment)
	c.requestType = append(c.requestType, r.RequestType)
	c.intentID = append(c.intentID, r.IntentID)
	c.rawQuery = append(c.rawQuery, r.RawQuery)
	// Normalised here rather than by the column's default, which costs the
	// server more than the whole rest of the insert.
	c.queryNorm = append(c.queryNorm, event.NormalizeQuery(r.RawQuery))
	c.confidence = append(c.confidence, r.MatchConfidence)
	c.displayText = append(c.displayText, r.DisplayText)
	c.ssml = append(c.ssml, r.SSML)
	c.displays = append(c.displays, uint16(min(r.DisplayCount, 65535)))
	c.tag = append(c.tag, r.Tag)
	c.tags = append(c.tags, r.Tags)
	c.errorMessage = append(c.errorMessage, r.ErrorMessage)
	c.errorStack = append(c.errorStack, r.ErrorStack)
	c.message = append(c.message, r.Message)
	c.kbUsed = append(c.kbUsed, boolByte(r.KBUsed))
	c.kbDocuments = append(c.kbDocuments, uint16(min(r.KBDocuments, 65535)))
	c.kbFAQs = append(c.kbFAQs, uint16(min(r.KBFAQs, 65535)))
	c.payload = append(c.payload, r.Payload)
	c.extra = append(c.extra, r.Extra)
	c.partition = append(c.partition, uint16(r.Partition))
	c.offset = append(c.offset, uint64(r.Offset))
}

// all lists the columns in the order of eventColumns.
func (c *columns) all() []any {
	return []any{c.eventID, c.appID, c.orgID, c.eventTime, c.receivedAt, c.typ, c.name,
		c.session, c.user, c.channel, c.platform, c.selected, c.current, c.environment,
		c.requestType, c.intentID, c.rawQuery, c.queryNorm, c.confidence, c.displayText, c.ssml,
		c.displays, c.tag, c.tags, c.errorMessage, c.errorStack, c.message, c.kbUsed, c.kbDocuments, c.kbFAQs,
		c.payload, c.extra, c.partition, c.offset}
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

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
	var c columns
	for i := range rows {
		c.add(&rows[i])
	}
	for i, col := range c.all() {
		if err := b.Column(i).Append(col); err != nil {
			_ = b.Abort()
			return fmt.Errorf("encode column %d of %d events for insert: %w", i, len(rows), err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("insert %d events: %w", len(rows), err)
	}
	return nil
}

// QuarantineRow is one quarantined event with where it came from.
type QuarantineRow struct {
	event.Quarantined
	Partition int
	Offset    int64
}

const quarantineColumns = "received_at, app_id, organization_id, event_id, batch_index, reason, field, message, " +
	"errors, event, event_bytes, truncated, kafka_partition, kafka_offset"

// InsertQuarantine writes quarantined events in one insert.
func (s *Store) InsertQuarantine(ctx context.Context, rows []QuarantineRow) error {
	if len(rows) == 0 {
		return nil
	}
	ctx = s.Context(ctx)
	b, err := s.conn.PrepareBatch(ctx, "INSERT INTO `"+s.cfg.Database+"`.quarantine ("+quarantineColumns+")")
	if err != nil {
		return fmt.Errorf("prepare insert of %d quarantined events: %w", len(rows), err)
	}
	for i := range rows {
		r := &rows[i]
		if err := b.Append(r.ReceivedAt, r.AppID, r.OrganizationID, r.EventID, uint32(r.Index), r.Reason, r.Field, r.Message,
			r.Errors, r.Event, uint64(r.EventBytes), boolByte(r.Truncated), uint16(r.Partition), uint64(r.Offset)); err != nil {
			_ = b.Abort()
			return fmt.Errorf("encode quarantined event %d of %d for insert: %w", i, len(rows), err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("insert %d quarantined events: %w", len(rows), err)
	}
	return nil
}
