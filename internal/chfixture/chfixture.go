// Package chfixture gives tests of the pipeline's ClickHouse packages
// their rows and databases: an events row described field by field, a
// new 18.16 server with the schema applied, a ClickHouse 26 engine with
// the schema applied, and batches exported as that engine's input through
// the columns the consumer inserts.
package chfixture

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/analyticsdoc"
	"github.com/assistantcms/cms/internal/devclickhouse"
	"github.com/assistantcms/cms/internal/modernch"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	chschema "github.com/assistantcms/cms/schemas/clickhouse"
)

// Event is a row of the events table.
type Event struct {
	EventID, AppID, OrganizationID                     string
	EventTime, ReceivedAt                              time.Time
	Type, Name, SessionID, UserID, Channel, Platform   string
	SelectedHandler, CurrentHandler, Environment       string
	RequestType, IntentID, RawQuery, DisplayText, SSML string
	MatchConfidence                                    *float32
	DisplayCount                                       uint16
	Tags                                               []string
	ErrorMessage, ErrorStack, Message                  string
	KBUsed                                             bool
	KBDocuments, KBFAQs                                uint16
	Payload, Extra                                     string
	Partition                                          uint16
	Offset                                             uint64
	TimeSource                                         int8
	RuntimeTime                                        *time.Time
	TokenID, ClientNetwork                             string
}

// AddTo adds the row to b.
func (f Event) AddTo(b *chstore.EventBatch) {
	i := b.AddRow()
	b.EventID[i], b.AppID[i], b.OrganizationID[i], b.EventTime[i], b.ReceivedAt[i] = f.EventID, f.AppID, f.OrganizationID, f.EventTime, f.ReceivedAt
	b.Type[i], b.Name[i], b.SessionID[i], b.UserID[i], b.Channel[i], b.Platform[i] = f.Type, f.Name, f.SessionID, f.UserID, f.Channel, f.Platform
	b.SelectedHandler[i], b.CurrentHandler[i], b.Environment[i] = f.SelectedHandler, f.CurrentHandler, f.Environment
	b.RequestType[i], b.IntentID[i], b.RawQuery[i], b.DisplayText[i], b.SSML[i] = f.RequestType, f.IntentID, f.RawQuery, f.DisplayText, f.SSML
	if f.MatchConfidence != nil {
		b.SetMatchConfidence(i, *f.MatchConfidence)
	}
	b.DisplayCount[i] = f.DisplayCount
	b.SetTags(i, f.Tags)
	b.ErrorMessage[i], b.ErrorStack[i], b.Message[i] = f.ErrorMessage, f.ErrorStack, f.Message
	if f.KBUsed {
		b.KBUsed[i] = 1
	}
	b.KBDocuments[i], b.KBFAQs[i] = f.KBDocuments, f.KBFAQs
	b.Payload[i], b.Extra[i], b.KafkaPartition[i], b.KafkaOffset[i] = f.Payload, f.Extra, f.Partition, f.Offset
	if f.TimeSource != 0 {
		b.EventTimeSource[i] = f.TimeSource
	}
	if f.RuntimeTime != nil {
		b.SetRuntimeTime(i, *f.RuntimeTime)
	}
	b.TokenID[i], b.ClientNetwork[i] = f.TokenID, f.ClientNetwork
}

// Confidence is a match confidence as Event holds it.
func Confidence(c float32) *float32 { return &c }

// AnalystRows are the rows the analysts' queries are tested on, as the
// consumer writes them: two event batches (the second retries an event of
// the first) and quarantined events. t0 is today, 01:00 UTC.
func AnalystRows() (t0 time.Time, batches []*chstore.EventBatch, quarantine []chstore.QuarantineRow) {
	t0 = time.Now().UTC().Truncate(24 * time.Hour).Add(time.Hour)
	ev := func(id, session, user, channel, typ, name, handler string, at time.Duration) Event {
		return Event{EventID: id, AppID: "demo-app", OrganizationID: "o", EventTime: t0.Add(at), ReceivedAt: t0.Add(at),
			Type: typ, Name: name, SessionID: session, UserID: user, Channel: channel, SelectedHandler: handler, Extra: "{}",
			TokenID: "0123456789abcdef", ClientNetwork: "192.0.2.0/24"}
	}
	launch := ev("e1", "session-1", "u1", "web", "REQUEST", "LAUNCH_REQUEST", "LaunchRequest", 0)
	rr1 := ev("e2", "session-1", "u1", "web", "AnalyticsEvent", "REQUEST_RESPONSE", "OrderStatus", time.Second)
	rr1.RequestType, rr1.IntentID, rr1.RawQuery, rr1.MatchConfidence, rr1.DisplayText = "INTENT_REQUEST", "OrderStatus", "Where is my order", Confidence(0.9), "Soon."
	rr1.Tags = []string{"orders", "status"}
	unknown := ev("e3", "session-1", "u1", "web", "AnalyticsEvent", "REQUEST_RESPONSE", "Fallback", 2*time.Second)
	unknown.RequestType, unknown.RawQuery, unknown.DisplayText = "INPUT_UNKNOWN_REQUEST", "blah blah", "Sorry?"
	unknown.KBUsed, unknown.KBDocuments, unknown.KBFAQs, unknown.Tags = true, 10, 2, []string{"kb"}
	failure := ev("e4", "session-1", "u1", "web", "ERROR", "HandlerError", "OrderStatus", 3*time.Second)
	failure.ErrorMessage, failure.ErrorStack = "boom", `[{"file":"index.js"}]`
	rr2 := ev("e5", "session-2", "u2", "sms", "AnalyticsEvent", "REQUEST_RESPONSE", "OrderStatus", 4*time.Second)
	rr2.RequestType, rr2.IntentID, rr2.RawQuery, rr2.MatchConfidence = "INTENT_REQUEST", "OrderStatus", "where is my order", Confidence(0.4)
	rr2.KBUsed, rr2.KBDocuments, rr2.Tags = true, 4, []string{"orders"}
	finished := ev("e6", "session-2", "u2", "sms", "LambdaErrorEvent", "Lambda Finished", "OrderStatus", 5*time.Second)
	finished.ErrorMessage, finished.Message = "boom", "boom"
	first, retry := &chstore.EventBatch{}, &chstore.EventBatch{}
	for i, f := range []Event{launch, rr1, unknown, failure, rr2, finished} {
		f.Offset = uint64(i)
		f.AddTo(first)
	}
	rr1.Offset = 1
	rr1.AddTo(retry) // rr1 twice, as a retry writes it
	quarantined := func(id, reason, field string, at time.Duration) chstore.QuarantineRow {
		return chstore.QuarantineRow{EventID: id, AppID: "demo-app", OrganizationID: "o", ReceivedAt: t0.Add(at),
			Reason: reason, Field: field, Message: "m", Errors: "[]", Event: "{}", EventBytes: 2}
	}
	// q-1 and q-2 wait; e5 was quarantined once and has been resubmitted.
	quarantine = []chstore.QuarantineRow{quarantined("q-1", "too_large", "", 0), quarantined("q-2", "type_not_allowed", "type", time.Second),
		quarantined("e5", "too_large", "", 2*time.Second)}
	return t0, []*chstore.EventBatch{first, retry}, quarantine
}

// Migrated opens the default database of a new server, with the schema
// applied; columns (nil for clickhouse-go's own) sizes its inserts. The
// store closes when the test ends.
func Migrated(t testing.TB, columns *chstore.StringColumns) *chstore.Store {
	t.Helper()
	ctx := context.Background()
	s, err := chstore.Open(ctx, chstore.Config{Addrs: []string{devclickhouse.StartForTest(t).Addr()}, StringColumns: columns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// Query runs sql on s and returns its rows with every value formatted as
// text: times in RFC 3339 (UTC), floats to three digits, the rest by %v.
func Query(t testing.TB, s *chstore.Store, sql string) [][]string {
	t.Helper()
	_, rows := QueryColumns(t, s, sql)
	return rows
}

// QueryColumns is Query that returns the result's column names too.
func QueryColumns(t testing.TB, s *chstore.Store, sql string) (names []string, out [][]string) {
	t.Helper()
	names, values, err := analyticsdoc.Query(s.Context(context.Background()), s.Conn(), sql)
	if err != nil {
		t.Fatal(err)
	}
	for _, vals := range values {
		row := make([]string, len(vals))
		for i, v := range vals {
			switch x := v.(type) {
			case time.Time:
				row[i] = x.UTC().Format(time.RFC3339)
			case float32, float64:
				row[i] = fmt.Sprintf("%.3g", x)
			default:
				row[i] = fmt.Sprint(x)
			}
		}
		out = append(out, row)
	}
	return names, out
}

// ModernMigrated opens a session on the modern engine, with o's cluster
// configured when it names one, and applies every migration rendered for
// that engine with o.
func ModernMigrated(ctx context.Context, t testing.TB, o chschema.Options) *modernch.Session {
	t.Helper()
	modern := modernch.OpenForTestWith(t, modernch.Options{Cluster: o.Cluster})
	v, err := chschema.ParseVersion(modern.Version)
	if err != nil {
		t.Fatal(err)
	}
	migs, err := chschema.Render(chschema.FeaturesOf(v), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migs {
		for _, st := range m.Statements {
			if err := modern.Exec(ctx, st); err != nil {
				t.Fatalf("migration %d (%s): %v\n%s", m.Version, m.Name, err, st)
			}
		}
	}
	return modern
}

// InsertModern writes events and quarantined rows to the events and
// quarantine tables of db on the modern engine, through the columns and
// values the consumer inserts.
func InsertModern(ctx context.Context, t testing.TB, modern *modernch.Session, db string, events *chstore.EventBatch, quarantine []chstore.QuarantineRow) {
	t.Helper()
	if events != nil && events.Len() > 0 {
		rows, err := EventRows(events)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := modern.Insert(ctx, db+".events", strings.Split(chstore.EventColumns, ", "), "JSONCompactEachRow", rows); err != nil || n != events.Len() {
			t.Fatalf("insert events: %d rows of %d, %v", n, events.Len(), err)
		}
	}
	if len(quarantine) > 0 {
		rows, err := QuarantineRows(quarantine)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := modern.Insert(ctx, db+".quarantine", strings.Split(chstore.QuarantineColumns, ", "), "JSONCompactEachRow", rows); err != nil || n != len(quarantine) {
			t.Fatalf("insert quarantine: %d rows of %d, %v", n, len(quarantine), err)
		}
	}
}

// EventRows exports the batch, through the columns the consumer inserts,
// as JSONCompactEachRow in the order of chstore.EventColumns.
func EventRows(b *chstore.EventBatch) ([]byte, error) {
	cols, err := b.Columns()
	if err != nil {
		return nil, err
	}
	var out []byte
	for i := range b.Len() {
		row := make([]any, len(cols))
		for j, c := range cols {
			if row[j], err = jsonValue(c, i); err != nil {
				return nil, fmt.Errorf("column %d: %w", j, err)
			}
		}
		line, err := json.Marshal(row)
		if err != nil {
			return nil, err
		}
		out = append(append(out, line...), '\n')
	}
	return out, nil
}

// QuarantineRows exports rows, through the values the consumer inserts,
// as JSONCompactEachRow in the order of chstore.QuarantineColumns.
func QuarantineRows(rows []chstore.QuarantineRow) ([]byte, error) {
	var out []byte
	for i := range rows {
		vals := rows[i].Values()
		for j, v := range vals {
			if at, ok := v.(time.Time); ok {
				vals[j] = jsonTime(at)
			}
		}
		line, err := json.Marshal(vals)
		if err != nil {
			return nil, err
		}
		out = append(append(out, line...), '\n')
	}
	return out, nil
}

// jsonValue is row i of a column of the insert, as JSON input takes it.
func jsonValue(col any, i int) (any, error) {
	switch c := col.(type) {
	case []string:
		return c[i], nil
	case []*string:
		return *c[i], nil
	case []time.Time:
		return jsonTime(c[i]), nil
	case []*float32:
		return c[i], nil // nil is NULL; encoding/json writes float32 as float32
	case []*time.Time:
		if c[i] == nil {
			return nil, nil
		}
		return jsonTime(*c[i]), nil
	case []uint16:
		return c[i], nil
	case [][]string:
		if c[i] == nil {
			return []string{}, nil
		}
		return c[i], nil
	case []uint8:
		return c[i], nil
	case []int8:
		return c[i], nil // an Enum8 reads its number
	case []uint64:
		return c[i], nil
	}
	return nil, fmt.Errorf("column of type %T", col)
}

// jsonTime writes a time as DateTime64(3, 'UTC') reads it.
func jsonTime(at time.Time) string { return at.UTC().Format("2006-01-02 15:04:05.000") }

// LocalName is the table holding the rows of table in layout o.
func LocalName(o chschema.Options, table string) string {
	if o.Cluster != "" {
		return table + chschema.LocalSuffix
	}
	return table
}

// ModernValue formats a value of a JSONCompact result as query formats
// the 18.16 server's, so that the two compare as text. Only
// representations differ: JSONCompact writes times as text in the
// column's type (DateTime64 with milliseconds where 18.16 has DateTime in
// seconds; Date without a time) where the Go driver gives time.Time, and
// floats as JSON numbers where query rounds them to three digits.
func ModernValue(typ string, v any) (string, error) {
	if v == nil {
		return fmt.Sprint(v), nil // NULL, as query formats a nil pointer
	}
	base := strings.TrimSuffix(strings.TrimPrefix(typ, "Nullable("), ")")
	switch {
	case base == "Date":
		d, err := time.Parse(time.DateOnly, fmt.Sprint(v))
		if err != nil {
			return "", err
		}
		return d.Format(time.RFC3339), nil
	case strings.HasPrefix(base, "DateTime"):
		at, err := time.ParseInLocation("2006-01-02 15:04:05.999999999", fmt.Sprint(v), time.UTC)
		if err != nil {
			return "", err
		}
		// RFC3339Nano keeps a fraction the 18.16 side cannot have, so
		// that a time that differs below the second still fails.
		return at.Format(time.RFC3339Nano), nil
	case strings.HasPrefix(base, "Float"):
		f, err := strconv.ParseFloat(fmt.Sprint(v), 64)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%.3g", f), nil
	}
	if a, ok := v.([]any); ok {
		if typ != "Array(String)" {
			return "", fmt.Errorf("type %s: only arrays of strings are compared", typ)
		}
		return fmt.Sprint(a), nil // as query formats a []string
	}
	return fmt.Sprint(v), nil
}

// ModernRows formats the rows of a modern engine's result as Query
// formats the 18.16 server's.
func ModernRows(t testing.TB, res *modernch.Result) [][]string {
	t.Helper()
	got := make([][]string, len(res.Rows))
	for i, row := range res.Rows {
		got[i] = make([]string, len(row))
		for j, val := range row {
			var err error
			if got[i][j], err = ModernValue(res.Columns[j].Type, val); err != nil {
				t.Fatalf("row %d, column %s: %v", i, res.Columns[j].Name, err)
			}
		}
	}
	return got
}

// Literal renders sql with each ? replaced by args in turn as a
// ClickHouse literal (strings quoted, numbers as written), for an engine
// reached without the driver's binding. The SQL must hold no ? of its own.
func Literal(sql string, args ...any) (string, error) {
	var b strings.Builder
	n := 0
	for _, r := range sql {
		if r != '?' {
			b.WriteRune(r)
			continue
		}
		if n == len(args) {
			return "", fmt.Errorf("%d arguments for more placeholders: %s", len(args), sql)
		}
		switch v := args[n].(type) {
		case string:
			b.WriteString("'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'")
		case int, int64, uint64, uint8, int32, uint32:
			fmt.Fprint(&b, v)
		default:
			return "", fmt.Errorf("argument %d: %T has no literal here", n, v)
		}
		n++
	}
	if n != len(args) {
		return "", fmt.Errorf("%d arguments for %d placeholders", len(args), n)
	}
	return b.String(), nil
}
