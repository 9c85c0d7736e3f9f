package chstore

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestEventBatchKeepsValues fills a batch past the growth of its shared
// storage and checks that earlier rows keep their values.
func TestEventBatchKeepsValues(t *testing.T) {
	var b EventBatch
	const n = 5000
	long := bytes.Repeat([]byte("x"), 900) // n of them fill several text blocks
	for i := range n {
		r := b.AddRow()
		if r != i {
			t.Fatalf("row %d added as %d", i, r)
		}
		id := strconv.Itoa(i)
		b.EventID[r], b.Payload[r] = b.String([]byte("e"+id)), b.String(append(long, id...))
		if i%3 != 0 {
			b.SetMatchConfidence(r, float32(i))
		}
		if i%2 == 0 {
			b.SetTags(r, []string{"t" + id, "u"})
		}
	}
	huge := bytes.Repeat([]byte("h"), textBlock)
	if s := b.String(huge); s != string(huge) {
		t.Error("a string larger than a block changed")
	}
	for i := range n {
		id := strconv.Itoa(i)
		if b.EventID[i] != "e"+id || !strings.HasSuffix(b.Payload[i], "x"+id) || len(b.Payload[i]) != len(long)+len(id) {
			t.Fatalf("row %d: %q, payload of %d bytes", i, b.EventID[i], len(b.Payload[i]))
		}
		if c := b.MatchConfidence[i]; (i%3 == 0) != (c == nil) || (c != nil && *c != float32(i)) {
			t.Fatalf("row %d: confidence %v", i, c)
		}
		wantTags, wantTag := []string(nil), ""
		if i%2 == 0 {
			wantTags, wantTag = []string{"t" + id, "u"}, "t"+id
		}
		if !slices.Equal(b.Tags[i], wantTags) || b.Tag[i] != wantTag {
			t.Fatalf("row %d: tags %q, tag %q", i, b.Tags[i], b.Tag[i])
		}
	}
	if _, err := b.Columns(); err != nil {
		t.Fatal(err)
	}

	b.Reset()
	if b.Len() != 0 {
		t.Fatalf("%d rows after Reset", b.Len())
	}
	r := b.AddRow()
	if b.EventID[r] != "" || b.MatchConfidence[r] != nil || b.Tags[r] != nil || b.Tag[r] != "" || b.KBUsed[r] != 0 {
		t.Errorf("a row added after Reset holds values of the last batch")
	}
}

func TestEventBatchRefusesRaggedColumns(t *testing.T) {
	var b EventBatch
	b.AddRow()
	b.Channel = append(b.Channel, "web")
	if _, err := b.Columns(); err == nil || !strings.Contains(err.Error(), "2 values for 1 rows") {
		t.Errorf("columns of unequal length: %v", err)
	}
}

// TestStringColumnsSizeTheInsert checks that the String columns created
// while an insert is prepared take the sizes of its batch, and others none.
func TestStringColumnsSizeTheInsert(t *testing.T) {
	var b EventBatch
	for i, p := range []string{`{"a":1}`, `{"bb":22}`} {
		r := b.AddRow()
		b.Payload[r] = p
		b.RawQuery[r] = "Query " + strconv.Itoa(i)
		b.SetTags(r, []string{"x", "yy"})
	}
	if _, err := b.Columns(); err != nil {
		t.Fatal(err)
	}
	var sc StringColumns
	sc.expect(b.stringSizes())
	for name, want := range map[string][2]int{"payload": {2, 16}, "query_normalized": {2, 14}, "tags": {4, 6}, "event_id": {2, 0}, "app_id": {0, 0}} {
		c := sc.column(name)
		if cap(c.Pos) != want[0] || cap(c.Buf) != want[1] || len(c.Pos) != 0 || len(c.Buf) != 0 {
			t.Errorf("column %s: room for %d values of %d bytes, want %v", name, cap(c.Pos), cap(c.Buf), want)
		}
	}
	sc.done()
	if c := sc.column("payload"); cap(c.Buf) != 0 {
		t.Errorf("a column created after the insert was prepared has room for %d bytes", cap(c.Buf))
	}
}

func TestLowCardinalityColumns(t *testing.T) {
	names := strings.Split(EventColumns, ", ")
	var got []string
	for _, c := range lowCardinalityColumns {
		got = append(got, names[c])
	}
	want := []string{"app_id", "organization_id", "type", "name", "channel", "platform", "selected_handler", "current_handler",
		"environment", "request_type", "intent_id", "token_id"}
	if !slices.Equal(got, want) {
		t.Errorf("positions name %v, want the LowCardinality columns %v", got, want)
	}
}
