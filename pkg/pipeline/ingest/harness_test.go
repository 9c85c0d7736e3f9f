package ingest_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/internal/devbroker"
	"github.com/assistantcms/cms/internal/ingesttest"
	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/edge/cors"
	"github.com/assistantcms/cms/pkg/pipeline/ingest"
	"github.com/assistantcms/cms/pkg/pipeline/kafka"
	"github.com/assistantcms/cms/pkg/tenancy"
	"github.com/assistantcms/cms/pkg/tenancy/tenancydb"
)

// The integration tests run the development broker as its own process and
// talk to it over TCP; brokerBin is built once for the package.
var brokerBin string

func TestMain(m *testing.M) { os.Exit(devbroker.RunTests(m, &brokerBin)) }

func startBroker(t *testing.T, dataDir string) *devbroker.Broker {
	t.Helper()
	b, err := devbroker.Start(context.Background(), brokerBin, devbroker.Options{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop() })
	return b
}

var topicSeq atomic.Int64

// harness is one ingest service on its own topics and content database.
type harness struct {
	t          *testing.T
	broker     *devbroker.Broker
	store      *tenancydb.Store
	url        string
	topic      string
	quarantine string
	tokens     map[string]string // name -> token string
	tokenIDs   map[string]string
}

type harnessOpts struct {
	produceTimeout time.Duration
	rateRPS        float64
	rateBurst      int
	tokenTTL       time.Duration
	maxEvents      int
	maxInFlight    int
	// minUploadGrace is the handler's MinUploadGrace; zero: its default.
	minUploadGrace time.Duration
	cors           *cors.Policy
	trustedProxies []netip.Prefix
	// authFailures bounds failed authentications per client network
	// (burst; at one a second); zero: none.
	authFailures int
	// tune, when set, changes the handler's limits last.
	tune func(*ingest.Config)
}

func newHarness(t *testing.T, b *devbroker.Broker, o harnessOpts) *harness {
	t.Helper()
	ctx := context.Background()
	n := topicSeq.Add(1)
	h := &harness{
		t: t, broker: b,
		topic:      fmt.Sprintf("events-%d-%d", os.Getpid(), n),
		quarantine: fmt.Sprintf("quarantine-%d-%d", os.Getpid(), n),
		tokens:     map[string]string{}, tokenIDs: map[string]string{},
	}
	store, err := tenancydb.Open(ctx, filepath.Join(t.TempDir(), "content.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	h.store = store
	for _, org := range []string{"org-a", "org-b"} {
		must(t, store.CreateOrganization(contenttest.Acting(ctx), tenancy.Organization{ID: org, Name: org, CreatedAt: time.Now()}))
	}
	for _, app := range [][2]string{{"app-a1", "org-a"}, {"app-a2", "org-a"}, {"app-b1", "org-b"}} {
		must(t, store.CreateApp(contenttest.Acting(ctx), tenancy.App{ID: app[0], OrganizationID: app[1], Name: app[0], CreatedAt: time.Now(), UpdatedAt: time.Now()}))
	}
	h.addToken("a1", "org-a", "app-a1")
	h.addToken("a2", "org-a", "app-a2")
	h.addToken("b1", "org-b", "app-b1")
	h.addToken("orgA", "org-a", "")
	h.addToken("orgB", "org-b", "")

	if o.produceTimeout == 0 {
		o.produceTimeout = 5 * time.Second
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	cfg := ingest.ServiceConfig{
		Kafka: kafka.Cluster{Brokers: []string{b.Addr()}}, EventsTopic: h.topic, QuarantineTopic: h.quarantine,
		TopicPartitions: 4, TopicReplication: 1,
		Handler: ingest.Config{ProduceTimeout: o.produceTimeout, MaxInFlight: o.maxInFlight, TrustedProxies: o.trustedProxies,
			MinUploadGrace: o.minUploadGrace},
		TokenCacheTTL: o.tokenTTL, RateLimitRPS: o.rateRPS, RateLimitBurst: o.rateBurst,
		AuthFailureBurst: o.authFailures,
		// Above net/http's 5 s wait for a connection that never sent a
		// request, which a test client's spare connection would hit.
		ShutdownTimeout: 10 * time.Second,
		CORS:            o.cors,
	}
	cfg.Limits.MaxEvents = o.maxEvents
	if o.tune != nil {
		o.tune(&cfg.Handler)
	}
	if o.authFailures > 0 {
		cfg.AuthFailureRate = 1
	}
	h.url = ingesttest.Start(t, cfg, store, log)
	return h
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (h *harness) addToken(name, org, app string) {
	h.addScopedToken(name, org, app, tenancy.RuntimeScopes)
}

// addScopedToken issues a token of the given scopes.
func (h *harness) addScopedToken(name, org, app string, scopes tenancy.Scopes) {
	tok, id, err := auth.NewToken()
	must(h.t, err)
	must(h.t, h.store.CreateToken(contenttest.Acting(context.Background()), tenancy.Token{
		ID: id, Hash: auth.HashToken(tok), OrganizationID: org, AppID: app, Scopes: scopes, Name: name, CreatedAt: time.Now(),
	}))
	h.tokens[name], h.tokenIDs[name] = tok, id
}

type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

// put sends body to path; headers are name/value pairs.
func (h *harness) put(path, body string, headers ...string) reply {
	return h.do(http.MethodPut, path, []byte(body), headers...)
}

func (h *harness) do(method, path string, body []byte, headers ...string) reply {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url+path, bytes.NewReader(body))
	must(h.t, err)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	must(h.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	must(h.t, err)
	r := reply{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	if err := json.Unmarshal(raw, &r.body); err != nil {
		h.t.Fatalf("%s %s: answer is not a JSON object: %v\n%s", method, path, err, raw)
	}
	return r
}

func (h *harness) bearer(name string) []string {
	return []string{"Authorization", "Bearer " + h.tokens[name]}
}

func gzipped(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, err := zw.Write([]byte(s))
	must(t, err)
	must(t, zw.Close())
	return b.Bytes()
}

// record is one message read back from a topic.
type record struct {
	topic     string // set by callers that read several topics
	partition int
	offset    int64
	key       string
	value     map[string]any
}

// readTopic reads every record of every partition of topic, up to the end
// offsets at the time of the call.
func readTopic(t *testing.T, broker, topic string) []record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := kafkago.DialContext(ctx, "tcp", broker)
	must(t, err)
	parts, err := conn.ReadPartitions(topic)
	conn.Close()
	must(t, err)
	var out []record
	for _, p := range parts {
		pc, err := kafkago.DialLeader(ctx, "tcp", broker, topic, p.ID)
		must(t, err)
		end, err := pc.ReadLastOffset()
		must(t, err)
		pc.Close()
		if end == 0 {
			continue
		}
		r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: []string{broker}, Topic: topic, Partition: p.ID, MaxWait: 50 * time.Millisecond})
		for {
			m, err := r.ReadMessage(ctx)
			must(t, err)
			rec := record{partition: m.Partition, offset: m.Offset, key: string(m.Key)}
			if err := json.Unmarshal(m.Value, &rec.value); err != nil {
				t.Fatalf("record %d/%d is not JSON: %v", p.ID, m.Offset, err)
			}
			out = append(out, rec)
			if m.Offset+1 >= end {
				break
			}
		}
		r.Close()
	}
	return out
}

// eventsBody builds a batch from event JSON objects.
func eventsBody(events ...string) string {
	return `{"events":[` + strings.Join(events, ",") + `]}`
}
