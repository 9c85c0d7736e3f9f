package chstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	chschema "github.com/assistantcms/cms/schemas/clickhouse"
)

// EventBatch holds rows of the events table column by column, in the
// types the insert sends: clickhouse-go appends a whole column at once far
// more cheaply than it converts row after row, and a decoder fills the
// columns directly. Every column holds one value per row; AddRow adds a
// row of zero values for the caller to fill in. A batch is reused after
// Reset, so that its columns keep their capacity; it must not be copied.
type EventBatch struct {
	EventID, AppID, OrganizationID []string
	EventTime, ReceivedAt          []time.Time
	// EventTimeSource says where EventTime came from: TimeSourceRuntime
	// (the runtime's isoTime) or TimeSourceReceived (ingest's receipt,
	// what AddRow sets).
	EventTimeSource []int8
	// RuntimeTime is the runtime's own isoTime, nil where it sent none;
	// SetRuntimeTime fills it without an allocation per row.
	RuntimeTime []*time.Time
	// TokenID and ClientNetwork say who sent the row's batch, as the
	// server saw it: the access token's ID and the client's network.
	TokenID, ClientNetwork                             []string
	Type, Name, SessionID, UserID, Channel, Platform   []string
	SelectedHandler, CurrentHandler, Environment       []string
	RequestType, IntentID, RawQuery, DisplayText, SSML []string
	// MatchConfidence is nil where a row has none; SetMatchConfidence
	// fills it without an allocation per row.
	MatchConfidence []*float32
	DisplayCount    []uint16
	// Tag is the first of a row's Tags; SetTags fills both.
	Tag                               []string
	Tags                              [][]string
	ErrorMessage, ErrorStack, Message []string
	KBUsed                            []uint8
	KBDocuments, KBFAQs               []uint16
	Payload, Extra                    []string
	KafkaPartition                    []uint16
	KafkaOffset                       []uint64

	// Storage the rows' values share.
	confidences     []float32   // what MatchConfidence points to
	runtimeTimes    []time.Time // what RuntimeTime points to
	tags            []string    // what Tags are slices of
	queryNormalized []string    // computed at insert
	arrivalRank     []uint64    // computed at insert
	scratch         []byte
	labelColumns    [len(lowCardinalityColumns)][]*string // computed at insert
	labelOf         map[string]*string
	text            strings.Builder // the current block of String
}

// The values of events.event_time_source.
const (
	TimeSourceReceived = chschema.TimeSourceReceived
	TimeSourceRuntime  = chschema.TimeSourceRuntime
)

// AddRow adds a row of zero values and returns its index.
func (b *EventBatch) AddRow() int {
	b.EventID = append(b.EventID, "")
	b.AppID = append(b.AppID, "")
	b.OrganizationID = append(b.OrganizationID, "")
	b.EventTime = append(b.EventTime, time.Time{})
	b.ReceivedAt = append(b.ReceivedAt, time.Time{})
	b.EventTimeSource = append(b.EventTimeSource, chschema.TimeSourceReceived)
	b.RuntimeTime = append(b.RuntimeTime, nil)
	b.TokenID = append(b.TokenID, "")
	b.ClientNetwork = append(b.ClientNetwork, "")
	b.Type = append(b.Type, "")
	b.Name = append(b.Name, "")
	b.SessionID = append(b.SessionID, "")
	b.UserID = append(b.UserID, "")
	b.Channel = append(b.Channel, "")
	b.Platform = append(b.Platform, "")
	b.SelectedHandler = append(b.SelectedHandler, "")
	b.CurrentHandler = append(b.CurrentHandler, "")
	b.Environment = append(b.Environment, "")
	b.RequestType = append(b.RequestType, "")
	b.IntentID = append(b.IntentID, "")
	b.RawQuery = append(b.RawQuery, "")
	b.DisplayText = append(b.DisplayText, "")
	b.SSML = append(b.SSML, "")
	b.MatchConfidence = append(b.MatchConfidence, nil)
	b.DisplayCount = append(b.DisplayCount, 0)
	b.Tag = append(b.Tag, "")
	b.Tags = append(b.Tags, nil)
	b.ErrorMessage = append(b.ErrorMessage, "")
	b.ErrorStack = append(b.ErrorStack, "")
	b.Message = append(b.Message, "")
	b.KBUsed = append(b.KBUsed, 0)
	b.KBDocuments = append(b.KBDocuments, 0)
	b.KBFAQs = append(b.KBFAQs, 0)
	b.Payload = append(b.Payload, "")
	b.Extra = append(b.Extra, "")
	b.KafkaPartition = append(b.KafkaPartition, 0)
	b.KafkaOffset = append(b.KafkaOffset, 0)
	return len(b.EventID) - 1
}

// Len is the number of rows.
func (b *EventBatch) Len() int { return len(b.EventID) }

// textBlock is the size of the blocks String copies text into.
const textBlock = 1 << 20

// String returns p as a string. The text is copied into large blocks the
// batch shares with the strings it returned before, so that decoding a row
// allocates once per block rather than once per string; strings that are
// parts of one such string cost nothing more.
func (b *EventBatch) String(p []byte) string {
	if len(p) == 0 {
		return ""
	}
	if len(p) > textBlock/4 {
		return string(p)
	}
	if b.text.Cap()-b.text.Len() < len(p) {
		// The strings already returned keep the full block alive; the
		// next ones go to a new one.
		b.text = strings.Builder{}
		b.text.Grow(textBlock)
	}
	start := b.text.Len()
	b.text.Write(p)
	return b.text.String()[start:]
}

// SetMatchConfidence sets the match confidence of a row.
func (b *EventBatch) SetMatchConfidence(row int, c float32) {
	if len(b.confidences) == cap(b.confidences) {
		// The rows before keep pointing into the old array, which holds
		// their values unchanged.
		b.confidences = make([]float32, 0, max(64, 2*cap(b.confidences)))
	}
	b.confidences = append(b.confidences, c)
	b.MatchConfidence[row] = &b.confidences[len(b.confidences)-1]
}

// SetRuntimeTime sets the runtime's own time of a row.
func (b *EventBatch) SetRuntimeTime(row int, t time.Time) {
	if len(b.runtimeTimes) == cap(b.runtimeTimes) {
		// As for confidences, earlier rows keep the old array.
		b.runtimeTimes = make([]time.Time, 0, max(64, 2*cap(b.runtimeTimes)))
	}
	b.runtimeTimes = append(b.runtimeTimes, t)
	b.RuntimeTime[row] = &b.runtimeTimes[len(b.runtimeTimes)-1]
}

// SetTags sets the tags of a row (and so its tag, the first of them).
func (b *EventBatch) SetTags(row int, tags []string) {
	if len(tags) == 0 {
		b.Tags[row], b.Tag[row] = nil, ""
		return
	}
	if cap(b.tags)-len(b.tags) < len(tags) {
		// As for confidences, earlier rows keep the old array.
		b.tags = make([]string, 0, max(256, 2*cap(b.tags), len(tags)))
	}
	start := len(b.tags)
	b.tags = append(b.tags, tags...)
	b.Tags[row], b.Tag[row] = b.tags[start:len(b.tags):len(b.tags)], tags[0]
}

// Reset empties the batch and keeps its capacity. It drops the batch's
// references to the rows' text, so that memory can be freed.
func (b *EventBatch) Reset() {
	for _, col := range b.stringColumns() {
		clear(*col)
		*col = (*col)[:0]
	}
	clear(b.MatchConfidence)
	clear(b.RuntimeTime)
	clear(b.Tags)
	clear(b.tags)
	b.EventTime, b.ReceivedAt, b.EventTimeSource = b.EventTime[:0], b.ReceivedAt[:0], b.EventTimeSource[:0]
	b.RuntimeTime, b.runtimeTimes = b.RuntimeTime[:0], b.runtimeTimes[:0]
	b.MatchConfidence, b.DisplayCount, b.Tags = b.MatchConfidence[:0], b.DisplayCount[:0], b.Tags[:0]
	b.KBUsed, b.KBDocuments, b.KBFAQs = b.KBUsed[:0], b.KBDocuments[:0], b.KBFAQs[:0]
	b.KafkaPartition, b.KafkaOffset = b.KafkaPartition[:0], b.KafkaOffset[:0]
	b.confidences, b.tags, b.arrivalRank = b.confidences[:0], b.tags[:0], b.arrivalRank[:0]
	for i := range b.labelColumns {
		clear(b.labelColumns[i])
		b.labelColumns[i] = b.labelColumns[i][:0]
	}
	clear(b.labelOf)
}

func (b *EventBatch) stringColumns() []*[]string {
	return []*[]string{&b.EventID, &b.AppID, &b.OrganizationID, &b.Type, &b.Name, &b.SessionID, &b.UserID, &b.Channel,
		&b.Platform, &b.SelectedHandler, &b.CurrentHandler, &b.Environment, &b.RequestType, &b.IntentID, &b.RawQuery,
		&b.DisplayText, &b.SSML, &b.Tag, &b.ErrorMessage, &b.ErrorStack, &b.Message, &b.Payload, &b.Extra, &b.queryNormalized,
		&b.TokenID, &b.ClientNetwork}
}

// EventColumns are the columns of the events table an insert names, in
// the order of Columns: old servers need the list, and it keeps inserts
// working when later migrations add columns. arrival_rank, computed from
// ReceivedAt, makes the copy of an event received first the one the
// table keeps (see schemas/clickhouse migration 13).
const EventColumns = "event_id, app_id, organization_id, event_time, received_at, type, name, " +
	"session_id, user_id, channel, platform, selected_handler, current_handler, environment, " +
	"request_type, intent_id, raw_query, query_normalized, match_confidence, output_display_text, output_ssml, " +
	"display_count, tag, tags, error_message, error_stack, message, kb_used, kb_documents, kb_faqs, " +
	"event_time_source, runtime_time, token_id, client_network, payload, extra, kafka_partition, kafka_offset, arrival_rank"

// Columns lists the columns as the insert sends them, in the order of
// EventColumns, after checking that they all hold one value per row. It
// fills the columns computed at insert (query_normalized, and the
// LowCardinality columns as pointers), which the batch keeps until the
// next call or Reset.
func (b *EventBatch) Columns() ([]any, error) {
	// Normalised here rather than by the column's default, which costs the
	// server more than the whole rest of the insert.
	b.queryNormalized = b.queryNormalized[:0]
	for _, q := range b.RawQuery {
		if !chschema.IsNormalQuery(q) {
			b.scratch = chschema.AppendNormalQuery(b.scratch[:0], q)
			q = b.String(b.scratch)
		}
		b.queryNormalized = append(b.queryNormalized, q)
	}
	// From the receipt's nanoseconds rather than by the column's default,
	// which sees only the seconds on servers without DateTime64: two copies
	// received within a second are still told apart.
	b.arrivalRank = b.arrivalRank[:0]
	for _, at := range b.ReceivedAt {
		b.arrivalRank = append(b.arrivalRank, chschema.ArrivalRank(at))
	}
	cols := []any{b.EventID, b.AppID, b.OrganizationID, b.EventTime, b.ReceivedAt, b.Type, b.Name,
		b.SessionID, b.UserID, b.Channel, b.Platform, b.SelectedHandler, b.CurrentHandler, b.Environment,
		b.RequestType, b.IntentID, b.RawQuery, b.queryNormalized, b.MatchConfidence, b.DisplayText, b.SSML,
		b.DisplayCount, b.Tag, b.Tags, b.ErrorMessage, b.ErrorStack, b.Message, b.KBUsed, b.KBDocuments, b.KBFAQs,
		b.EventTimeSource, b.RuntimeTime, b.TokenID, b.ClientNetwork, b.Payload, b.Extra, b.KafkaPartition, b.KafkaOffset,
		b.arrivalRank}
	n := b.Len()
	for i, c := range cols {
		if l := columnLen(c); l != n {
			return nil, fmt.Errorf("column %d of the events batch holds %d values for %d rows", i, l, n)
		}
	}
	// LowCardinality columns go as pointers, one per distinct value:
	// clickhouse-go builds such a column's dictionary by the values it is
	// given, and boxes and hashes a pointer without copying the string or
	// reading it, as it would a string value for every row.
	if b.labelOf == nil {
		b.labelOf = map[string]*string{}
	}
	clear(b.labelOf)
	for i, c := range lowCardinalityColumns {
		cols[c] = b.labels(i, cols[c].([]string))
	}
	return cols, nil
}

// lowCardinalityColumns are the positions in EventColumns of the columns of
// type LowCardinality(String).
var lowCardinalityColumns = [...]int{1, 2, 5, 6, 9, 10, 11, 12, 13, 14, 15, 32}

// labels returns col as pointers that are equal for equal values, in the
// i-th of the batch's label columns.
func (b *EventBatch) labels(i int, col []string) []*string {
	out := b.labelColumns[i][:0]
	for _, s := range col {
		p, ok := b.labelOf[s]
		if !ok {
			p = new(string)
			*p = s
			b.labelOf[s] = p
		}
		out = append(out, p)
	}
	b.labelColumns[i] = out
	return out
}

func columnLen(c any) int {
	switch c := c.(type) {
	case []string:
		return len(c)
	case []*string:
		return len(c)
	case []time.Time:
		return len(c)
	case []*float32:
		return len(c)
	case []*time.Time:
		return len(c)
	case []uint16:
		return len(c)
	case [][]string:
		return len(c)
	case []uint8:
		return len(c)
	case []int8:
		return len(c)
	case []uint64:
		return len(c)
	}
	return -1
}

// InsertEvents writes the batch in one insert. ClickHouse either takes the
// whole block or none of it. The batch is unchanged, so a failed insert can
// be retried with it.
func (s *Store) InsertEvents(ctx context.Context, b *EventBatch) error {
	return s.insertEvents(ctx, "events", b)
}

// insertEvents is InsertEvents into the table named.
func (s *Store) insertEvents(ctx context.Context, table string, b *EventBatch) error {
	return s.insertEventColumns(ctx, table, EventColumns, b)
}

// insertEventColumns is insertEvents naming only the first of EventColumns
// given in names: what a table made by fewer migrations takes.
func (s *Store) insertEventColumns(ctx context.Context, table, names string, b *EventBatch) error {
	n := b.Len()
	if n == 0 {
		return nil
	}
	cols, err := b.Columns()
	if err != nil {
		return err
	}
	cols = cols[:len(strings.Split(names, ", "))]
	ctx = s.Context(ctx)
	if sc := s.cfg.StringColumns; sc != nil {
		sc.expect(b.stringSizes())
		defer sc.done()
	}
	batch, err := s.conn.PrepareBatch(ctx, "INSERT INTO `"+s.cfg.Database+"`."+table+" ("+names+")")
	if err != nil {
		return fmt.Errorf("prepare insert of %d events: %w", n, err)
	}
	for i, col := range cols {
		if err := batch.Column(i).Append(col); err != nil {
			_ = batch.Abort()
			return fmt.Errorf("encode column %d of %d events for insert: %w", i, n, err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("insert %d events: %w", n, err)
	}
	return nil
}

// QuarantineRow is one row of the quarantine table: a quarantine record
// and where it was read.
type QuarantineRow struct {
	EventID, AppID, OrganizationID string
	ReceivedAt                     time.Time
	// Index is the event's position in the batch it came in.
	Index int
	// Reason, Field and Message are the first error's.
	Reason, Field, Message string
	// Errors is every error, as the JSON array the record holds.
	Errors string
	// Event is the event as sent (JSON text); when Truncated, the first
	// part of that text.
	Event      string
	EventBytes int
	Truncated  bool
	// Partition and Offset say where the record was read.
	Partition int
	Offset    int64
}

// Values are the row's values as the insert sends them, in the order of
// QuarantineColumns.
func (r *QuarantineRow) Values() []any {
	return []any{r.ReceivedAt, r.AppID, r.OrganizationID, r.EventID, uint32(r.Index), r.Reason, r.Field, r.Message,
		r.Errors, r.Event, uint64(r.EventBytes), boolByte(r.Truncated), uint16(r.Partition), uint64(r.Offset)}
}

// QuarantineColumns are the columns of the quarantine table an insert
// names, in the order of Values.
const QuarantineColumns = "received_at, app_id, organization_id, event_id, batch_index, reason, field, message, " +
	"errors, event, event_bytes, truncated, kafka_partition, kafka_offset"

// InsertQuarantine writes quarantined events in one insert.
func (s *Store) InsertQuarantine(ctx context.Context, rows []QuarantineRow) error {
	if len(rows) == 0 {
		return nil
	}
	ctx = s.Context(ctx)
	b, err := s.conn.PrepareBatch(ctx, "INSERT INTO `"+s.cfg.Database+"`.quarantine ("+QuarantineColumns+")")
	if err != nil {
		return fmt.Errorf("prepare insert of %d quarantined events: %w", len(rows), err)
	}
	for i := range rows {
		r := &rows[i]
		if err := b.Append(r.Values()...); err != nil {
			_ = b.Abort()
			return fmt.Errorf("encode quarantined event %d of %d for insert: %w", i, len(rows), err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("insert %d quarantined events: %w", len(rows), err)
	}
	return nil
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
