package consumer_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/assistantcms/cms/internal/consumertest"
	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/internal/devbroker"
	"github.com/assistantcms/cms/internal/devclickhouse"
	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	"github.com/assistantcms/cms/pkg/pipeline/consumer"
	"github.com/assistantcms/cms/pkg/pipeline/ingest"
	"github.com/assistantcms/cms/pkg/pipeline/kafka"
	"github.com/assistantcms/cms/pkg/tenancy"
	"github.com/assistantcms/cms/pkg/tenancy/tenancydb"
)

var brokerBin string

// stringColumns sizes the String columns of the consumers' inserts, as
// the consumer binary does; it is installed before the tests run.
var stringColumns = chstore.InstallStringColumns()

func TestMain(m *testing.M) { os.Exit(devbroker.RunTests(m, &brokerBin)) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// env is a broker process and a ClickHouse server for one test.
type env struct {
	broker *devbroker.Broker
	ch     *devclickhouse.Server
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ch := devclickhouse.StartForTest(t)
	b, err := devbroker.Start(t.Context(), brokerBin, devbroker.Options{})
	must(t, err)
	t.Cleanup(func() { _ = b.Stop() })
	return &env{broker: b, ch: ch}
}

// startConsumer runs a consumer service until the test ends.
func (e *env) startConsumer(t *testing.T, group string) (url string) {
	t.Helper()
	return consumertest.Start(t, consumer.ServiceConfig{
		Kafka: kafka.Cluster{Brokers: []string{e.broker.Addr()}}, Topic: "events", QuarantineTopic: "quarantine", GroupID: group, DeadLetterTopic: "dead-letters",
		TopicPartitions: 3, TopicReplication: 1, SessionTimeout: 6 * time.Second, FetchMaxWait: 100 * time.Millisecond,
		ClickHouse: chstore.Config{Addrs: []string{e.ch.Addr()}, Database: "analytics", StringColumns: stringColumns},
		Consumer:   consumer.Config{BatchRows: 1000, FlushInterval: 200 * time.Millisecond, RetryMax: time.Second},
	})
}

func (e *env) query(t *testing.T) *chstore.Store {
	t.Helper()
	s, err := chstore.Open(t.Context(), chstore.Config{Addrs: []string{e.ch.Addr()}, Database: "analytics"})
	must(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// waitRows waits until the events table holds n distinct event IDs.
func waitRows(t *testing.T, s *chstore.Store, n uint64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got uint64
		err := s.Conn().QueryRow(s.Context(t.Context()), "SELECT uniqExact(event_id) FROM analytics.events").Scan(&got)
		if err == nil && got >= n {
			if got > n {
				t.Fatalf("%d distinct events, want %d", got, n)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events in ClickHouse after 30s (err %v)", got, n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startIngest serves ingest on a loopback port until the test ends, in
// front of broker, with a content database holding one app (app-1) and
// its token; it returns the address and the token.
func startIngest(t *testing.T, broker string) (addr, token string) {
	t.Helper()
	ctx := t.Context()
	store, err := tenancydb.Open(ctx, filepath.Join(t.TempDir(), "cms.db"))
	must(t, err)
	t.Cleanup(func() { store.Close() })
	now := time.Now()
	must(t, store.CreateOrganization(contenttest.Acting(ctx), tenancy.Organization{ID: "org-1", Name: "o", CreatedAt: now}))
	must(t, store.CreateApp(contenttest.Acting(ctx), tenancy.App{ID: "app-1", OrganizationID: "org-1", Name: "a", CreatedAt: now, UpdatedAt: now}))
	tok, id, err := auth.NewToken()
	must(t, err)
	must(t, store.CreateToken(contenttest.Acting(ctx), tenancy.Token{Scopes: tenancy.RuntimeScopes, ID: id, Hash: auth.HashToken(tok), OrganizationID: "org-1", AppID: "app-1", CreatedAt: now}))
	isvc, err := ingest.NewService(ctx, ingest.ServiceConfig{
		Kafka: kafka.Cluster{Brokers: []string{broker}}, EventsTopic: "events", QuarantineTopic: "quarantine", TopicPartitions: 3, TopicReplication: 1,
	}, store, quiet())
	must(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	ictx, istop := context.WithCancel(context.Background())
	idone := make(chan error, 1)
	go func() { idone <- isvc.Serve(ictx, ln) }()
	t.Cleanup(func() { istop(); <-idone })
	return ln.Addr().String(), tok
}

func TestEndToEndIntoClickHouse(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()

	ingestAddr, tok := startIngest(t, e.broker.Addr())

	consumerURL := e.startConsumer(t, "e2e")

	// The runtime's time, an hour before the receipt: within the window
	// that keeps it as the event's time.
	launchAt := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	body := `{"events":[
	 {"type":"REQUEST","name":"LAUNCH_REQUEST","eventId":"launch-1","sessionId":"s-1","userId":"u-1","channel":"web","platform":"stentor","selectedHandler":"LaunchRequest","currentHandler":"LaunchRequest","environment":"production","isoTime":"` + launchAt.Format(time.RFC3339Nano) + `","isNewSession":true},
	 {"type":"AnalyticsEvent","name":"REQUEST_RESPONSE","eventId":"rr-obj","sessionId":"s-1","userId":"u-1","channel":"web","platform":"stentor","selectedHandler":"OrderStatus","payload":{"request":{"type":"INTENT_REQUEST","intentId":"OrderStatus","rawQuery":"Where is my order","matchConfidence":0.5},"response":{"outputSpeech":{"displayText":"Soon.","ssml":"<speak>Soon.</speak>"},"displays":[{"type":"LIST","items":[]}]},"tag":"orders"}},
	 {"type":"AnalyticsEvent","name":"REQUEST_RESPONSE","eventId":"rr-str","sessionId":"s-2","channel":"sms","platform":"stentor","payload":"{\"request\":{\"type\":\"RAW_QUERY_REQUEST\",\"rawQuery\":\"where is my order\"},\"response\":{\"outputSpeech\":\"Plain.\"}}"}
	]}`
	req, _ := http.NewRequest(http.MethodPut, "http://"+ingestAddr+"/cms/app/events", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("PUT: %d", resp.StatusCode)
	}

	s := e.query(t)
	waitRows(t, s, 3)
	type row struct {
		ID, App, Org, Type, Name, Session, User, Channel, Platform, Selected, Current, Env string
		ReqType, Intent, Raw, Display, SSML, Tag, Payload, Extra                           string
		Confidence                                                                         *float32
		Displays                                                                           uint16
		EventTime                                                                          time.Time
	}
	rows, err := s.Conn().Query(s.Context(ctx), `SELECT event_id, app_id, organization_id, type, name, session_id, user_id, channel, platform,
		selected_handler, current_handler, environment, request_type, intent_id, raw_query, output_display_text, output_ssml, tag, payload, extra,
		match_confidence, display_count, event_time FROM analytics.events FINAL ORDER BY event_id`)
	must(t, err)
	got := map[string]row{}
	for rows.Next() {
		var r row
		must(t, rows.Scan(&r.ID, &r.App, &r.Org, &r.Type, &r.Name, &r.Session, &r.User, &r.Channel, &r.Platform, &r.Selected, &r.Current,
			&r.Env, &r.ReqType, &r.Intent, &r.Raw, &r.Display, &r.SSML, &r.Tag, &r.Payload, &r.Extra, &r.Confidence, &r.Displays, &r.EventTime))
		got[r.ID] = r
	}
	rows.Close()
	l := got["launch-1"]
	if l.App != "app-1" || l.Org != "org-1" || l.Type != "REQUEST" || l.Name != "LAUNCH_REQUEST" || l.Session != "s-1" || l.User != "u-1" ||
		l.Channel != "web" || l.Platform != "stentor" || l.Selected != "LaunchRequest" || l.Current != "LaunchRequest" || l.Env != "production" ||
		l.Extra != `{"isNewSession":true}` || l.Payload != "" || !l.EventTime.Equal(launchAt) {
		t.Errorf("launch row %+v", l)
	}
	o := got["rr-obj"]
	if o.ReqType != "INTENT_REQUEST" || o.Intent != "OrderStatus" || o.Raw != "Where is my order" || o.Confidence == nil || *o.Confidence != 0.5 ||
		o.Display != "Soon." || o.SSML != "<speak>Soon.</speak>" || o.Displays != 1 || o.Tag != "orders" || !strings.Contains(o.Payload, `"intentId":"OrderStatus"`) {
		t.Errorf("object payload row %+v", o)
	}
	st := got["rr-str"]
	if st.ReqType != "RAW_QUERY_REQUEST" || st.Display != "Plain." || st.Confidence != nil || st.Channel != "sms" || !strings.HasPrefix(st.Payload, `{"request"`) {
		t.Errorf("string payload row %+v", st)
	}

	// ClickHouse fills the view after the table within one insert, so the
	// events can be visible a moment before their counts.
	var asked uint64
	for deadline := time.Now().Add(10 * time.Second); ; {
		must(t, s.Conn().QueryRow(s.Context(ctx), "SELECT sum(asked) FROM analytics.query_counts WHERE app_id = 'app-1' AND query = 'where is my order'").Scan(&asked))
		if asked >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if asked != 2 {
		t.Errorf("query counts: %d, want 2 (two channels, one normalised query)", asked)
	}
	r, err := http.Get(consumerURL + "/readyz")
	must(t, err)
	r.Body.Close()
	if r.StatusCode != 200 {
		t.Errorf("readyz %d", r.StatusCode)
	}
}

func TestPoisonMessageIsDeadLettered(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	e.startConsumer(t, "dlq")
	w := &kafkago.Writer{Addr: kafkago.TCP(e.broker.Addr()), Topic: "events", RequiredAcks: kafkago.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	good := `{"v":1,"eventId":"after-poison","appId":"a","organizationId":"o","receivedAt":"2026-11-21T10:00:00.000Z","event":{"type":"REQUEST","name":"X","appId":"a"}}`
	must(t, w.WriteMessages(ctx,
		kafkago.Message{Key: []byte("k"), Value: []byte("this is not an envelope")},
		kafkago.Message{Key: []byte("k"), Value: []byte(good)},
	))
	s := e.query(t)
	waitRows(t, s, 1)

	r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: []string{e.broker.Addr()}, Topic: "dead-letters", Partition: 0, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	m, err := r.ReadMessage(rctx)
	must(t, err)
	h := map[string]string{}
	for _, x := range m.Headers {
		h[x.Key] = string(x.Value)
	}
	if string(m.Value) != "this is not an envelope" || h["dlq-original-topic"] != "events" || h["dlq-original-offset"] == "" ||
		h["dlq-original-partition"] == "" || !strings.Contains(h["dlq-reason"], "not JSON") {
		t.Errorf("dead letter %q headers %v", m.Value, h)
	}
}
