package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/assistantcms/cms/internal/devclickhouse"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	"github.com/assistantcms/cms/pkg/pipeline/columns"
	"github.com/assistantcms/cms/pkg/pipeline/event"
)

// TestResubmitCommand runs "ingest resubmit" as an operator would after
// raising MAX_EVENT_BYTES: the event the running ingest quarantined is
// published to the events topic with its first ID, once, with progress
// on stderr and a summary on stdout.
func TestResubmitCommand(t *testing.T) {
	p := startIngest(t, "MAX_EVENT_BYTES=8192")
	ch := devclickhouse.StartForTest(t)
	ctx := t.Context()
	store, err := chstore.Open(ctx, chstore.Config{Addrs: []string{ch.Addr()}, Database: "analytics"})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}

	big := `{"type":"REQUEST","name":"INTENT_REQUEST","sessionId":"s","pad":"` + strings.Repeat("x", 10_000) + `"}`
	req, _ := http.NewRequest(http.MethodPut, p.base+"/cms/app/events", strings.NewReader(`{"events":[{"type":"REQUEST","name":"LAUNCH_REQUEST","sessionId":"s"},`+big+`]}`))
	req.Header.Set("Authorization", "Bearer "+p.tokens["a"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("PUT: %d", resp.StatusCode)
	}
	// The quarantine record, written to its table as the consumer would.
	rec := readOne(t, p.broker.Addr(), "bin-quarantine")
	var d columns.Decoder
	q, err := d.DecodeQuarantine(rec.Value)
	if err != nil {
		t.Fatal(err)
	}
	if q.Reason != event.ReasonTooLarge {
		t.Fatalf("quarantined for %q", q.Reason)
	}
	q.Partition, q.Offset = rec.Partition, rec.Offset
	if err := store.InsertQuarantine(ctx, []chstore.QuarantineRow{q}); err != nil {
		t.Fatal(err)
	}

	resubmit := func(env []string, args ...string) (stdout, stderr string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, ingestBin, append([]string{"resubmit"}, args...)...)
		cmd.Env = append(os.Environ(), "KAFKA_BROKERS="+p.broker.Addr(), "EVENTS_TOPIC=bin-events", "QUARANTINE_TOPIC=bin-quarantine",
			"CLICKHOUSE_ADDR="+ch.Addr(), "CLICKHOUSE_DATABASE=analytics", "LOG_LEVEL=warn")
		cmd.Env = append(cmd.Env, env...)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("ingest resubmit %v: %v\n%s", args, err, errOut.String())
		}
		return out.String(), errOut.String()
	}
	// Under the limit ingest ran with, the event is still too large.
	if out, _ := resubmit([]string{"MAX_EVENT_BYTES=8192"}, "-since", "1h"); out != "1 of 1 looked at: 0 resubmitted, 0 already stored, 0 cut when quarantined, 1 still invalid (too_large 1)\n" {
		t.Errorf("under the old limit: %q", out)
	}
	// A dry run under the default limit publishes nothing.
	if out, _ := resubmit(nil, "-dry-run", "-app", "a"); out != "1 of 1 looked at: 1 resubmitted, 0 already stored, 0 cut when quarantined, 0 still invalid\n" {
		t.Errorf("dry run: %q", out)
	}
	if n := topicRecords(t, p.broker.Addr(), "bin-events"); n != 1 {
		t.Fatalf("events topic holds %d records after a dry run, want 1", n)
	}
	out, stderr := resubmit(nil, "-reason", "too_large")
	if want := "1 of 1 looked at: 1 resubmitted, 0 already stored, 0 cut when quarantined, 0 still invalid\n"; out != want || !strings.Contains(stderr, want) {
		t.Errorf("stdout %q, stderr %q; want %q on both", out, stderr, want)
	}
	if n := topicRecords(t, p.broker.Addr(), "bin-events"); n != 2 {
		t.Fatalf("events topic holds %d records, want the accepted one and the resubmitted one", n)
	}
	if got := readAt(t, p.broker.Addr(), "bin-events", q.EventID); got == nil {
		t.Errorf("no record on the events topic carries the quarantined event's ID %s", q.EventID)
	}
}

// readOne reads the first record of a one-record topic.
func readOne(t *testing.T, broker, topic string) kafka.Message {
	t.Helper()
	if n := topicRecords(t, broker, topic); n != 1 {
		t.Fatalf("topic %s holds %d records, want 1", topic, n)
	}
	msgs := readAll(t, broker, topic)
	return msgs[0]
}

// readAt returns the record of topic whose envelope names eventID.
func readAt(t *testing.T, broker, topic, eventID string) *kafka.Message {
	t.Helper()
	for _, m := range readAll(t, broker, topic) {
		if strings.Contains(string(m.Value), `"eventId":"`+eventID+`"`) {
			return &m
		}
	}
	return nil
}

func readAll(t *testing.T, broker, topic string) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var out []kafka.Message
	for _, p := range partitionOffsets(ctx, t, broker, topic) {
		// kafka-go waits MaxWait (10 s by default) before a fetch answers.
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{broker}, Topic: topic, Partition: p.id, MaxBytes: 16 << 20, MaxWait: 100 * time.Millisecond})
		for range p.last - p.first {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
		r.Close()
	}
	return out
}
