package resubmit_test

import (
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/consumertest"
	"github.com/assistantcms/cms/internal/devbroker"
	"github.com/assistantcms/cms/internal/devclickhouse"
	"github.com/assistantcms/cms/internal/fixture"
	"github.com/assistantcms/cms/internal/ingesttest"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	"github.com/assistantcms/cms/pkg/pipeline/consumer"
	"github.com/assistantcms/cms/pkg/pipeline/event"
	"github.com/assistantcms/cms/pkg/pipeline/ingest"
	"github.com/assistantcms/cms/pkg/pipeline/kafka"
	"github.com/assistantcms/cms/pkg/pipeline/resubmit"
	"github.com/assistantcms/cms/pkg/tenancy"
)

var brokerBin string

func TestMain(m *testing.M) { os.Exit(devbroker.RunTests(m, &brokerBin)) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// count runs a query that returns one number.
func count(t *testing.T, s *chstore.Store, q string) uint64 {
	t.Helper()
	var n uint64
	must(t, s.Conn().QueryRow(s.Context(t.Context()), q).Scan(&n))
	return n
}

func waitCount(t *testing.T, s *chstore.Store, q string, want uint64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := count(t, s, q)
		if n == want {
			return
		}
		if n > want || time.Now().After(deadline) {
			t.Fatalf("%s: %d, want %d", q, n, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestQuarantineAndResubmit runs the whole path: ingest with narrow rules
// quarantines events, the consumer writes them to the quarantine table,
// and a resubmission under wider rules stores each of them in the events
// table once, however often it runs.
func TestQuarantineAndResubmit(t *testing.T) {
	ctx := t.Context()
	ch := devclickhouse.StartForTest(t)
	b, err := devbroker.Start(ctx, brokerBin, devbroker.Options{})
	must(t, err)
	t.Cleanup(func() { _ = b.Stop() })
	brokers := []string{b.Addr()}

	db, tokens := fixture.Open(t, `{"organizations":[{"id":"org-1","name":"o"}],"apps":[{"appId":"app-1","organizationId":"org-1","name":"a"}]}`,
		map[string]tenancy.Token{"app": {OrganizationID: "org-1", AppID: "app-1"}})
	tok, now := tokens["app"], time.Now()

	// Narrow rules, as an operator might have had them.
	narrow := event.Limits{MaxEvents: 100, MaxEventBytes: 2048, MaxRecordBytes: event.DefaultMaxRecordBytes, Types: []string{"REQUEST", "AnalyticsEvent"}}
	url := ingesttest.Start(t, ingest.ServiceConfig{
		Kafka: kafka.Cluster{Brokers: brokers}, EventsTopic: "events", QuarantineTopic: "quarantine", TopicPartitions: 2, TopicReplication: 1, Limits: narrow,
	}, db, quiet())
	consumertest.Start(t, consumer.ServiceConfig{
		Kafka: kafka.Cluster{Brokers: brokers}, Topic: "events", QuarantineTopic: "quarantine", GroupID: "g", DeadLetterTopic: "dead",
		TopicPartitions: 2, TopicReplication: 1, SessionTimeout: 6 * time.Second, FetchMaxWait: 100 * time.Millisecond,
		ClickHouse: chstore.Config{Addrs: []string{ch.Addr()}, Database: "analytics"},
		Consumer:   consumer.Config{FlushInterval: 200 * time.Millisecond, RetryMax: time.Second},
	})

	big := `{"type":"REQUEST","name":"INTENT_REQUEST","sessionId":"s1","isoTime":"2026-11-25T09:00:00.000Z","payload":{"request":{"knowledgeBaseResult":{"documents":[{"document":"` + strings.Repeat("d", 3000) + `"}]}}}}`
	message := `{"type":"MessageEvent","name":"INFO","eventId":"msg-1","sessionId":"s1","payload":"hello"}`
	broken := `{"type":"REQUEST","name":7,"sessionId":"s1"}`
	body := `{"events":[{"type":"REQUEST","name":"LAUNCH_REQUEST","sessionId":"s1"},` + big + `,` + message + `,` + broken + `]}`
	req, _ := http.NewRequest(http.MethodPut, url+"/cms/app/events", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("PUT: %d", resp.StatusCode)
	}

	s, err := chstore.Open(ctx, chstore.Config{Addrs: []string{ch.Addr()}, Database: "analytics"})
	must(t, err)
	defer s.Close()
	waitCount(t, s, "SELECT count() FROM analytics.quarantine FINAL", 3)
	waitCount(t, s, "SELECT uniqExact(event_id) FROM analytics.events", 1)

	// Each quarantined event is kept as sent, with its first error.
	rows, err := s.Conn().Query(s.Context(ctx), "SELECT batch_index, reason, field, event, event_bytes, truncated FROM analytics.quarantine FINAL ORDER BY batch_index")
	must(t, err)
	type qrow struct {
		index             uint32
		reason, field, ev string
		size              uint64
		truncated         uint8
	}
	var got []qrow
	for rows.Next() {
		var r qrow
		must(t, rows.Scan(&r.index, &r.reason, &r.field, &r.ev, &r.size, &r.truncated))
		got = append(got, r)
	}
	rows.Close()
	want := []qrow{
		{1, event.ReasonTooLarge, "", big, uint64(len(big)), 0},
		{2, event.ReasonTypeNotAllowed, "type", message, uint64(len(message)), 0},
		{3, event.ReasonWrongType, "name", broken, uint64(len(broken)), 0},
	}
	if len(got) != len(want) {
		t.Fatalf("quarantine rows %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("quarantine row %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}

	// Under the default rules two of the three pass.
	pub, err := kafka.Cluster{Brokers: brokers}.NewProducer(kafka.ProducerConfig{}, "events", "quarantine")
	must(t, err)
	defer pub.Close()
	v := event.NewValidator(event.DefaultLimits())
	var progress []resubmit.Counts
	c, err := resubmit.Run(ctx, resubmit.NewClickHouse(s), v, pub, resubmit.Filter{}, resubmit.Options{Chunk: 2, Progress: func(c resubmit.Counts) { progress = append(progress, c) }}, quiet())
	must(t, err)
	if c.Selected != 3 || c.Done != 3 || c.Resubmitted != 2 || c.AlreadyStored != 0 || c.StillInvalid[event.ReasonWrongType] != 1 || len(progress) != 2 {
		t.Fatalf("first run: %s; progress %v", c, progress)
	}
	waitCount(t, s, "SELECT uniqExact(event_id) FROM analytics.events", 3)

	// The resubmitted events keep the IDs and receive time of their first
	// arrival, and fill their columns.
	var matched uint64
	must(t, s.Conn().QueryRow(s.Context(ctx), `SELECT count() FROM analytics.events e ANY INNER JOIN
		(SELECT event_id, received_at AS q_received FROM analytics.quarantine FINAL) q USING event_id
		WHERE e.received_at = q.q_received`).Scan(&matched))
	if matched != 2 {
		t.Errorf("%d resubmitted rows keep their quarantined ID and receive time, want 2", matched)
	}
	if n := count(t, s, "SELECT count() FROM analytics.events WHERE event_id = 'msg-1' AND message = 'hello' AND type = 'MessageEvent'"); n != 1 {
		t.Errorf("the message event's row: %d", n)
	}
	if n := count(t, s, "SELECT count() FROM analytics.events WHERE kb_used = 1 AND kb_documents = 1 AND request_type = 'INTENT_REQUEST'"); n != 1 {
		t.Errorf("the large event's row: %d", n)
	}

	// Again: nothing is published twice.
	c, err = resubmit.Run(ctx, resubmit.NewClickHouse(s), v, pub, resubmit.Filter{}, resubmit.Options{}, quiet())
	must(t, err)
	if c.Resubmitted != 0 || c.AlreadyStored != 2 || c.StillInvalid[event.ReasonWrongType] != 1 {
		t.Errorf("second run: %s", c)
	}
	if n := count(t, s, "SELECT count() FROM analytics.events"); n != 3 {
		t.Errorf("%d rows after the second run, want 3", n)
	}

	// Filters and a dry run.
	c, err = resubmit.Run(ctx, resubmit.NewClickHouse(s), v, pub, resubmit.Filter{AppID: "app-1", Reason: event.ReasonWrongType, Since: now.Add(-time.Hour)}, resubmit.Options{DryRun: true}, quiet())
	must(t, err)
	if c.Selected != 1 || c.StillInvalid[event.ReasonWrongType] != 1 {
		t.Errorf("filtered dry run: %s", c)
	}
	if c, err = resubmit.Run(ctx, resubmit.NewClickHouse(s), v, pub, resubmit.Filter{Until: now.Add(-time.Hour)}, resubmit.Options{}, quiet()); err != nil || c.Selected != 0 {
		t.Errorf("events received before the window: %s, %v", c, err)
	}
}
