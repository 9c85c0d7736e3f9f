package chstore

import (
	"sync"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
)

// StringColumns supplies clickhouse-go with the buffers of the String
// columns of event inserts, sized for the batch being inserted.
// clickhouse-go otherwise starts each column empty and grows it value by
// value, copying it several times over: for the consumer's batches that
// copying costs a third of the insert. clickhouse-go takes one such
// supplier for the whole process, so a program installs one with
// InstallStringColumns and gives it to its Store in Config.
type StringColumns struct {
	mu sync.Mutex
	// expected holds the sizes of the insert being prepared.
	expected map[string]columnSize
}

type columnSize struct{ values, bytes int }

// InstallStringColumns makes a StringColumns supply the String columns of
// every clickhouse-go query of the process and returns it. Call it once,
// before the process's first query. Columns of other queries come empty,
// as they would without it.
func InstallStringColumns() *StringColumns {
	s := &StringColumns{}
	column.WithColStrProvider(s.column)
	return s
}

// column returns the buffer of a new String column.
func (s *StringColumns) column(name string) proto.ColStr {
	s.mu.Lock()
	size, ok := s.expected[name]
	s.mu.Unlock()
	if !ok {
		return proto.ColStr{}
	}
	return proto.ColStr{Buf: make([]byte, 0, size.bytes), Pos: make([]proto.Position, 0, size.values)}
}

// expect makes the columns created until done take the given sizes.
func (s *StringColumns) expect(sizes map[string]columnSize) {
	s.mu.Lock()
	s.expected = sizes
	s.mu.Unlock()
}

func (s *StringColumns) done() { s.expect(nil) }

// stringSizes returns the sizes of the String columns of the batch's
// insert, by name; the values of Array(String) columns count as one
// column. It runs after Columns, which fills query_normalized.
func (b *EventBatch) stringSizes() map[string]columnSize {
	sizes := make(map[string]columnSize, 14)
	for name, col := range map[string][]string{
		"event_id": b.EventID, "session_id": b.SessionID, "user_id": b.UserID, "raw_query": b.RawQuery,
		"query_normalized": b.queryNormalized, "output_display_text": b.DisplayText, "output_ssml": b.SSML, "tag": b.Tag,
		"error_message": b.ErrorMessage, "error_stack": b.ErrorStack, "message": b.Message, "payload": b.Payload, "extra": b.Extra,
		"client_network": b.ClientNetwork,
	} {
		sizes[name] = columnSize{values: len(col), bytes: textBytes(col)}
	}
	var tags columnSize
	for _, t := range b.Tags {
		tags.values += len(t)
		tags.bytes += textBytes(t)
	}
	sizes["tags"] = tags
	return sizes
}

func textBytes(col []string) int {
	n := 0
	for _, s := range col {
		n += len(s)
	}
	return n
}
