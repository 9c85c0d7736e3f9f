package consumer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	"github.com/assistantcms/cms/pkg/pipeline/kafka"
)

// The fakes below stand in for Kafka and ClickHouse in tests of the
// batching and retry logic only; integration tests use the real servers.

type topicPartition struct {
	topic     string
	partition int
}

type fakeSource struct {
	mu        sync.Mutex
	msgs      chan kafka.Message
	fetched   []kafka.Message
	committed map[topicPartition]int64 // the last offset committed
	positions int                      // committed, in all calls
}

func (f *fakeSource) Fetch(ctx context.Context) (kafka.Message, error) {
	select {
	case m := <-f.msgs:
		f.mu.Lock()
		defer f.mu.Unlock()
		f.fetched = append(f.fetched, m)
		return m, nil
	case <-ctx.Done():
		return kafka.Message{}, ctx.Err()
	}
}

func (f *fakeSource) Commit(ctx context.Context, done []kafka.Position) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.committed == nil {
		f.committed = map[topicPartition]int64{}
	}
	for _, p := range done {
		tp := topicPartition{p.Topic, p.Partition}
		if last, ok := f.committed[tp]; ok && p.Offset <= last {
			return fmt.Errorf("commit of %v moves no offset forward", p)
		}
		f.committed[tp] = p.Offset
	}
	f.positions += len(done)
	return nil
}

// commits counts the fetched messages whose offsets are committed.
func (f *fakeSource) commits() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, m := range f.fetched {
		if last, ok := f.committed[topicPartition{m.Topic, m.Partition}]; ok && m.Offset <= last {
			n++
		}
	}
	return n
}

type fakeSink struct {
	mu       sync.Mutex
	failures int // fail this many inserts first
	// quarantineFailures fails this many quarantine inserts first.
	quarantineFailures int
	inserts            [][]string // each insert's rows as "event ID partition/offset"
	quarantined        []chstore.QuarantineRow
	attempts           int
}

func (f *fakeSink) InsertQuarantine(ctx context.Context, rows []chstore.QuarantineRow) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.quarantineFailures > 0 {
		f.quarantineFailures--
		return errors.New("connection refused")
	}
	f.quarantined = append(f.quarantined, rows...)
	return nil
}

func (f *fakeSink) InsertEvents(ctx context.Context, rows *chstore.EventBatch) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts++
	if f.failures > 0 {
		f.failures--
		return errors.New("connection refused")
	}
	var ins []string
	for i, id := range rows.EventID {
		ins = append(ins, fmt.Sprintf("%s %d/%d", id, rows.KafkaPartition[i], rows.KafkaOffset[i]))
	}
	f.inserts = append(f.inserts, ins)
	return nil
}

func (f *fakeSink) rows() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, b := range f.inserts {
		n += len(b)
	}
	return n
}

type fakeDLQ struct {
	mu   sync.Mutex
	msgs []kafka.DeadLetter
}

func (f *fakeDLQ) Write(ctx context.Context, letters []kafka.DeadLetter) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.msgs = append(f.msgs, letters...)
	return nil
}

func envelope(id string) []byte {
	return []byte(`{"v":1,"eventId":"` + id + `","appId":"a","organizationId":"o","receivedAt":"2026-11-21T10:00:00.000Z","event":{"type":"REQUEST","name":"LAUNCH_REQUEST","appId":"a"}}`)
}

func msg(i int, value []byte) kafka.Message {
	return kafka.Message{Topic: "events", Partition: i % 2, Offset: int64(i), HighWaterMark: 100, Value: value}
}

func run(t *testing.T, cfg Config, src *fakeSource, sink *fakeSink, dlq *fakeDLQ) (*Consumer, *Metrics, func() error) {
	t.Helper()
	m := NewMetrics(prometheus.NewRegistry())
	c := New(cfg, src, sink, dlq, m, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	return c, m, func() error { cancel(); return <-done }
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestFlushBySizeCommitsAfterInsert(t *testing.T) {
	src := &fakeSource{msgs: make(chan kafka.Message, 100)}
	sink := &fakeSink{}
	_, m, stop := run(t, Config{BatchRows: 10, FlushInterval: time.Hour}, src, sink, &fakeDLQ{})
	for i := range 25 {
		src.msgs <- msg(i, envelope("e"+strconv.Itoa(i)))
	}
	waitFor(t, func() bool { return src.commits() == 20 })
	if sink.rows() != 20 || len(sink.inserts) != 2 {
		t.Fatalf("%d rows in %d inserts, want 20 in 2 (5 wait for the interval)", sink.rows(), len(sink.inserts))
	}
	if first := sink.inserts[0]; first[0] != "e0 0/0" || first[9] != "e9 1/9" {
		t.Errorf("first insert %q", first)
	}
	src.mu.Lock()
	if src.positions != 4 {
		t.Errorf("%d positions committed for 2 batches of 2 partitions, want 4: one per batch and partition", src.positions)
	}
	src.mu.Unlock()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if sink.rows() != 25 || src.commits() != 25 {
		t.Errorf("after stop: %d rows, %d commits; the last 5 must be flushed", sink.rows(), src.commits())
	}
	if got := testutil.ToFloat64(m.rows); got != 25 {
		t.Errorf("rows metric %v", got)
	}
	// Every row's age since ingest received it (the fixture's receivedAt)
	// is observed once.
	var h dto.Metric
	if err := m.freshness.Write(&h); err != nil {
		t.Fatal(err)
	}
	received, _ := time.Parse(time.RFC3339, "2026-11-21T10:00:00Z")
	age := time.Since(received).Seconds()
	if n, sum := h.GetHistogram().GetSampleCount(), h.GetHistogram().GetSampleSum(); n != 25 || sum/25 < age-60 || sum/25 > age {
		t.Errorf("freshness: %d samples, mean %.0fs; want 25 of %.0fs (within a minute)", n, sum/25, age)
	}
	// Lag after the last message of each partition: offsets 23 and 24 of
	// a high-water mark of 100.
	for p, want := range map[string]float64{"0": 100 - 24 - 1, "1": 100 - 23 - 1} {
		if got := testutil.ToFloat64(m.lag.WithLabelValues("events", p)); got != want {
			t.Errorf("lag of partition %s is %v, want %v", p, got, want)
		}
	}
}

func TestFlushByInterval(t *testing.T) {
	src := &fakeSource{msgs: make(chan kafka.Message, 10)}
	sink := &fakeSink{}
	_, _, stop := run(t, Config{BatchRows: 1000, FlushInterval: 50 * time.Millisecond}, src, sink, &fakeDLQ{})
	defer stop()
	src.msgs <- msg(1, envelope("x"))
	waitFor(t, func() bool { return src.commits() == 1 })
	if sink.rows() != 1 {
		t.Errorf("rows %d", sink.rows())
	}
}

func TestInsertFailuresRetryWithoutCommitting(t *testing.T) {
	src := &fakeSource{msgs: make(chan kafka.Message, 10)}
	sink := &fakeSink{failures: 3}
	c, m, stop := run(t, Config{BatchRows: 2, RetryMin: time.Millisecond, RetryMax: 4 * time.Millisecond}, src, sink, &fakeDLQ{})
	defer stop()
	src.msgs <- msg(1, envelope("a"))
	src.msgs <- msg(2, envelope("b"))
	waitFor(t, func() bool { return src.commits() == 2 })
	sink.mu.Lock()
	attempts := sink.attempts
	sink.mu.Unlock()
	if attempts != 4 || sink.rows() != 2 {
		t.Errorf("%d attempts, %d rows; want 4 attempts and the 2 rows once", attempts, sink.rows())
	}
	if got := testutil.ToFloat64(m.retries.WithLabelValues("insert")); got != 3 {
		t.Errorf("retries metric %v", got)
	}
	if !c.Healthy() {
		t.Error("unhealthy after a successful insert")
	}
}

func TestRecoveryAfterRetriesIsLogged(t *testing.T) {
	src := &fakeSource{msgs: make(chan kafka.Message, 10)}
	sink := &fakeSink{failures: 2}
	var logs bytes.Buffer
	var mu sync.Mutex
	c := New(Config{BatchRows: 1, RetryMin: time.Millisecond, RetryMax: time.Millisecond}, src, sink, &fakeDLQ{},
		NewMetrics(prometheus.NewRegistry()), slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	src.msgs <- msg(1, envelope("a"))
	waitFor(t, func() bool { return src.commits() == 1 })
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	text := logs.String()
	if strings.Count(text, "insert failed; retrying") != 2 || !strings.Contains(text, `level=INFO msg="insert recovered" attempts=3 failing_for=`) {
		t.Errorf("log:\n%s", text)
	}
}

// lockedWriter serialises writes to w, which the test reads too.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestSinkDownAtShutdownCommitsNothing(t *testing.T) {
	src := &fakeSource{msgs: make(chan kafka.Message, 10)}
	sink := &fakeSink{failures: 1 << 30}
	c, _, stop := run(t, Config{BatchRows: 1, RetryMin: time.Millisecond, RetryMax: time.Millisecond, ShutdownTimeout: 50 * time.Millisecond}, src, sink, &fakeDLQ{})
	src.msgs <- msg(1, envelope("a"))
	waitFor(t, func() bool { return !c.Healthy() })
	if err := stop(); err == nil {
		t.Error("a stop that could not flush reported success")
	}
	if src.commits() != 0 {
		t.Errorf("%d offsets committed for rows never written", src.commits())
	}
}

func TestPoisonMessageGoesToDeadLetters(t *testing.T) {
	src := &fakeSource{msgs: make(chan kafka.Message, 10)}
	sink := &fakeSink{}
	dlq := &fakeDLQ{}
	_, m, stop := run(t, Config{BatchRows: 3}, src, sink, dlq)
	defer stop()
	src.msgs <- msg(1, envelope("a"))
	src.msgs <- msg(7, []byte(`{"not":"an envelope"`))
	src.msgs <- msg(9, envelope("c"))
	waitFor(t, func() bool { return src.commits() == 3 })
	if sink.rows() != 2 || len(dlq.msgs) != 1 {
		t.Fatalf("%d rows, %d dead letters", sink.rows(), len(dlq.msgs))
	}
	if d := dlq.msgs[0]; d.Message.Topic != "events" || d.Message.Partition != 1 || d.Message.Offset != 7 ||
		string(d.Message.Value) != `{"not":"an envelope"` || !strings.Contains(d.Reason, "not JSON") {
		t.Errorf("dead letter %+v", d)
	}
	if got := testutil.ToFloat64(m.deadLetters); got != 1 {
		t.Errorf("dead letters metric %v", got)
	}
}

// TestStopWhileInsertsFailDoesNotHang stops the consumer while a batch is
// stuck in a failing insert and more messages wait to be fetched.
func TestStopWhileInsertsFailDoesNotHang(t *testing.T) {
	src := &fakeSource{msgs: make(chan kafka.Message, 10)}
	sink := &fakeSink{failures: 1 << 30}
	c, _, stop := run(t, Config{BatchRows: 2, RetryMin: time.Millisecond, RetryMax: time.Millisecond, ShutdownTimeout: 100 * time.Millisecond}, src, sink, &fakeDLQ{})
	for i := range 3 {
		src.msgs <- msg(i, envelope("e"+strconv.Itoa(i)))
	}
	waitFor(t, func() bool { return !c.Healthy() })
	done := make(chan error, 1)
	go func() { done <- stop() }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a stop that could not write reported success")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stop hung while inserts failed")
	}
	if src.commits() != 0 {
		t.Errorf("%d offsets committed for rows never written", src.commits())
	}
}

func quarantineRecord(id, reason string) []byte {
	return []byte(`{"v":1,"appId":"a","organizationId":"o","receivedAt":"2026-11-21T10:00:00.000Z","index":0,"eventId":"` + id +
		`","errors":[{"field":"type","reason":"` + reason + `","message":"m"}],"event":{"type":"X","name":"n"}}`)
}

// TestQuarantineTopicGoesToItsTable routes records by topic: envelopes to
// the events table, quarantine records to the quarantine table, each
// written once even when the other insert has to be retried.
func TestQuarantineTopicGoesToItsTable(t *testing.T) {
	src := &fakeSource{msgs: make(chan kafka.Message, 10)}
	sink := &fakeSink{quarantineFailures: 2}
	dlq := &fakeDLQ{}
	_, m, stop := run(t, Config{BatchRows: 4, QuarantineTopic: "quarantine", RetryMin: time.Millisecond, RetryMax: time.Millisecond}, src, sink, dlq)
	defer stop()
	q := func(i int, v []byte) kafka.Message {
		return kafka.Message{Topic: "quarantine", Partition: 0, Offset: int64(i), HighWaterMark: 10, Value: v}
	}
	src.msgs <- msg(1, envelope("a"))
	src.msgs <- q(1, quarantineRecord("q1", "too_large"))
	src.msgs <- q(2, quarantineRecord("q2", "type_not_allowed"))
	src.msgs <- q(3, envelope("not a quarantine record"))
	waitFor(t, func() bool { return src.commits() == 4 })
	if sink.rows() != 1 || len(sink.inserts) != 1 {
		t.Errorf("%d event rows in %d inserts, want 1 in 1 although the quarantine insert was retried", sink.rows(), len(sink.inserts))
	}
	if len(sink.quarantined) != 2 || sink.quarantined[0].EventID != "q1" || sink.quarantined[1].Reason != "type_not_allowed" || sink.quarantined[1].Offset != 2 {
		t.Errorf("quarantine rows %+v", sink.quarantined)
	}
	if len(dlq.msgs) != 1 {
		t.Fatalf("%d dead letters, want the envelope on the quarantine topic", len(dlq.msgs))
	}
	if topic := dlq.msgs[0].Message.Topic; topic != "quarantine" {
		t.Errorf("dead letter from topic %q, want quarantine", topic)
	}
	for reason, want := range map[string]float64{"too_large": 1, "type_not_allowed": 1, "missing": 0} {
		if got := testutil.ToFloat64(m.quarantined.WithLabelValues(reason)); got != want {
			t.Errorf("quarantine rows of reason %s: %v, want %v", reason, got, want)
		}
	}
	if got := testutil.ToFloat64(m.retries.WithLabelValues("quarantine insert")); got != 2 {
		t.Errorf("quarantine insert retries %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.lag.WithLabelValues("quarantine", "0")); got != 10-3-1 {
		t.Errorf("quarantine lag %v", got)
	}
}

// TestFlushByBytes flushes a batch of large messages before it reaches
// its row count.
func TestFlushByBytes(t *testing.T) {
	src := &fakeSource{msgs: make(chan kafka.Message, 10)}
	sink := &fakeSink{}
	_, _, stop := run(t, Config{BatchRows: 1000, BatchBytes: 2 * len(envelope("e0")), FlushInterval: time.Hour}, src, sink, &fakeDLQ{})
	defer stop()
	for i := range 5 {
		src.msgs <- msg(i, envelope("e"+strconv.Itoa(i)))
	}
	waitFor(t, func() bool { return src.commits() == 4 })
	if len(sink.inserts) != 2 {
		t.Errorf("%d inserts of %d rows; want 2 of 2, the fifth waiting", len(sink.inserts), sink.rows())
	}
}
