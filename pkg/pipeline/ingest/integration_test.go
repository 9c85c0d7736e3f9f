package ingest_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/internal/devbroker"
	"github.com/assistantcms/cms/pkg/edge/clientnet"
	"github.com/assistantcms/cms/pkg/pipeline/ingest"
	"github.com/assistantcms/cms/pkg/pipeline/kafka"
)

func launch(session string) string {
	return fmt.Sprintf(`{"type":"REQUEST","name":"LAUNCH_REQUEST","channel":"web","platform":"stentor","selectedHandler":"LaunchRequest","sessionId":%q,"userId":"u-1","environment":"production","currentHandler":"LaunchRequest","isNewSession":true,"isoTime":"2026-11-21T10:00:00.000Z"}`, session)
}

func requestResponse(session string, asString bool) string {
	payload := `{"request":{"type":"INTENT_REQUEST","intentId":"OrderStatus","rawQuery":"where is my order","sessionId":"` + session + `","userId":"u-1","matchConfidence":0.91},"response":{"outputSpeech":{"displayText":"It ships today.","ssml":"<speak>It ships today.</speak>"},"displays":[{"type":"LIST","title":"Orders","items":[{"title":"Order 1","token":"o-1","description":"Shipped","url":"https://example.com/o/1"}]}]},"tag":"orders"}`
	if asString {
		payload = strconv.Quote(payload)
	}
	return fmt.Sprintf(`{"type":"AnalyticsEvent","name":"REQUEST_RESPONSE","channel":"web","platform":"stentor","selectedHandler":"OrderStatus","sessionId":%q,"userId":"u-1","canFulfill":true,"confidence":0.91,"payload":%s}`, session, payload)
}

func TestEndToEnd(t *testing.T) {
	b := startBroker(t, "")
	h := newHarness(t, b, harnessOpts{})

	var events []string
	sessions := []string{"s-1", "s-2", "s-3", "s-4", "s-5", "s-6"}
	for _, s := range sessions {
		events = append(events, launch(s), requestResponse(s, false), requestResponse(s, true))
	}
	// One plain batch, one gzip batch, over both paths and header spellings.
	half := len(events) / 2
	r := h.put("/cms/app/events", eventsBody(events[:half]...), h.bearer("a1")...)
	if r.status != 200 || r.body["accepted"] != float64(half) || r.body["rejected"] != 0.0 {
		t.Fatalf("plain batch: %d %s", r.status, r.raw)
	}
	r = h.do(http.MethodPut, "/cms/apps/events", gzipped(t, eventsBody(events[half:]...)),
		"Authorize", "bearer "+h.tokens["a1"], "Content-Encoding", "gzip", "Content-Type", "application/json; charset=utf-8")
	if r.status != 200 || r.body["accepted"] != float64(len(events)-half) {
		t.Fatalf("gzip batch: %d %s", r.status, r.raw)
	}
	if errs, ok := r.body["errors"].([]any); !ok || len(errs) != 0 {
		t.Errorf("errors = %v, want an empty array", r.body["errors"])
	}

	recs := readTopic(t, b.Addr(), h.topic)
	if len(recs) != len(events) {
		t.Fatalf("topic holds %d records, want %d", len(recs), len(events))
	}
	partitionOf := map[string]int{}
	ids := map[string]bool{}
	for _, rec := range recs {
		env := rec.value
		ev := env["event"].(map[string]any)
		session := ev["sessionId"].(string)
		if rec.key != "app-a1/"+session {
			t.Errorf("key %q for session %q", rec.key, session)
		}
		if p, seen := partitionOf[session]; seen && p != rec.partition {
			t.Errorf("session %s on partitions %d and %d", session, p, rec.partition)
		}
		partitionOf[session] = rec.partition
		if env["appId"] != "app-a1" || env["organizationId"] != "org-a" || env["v"] != 1.0 {
			t.Errorf("envelope %v", env)
		}
		if _, err := time.Parse(time.RFC3339Nano, env["receivedAt"].(string)); err != nil {
			t.Errorf("receivedAt: %v", err)
		}
		id := env["eventId"].(string)
		if ids[id] {
			t.Errorf("event ID %s twice", id)
		}
		ids[id] = true
		if ev["appId"] != "app-a1" {
			t.Errorf("appId not filled in: %v", ev["appId"])
		}
		if ev["name"] == "LAUNCH_REQUEST" && (ev["environment"] != "production" || ev["isNewSession"] != true) {
			t.Errorf("unknown fields lost: %v", ev)
		}
		if ev["name"] == "REQUEST_RESPONSE" {
			p, ok := ev["payload"].(map[string]any)
			if !ok {
				t.Fatalf("payload not an object: %T", ev["payload"])
			}
			item := p["response"].(map[string]any)["displays"].([]any)[0].(map[string]any)["items"].([]any)[0].(map[string]any)
			if item["url"] != "https://example.com/o/1" || ev["canFulfill"] != true {
				t.Errorf("unknown fields lost: %v", ev)
			}
		}
	}
	if len(partitionOf) != len(sessions) {
		t.Errorf("saw %d sessions, want %d", len(partitionOf), len(sessions))
	}
	distinct := map[int]bool{}
	for _, p := range partitionOf {
		distinct[p] = true
	}
	if len(distinct) < 2 {
		t.Errorf("6 sessions all landed on one partition: %v", partitionOf)
	}
	if q := readTopic(t, b.Addr(), h.quarantine); len(q) != 0 {
		t.Errorf("quarantine holds %d records, want 0", len(q))
	}
}

func TestPartialBatchQuarantinesInvalidEvents(t *testing.T) {
	b := startBroker(t, "")
	h := newHarness(t, b, harnessOpts{})
	body := eventsBody(
		launch("s-1"),
		`{"type":"AnalyticsEvent","name":"REQUEST_RESPONSE","sessionId":"s-1","payload":{"request":{"matchConfidence":"high"},"response":{}}}`,
		`{"type":"REQUEST","name":"LAUNCH_REQUEST","appId":"app-b1"}`,
		`{"type":"REQUEST","name":7}`,
		// Types the interface does not name are stored as sent.
		`{"type":"MessageEvent","name":"INFO","sessionId":"s-1","payload":"looking it up"}`,
		`{"type":"LambdaSuccessEvent","name":"Lambda Finished","sessionId":"s-1"}`,
	)
	r := h.put("/cms/app/events", body, h.bearer("a1")...)
	if r.status != 200 || r.body["accepted"] != 3.0 || r.body["rejected"] != 3.0 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	errs := r.body["errors"].([]any)
	want := []struct {
		index         float64
		field, reason string
	}{{1, "payload.request.matchConfidence", "wrong_type"}, {2, "appId", "app_mismatch"}, {3, "name", "wrong_type"}}
	if len(errs) != len(want) {
		t.Fatalf("errors %v", errs)
	}
	for i, w := range want {
		e := errs[i].(map[string]any)
		if e["index"] != w.index || e["field"] != w.field || e["reason"] != w.reason || e["message"] == "" {
			t.Errorf("error %d = %v, want index %v field %s reason %s", i, e, w.index, w.field, w.reason)
		}
	}
	if recs := readTopic(t, b.Addr(), h.topic); len(recs) != 3 {
		t.Errorf("events topic holds %d records, want 3", len(recs))
	}
	q := readTopic(t, b.Addr(), h.quarantine)
	if len(q) != 3 {
		t.Fatalf("quarantine holds %d records, want 3", len(q))
	}
	byIndex := map[float64]map[string]any{}
	for _, rec := range q {
		byIndex[rec.value["index"].(float64)] = rec.value
	}
	app := byIndex[2]
	if app["appId"] != "app-a1" || app["event"].(map[string]any)["appId"] != "app-b1" {
		t.Errorf("quarantine record keeps the event as received: %v", app)
	}
	if e := app["errors"].([]any)[0].(map[string]any); e["field"] != "appId" || e["reason"] != "app_mismatch" {
		t.Errorf("quarantine record's error %v", e)
	}

	// Strict mode: the same batch stores nothing.
	r = h.put("/cms/app/events?strict=true", body, h.bearer("a1")...)
	if r.status != http.StatusUnprocessableEntity || r.body["accepted"] != 0.0 || r.body["rejected"] != 3.0 {
		t.Fatalf("strict: %d %s", r.status, r.raw)
	}
	if recs := readTopic(t, b.Addr(), h.topic); len(recs) != 3 {
		t.Errorf("strict mode published: events topic holds %d records", len(recs))
	}
	if q := readTopic(t, b.Addr(), h.quarantine); len(q) != 3 {
		t.Errorf("strict mode quarantined: %d records", len(q))
	}
}

func TestStatusCodes(t *testing.T) {
	b := startBroker(t, "")
	h := newHarness(t, b, harnessOpts{maxEvents: 10})
	ok := eventsBody(launch("s"))
	big := `{"events":[` + launch("s") + `],"pad":"` + strings.Repeat("x", ingest.DefaultMaxBodyBytes) + `"}`
	bomb := gzipped(t, `{"events":[`+launch("s")+`],"pad":"`+strings.Repeat("x", ingest.DefaultMaxDecompressedBytes)+`"}`)
	many := make([]string, 11)
	for i := range many {
		many[i] = launch("s")
	}

	cases := []struct {
		name    string
		method  string
		path    string
		body    []byte
		headers []string
		status  int
		inMsg   string
	}{
		{"app token", "PUT", "/cms/app/events", []byte(ok), h.bearer("a1"), 200, ""},
		{"org token with appId", "PUT", "/cms/app/events?appId=app-a2", []byte(ok), h.bearer("orgA"), 200, ""},
		{"app token naming its own app", "PUT", "/cms/app/events?appId=app-a1", []byte(ok), h.bearer("a1"), 200, ""},
		{"spec content type", "PUT", "/cms/app/events", []byte(ok), append(h.bearer("a1"), "Content-Type", "application-json"), 200, ""},
		{"GET", "GET", "/cms/app/events", nil, h.bearer("a1"), 405, "use PUT"},
		{"POST", "POST", "/cms/apps/events", []byte(ok), h.bearer("a1"), 405, "use PUT"},
		// Authentication and isolation: TestAuthAbuseAndIsolation.
		{"malformed JSON", "PUT", "/cms/app/events", []byte(`{"events":[`), h.bearer("a1"), 400, "not valid JSON"},
		{"missing events", "PUT", "/cms/app/events", []byte(`{}`), h.bearer("a1"), 400, "is required"},
		{"empty events", "PUT", "/cms/app/events", []byte(`{"events":[]}`), h.bearer("a1"), 400, "at least 1"},
		{"events not array", "PUT", "/cms/app/events", []byte(`{"events":"x"}`), h.bearer("a1"), 400, "must be an array"},
		{"bad strict", "PUT", "/cms/app/events?strict=maybe", []byte(ok), h.bearer("a1"), 400, "true or false"},
		{"bad gzip", "PUT", "/cms/app/events", []byte("not gzip"), append(h.bearer("a1"), "Content-Encoding", "gzip"), 400, "not valid gzip"},
		{"too many events", "PUT", "/cms/app/events", []byte(eventsBody(many...)), h.bearer("a1"), 413, "at most 10"},
		{"body too large", "PUT", "/cms/app/events", []byte(big), h.bearer("a1"), 413, "body exceeds 10485760 bytes"},
		{"gzip bomb", "PUT", "/cms/app/events", bomb, append(h.bearer("a1"), "Content-Encoding", "gzip"), 413, "decompressed body exceeds 16777216"},
		{"xml", "PUT", "/cms/app/events", []byte(ok), append(h.bearer("a1"), "Content-Type", "application/xml"), 415, "not supported"},
		{"brotli", "PUT", "/cms/app/events", []byte(ok), append(h.bearer("a1"), "Content-Encoding", "br"), 415, "not supported"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do(tc.method, tc.path, tc.body, tc.headers...)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.raw)
			}
			if tc.status != 200 {
				if r.body["httpStatus"] != float64(tc.status) || !strings.Contains(r.body["message"].(string), tc.inMsg) {
					t.Errorf("body %s, want message containing %q", r.raw, tc.inMsg)
				}
			}
			if tc.status == 405 && r.header.Get("Allow") != "PUT" {
				t.Errorf("Allow = %q", r.header.Get("Allow"))
			}
		})
	}
}

func TestRetriedBatchKeepsEventIDs(t *testing.T) {
	b := startBroker(t, "")
	h := newHarness(t, b, harnessOpts{})
	body := eventsBody(launch("s-1"), requestResponse("s-1", true), `{"type":"REQUEST","name":"X","eventId":"client-1"}`)
	for range 2 {
		if r := h.put("/cms/app/events", body, h.bearer("a1")...); r.status != 200 {
			t.Fatalf("%d %s", r.status, r.raw)
		}
	}
	// With an Idempotency-Key the IDs follow the key, not the bytes.
	for _, b := range []string{body, strings.Replace(body, "X", "Y", 1)} {
		if r := h.put("/cms/app/events", b, append(h.bearer("a1"), "Idempotency-Key", "turn-42")...); r.status != 200 {
			t.Fatalf("%d %s", r.status, r.raw)
		}
	}
	recs := readTopic(t, b.Addr(), h.topic)
	if len(recs) != 12 {
		t.Fatalf("%d records, want 12", len(recs))
	}
	count := map[string]int{}
	for _, r := range recs {
		count[r.value["eventId"].(string)]++
	}
	if len(count) != 5 || count["client-1"] != 4 {
		t.Errorf("event IDs %v: want 2 body-derived IDs and 2 key-derived IDs twice each, client-1 four times", count)
	}
	for id, n := range count {
		if id != "client-1" && n != 2 {
			t.Errorf("ID %s seen %d times, want 2", id, n)
		}
	}
}

func TestOrgTokenIsolation(t *testing.T) {
	b := startBroker(t, "")
	h := newHarness(t, b, harnessOpts{})
	r := h.put("/cms/app/events?appId=app-a2", eventsBody(launch("s"), `{"type":"REQUEST","name":"x","appId":"app-a1"}`), h.bearer("orgA")...)
	if r.status != 200 || r.body["accepted"] != 1.0 || r.body["rejected"] != 1.0 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	recs := readTopic(t, b.Addr(), h.topic)
	if len(recs) != 1 || recs[0].value["appId"] != "app-a2" || recs[0].value["organizationId"] != "org-a" {
		t.Errorf("records %v", recs)
	}
	if r := h.put("/cms/app/events?appId=app-a1", eventsBody(launch("s")), h.bearer("orgB")...); r.status != 403 {
		t.Errorf("org B reached org A's app: %d", r.status)
	}
}

func TestRevocationTakesEffect(t *testing.T) {
	b := startBroker(t, "")
	ttl := 300 * time.Millisecond
	h := newHarness(t, b, harnessOpts{tokenTTL: ttl})
	if r := h.put("/cms/app/events", eventsBody(launch("s")), h.bearer("a1")...); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	revoked := time.Now()
	must(t, h.store.RevokeToken(contenttest.Acting(t.Context()), h.tokenIDs["a1"], revoked))
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := h.put("/cms/app/events", eventsBody(launch("s")), h.bearer("a1")...)
		if r.status == 401 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("revoked token still accepted after 5s: %d", r.status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if took := time.Since(revoked); took > ttl+5*time.Second {
		t.Errorf("revocation took %s with a %s cache", took, ttl)
	}
}

func TestRateLimit(t *testing.T) {
	b := startBroker(t, "")
	// A slow rate, so that no token refills between the requests even on a
	// loaded machine.
	h := newHarness(t, b, harnessOpts{rateRPS: 0.1, rateBurst: 2})
	body := eventsBody(launch("s"))
	for i := range 2 {
		if r := h.put("/cms/app/events", body, h.bearer("a1")...); r.status != 200 {
			t.Fatalf("request %d: %d", i, r.status)
		}
	}
	r := h.put("/cms/app/events", body, h.bearer("a1")...)
	if r.status != 429 || r.header.Get("Retry-After") == "" {
		t.Fatalf("third request: %d Retry-After %q", r.status, r.header.Get("Retry-After"))
	}
	if ra, _ := strconv.Atoi(r.header.Get("Retry-After")); ra < 1 || ra > 10 {
		t.Errorf("Retry-After = %d, want 1..10 at 0.1 req/s", ra)
	}
	// Another token keeps its own budget.
	if r := h.put("/cms/app/events", body, h.bearer("a2")...); r.status != 200 {
		t.Errorf("other token limited: %d", r.status)
	}
}

// TestBrokerOutage stops the broker: requests answer 503 with Retry-After
// and claim nothing; after the broker returns, every event answered 200 is
// on the topic.
func TestBrokerOutage(t *testing.T) {
	b := startBroker(t, t.TempDir())
	h := newHarness(t, b, harnessOpts{produceTimeout: 1500 * time.Millisecond})

	acked := map[string]bool{}
	send := func(i int) reply {
		id := fmt.Sprintf("evt-%d", i)
		r := h.put("/cms/app/events", eventsBody(`{"type":"REQUEST","name":"LAUNCH_REQUEST","sessionId":"s-`+strconv.Itoa(i%5)+`","eventId":"`+id+`"}`), h.bearer("a1")...)
		if r.status == 200 {
			acked[id] = true
		}
		return r
	}
	for i := range 10 {
		if r := send(i); r.status != 200 {
			t.Fatalf("before outage: %d %s", r.status, r.raw)
		}
	}
	must(t, b.Stop())
	r := send(100)
	if r.status != 503 || r.header.Get("Retry-After") == "" {
		t.Fatalf("broker down: %d %s", r.status, r.raw)
	}
	if r.body["accepted"] != nil {
		t.Errorf("a 503 claims accepted events: %s", r.raw)
	}
	must(t, b.Start(t.Context()))
	deadline := time.Now().Add(30 * time.Second)
	for i := 200; ; i++ {
		r := send(i)
		if r.status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no 200 within 30s of the broker's return: %d %s", r.status, r.raw)
		}
	}
	for i := 300; i < 310; i++ {
		if r := send(i); r.status != 200 {
			t.Fatalf("after recovery: %d %s", r.status, r.raw)
		}
	}
	onTopic := map[string]bool{}
	for _, rec := range readTopic(t, b.Addr(), h.topic) {
		onTopic[rec.value["eventId"].(string)] = true
	}
	for id := range acked {
		if !onTopic[id] {
			t.Errorf("event %s was answered 200 but is not on the topic", id)
		}
	}
	if len(acked) < 21 {
		t.Errorf("only %d events acknowledged", len(acked))
	}
}

func TestStartupFailsClearlyWithoutBroker(t *testing.T) {
	b := startBroker(t, "")
	h := newHarness(t, b, harnessOpts{}) // for its content database
	port, err := devbroker.FreePort()
	must(t, err)
	start := time.Now()
	_, err = ingest.NewService(t.Context(), ingest.ServiceConfig{
		Kafka: kafka.Cluster{Brokers: []string{fmt.Sprintf("127.0.0.1:%d", port)}}, EventsTopic: "e", QuarantineTopic: "q",
		TopicPartitions: 1, TopicReplication: 1, StartupTimeout: 2 * time.Second,
	}, h.store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !strings.Contains(err.Error(), "prepare Kafka topics") || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("err = %v, want a message naming the topics step and the broker", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("start-up took %s to fail", took)
	}
}

// TestLargeEvents sends what knowledge-base turns make: events of hundreds
// of KB are accepted, and one over MAX_EVENT_BYTES is quarantined whole,
// which needs both topics to take records over Kafka's default size.
func TestLargeEvents(t *testing.T) {
	b := startBroker(t, "")
	h := newHarness(t, b, harnessOpts{})
	doc := func(n int) string {
		return `{"title":"Doc","uri":"https://example.com/d","document":"` + strings.Repeat("Orders ship within two days. ", n/29) + `"}`
	}
	var docs []string
	for range 10 {
		docs = append(docs, doc(60<<10))
	}
	kbTurn := `{"type":"REQUEST","name":"INTENT_REQUEST","sessionId":"s-kb","payload":{"request":{"type":"INTENT_REQUEST","knowledgeBaseResult":{"documents":[` +
		strings.Join(docs, ",") + `]}},"intent":"Shipping"}}`
	tooLarge := `{"type":"REQUEST","name":"INTENT_REQUEST","sessionId":"s-kb","pad":"` + strings.Repeat("x", ingest.DefaultMaxBodyBytes/4) + `"}`
	body := eventsBody(kbTurn, tooLarge)
	r := h.do("PUT", "/cms/app/events", gzipped(t, body), append(h.bearer("a1"), "Content-Encoding", "gzip")...)
	if r.status != 200 || r.body["accepted"] != 1.0 || r.body["rejected"] != 1.0 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	if e := r.body["errors"].([]any)[0].(map[string]any); e["index"] != 1.0 || e["reason"] != "too_large" || e["field"] != "" {
		t.Errorf("error %v", e)
	}
	recs := readTopic(t, b.Addr(), h.topic)
	if len(recs) != 1 || len(recs[0].value["event"].(map[string]any)["payload"].(map[string]any)["request"].(map[string]any)["knowledgeBaseResult"].(map[string]any)["documents"].([]any)) != 10 {
		t.Fatalf("events topic: %d records", len(recs))
	}
	q := readTopic(t, b.Addr(), h.quarantine)
	if len(q) != 1 || q[0].value["truncated"] != nil {
		t.Fatalf("quarantine: %d records, truncated %v", len(q), q[0].value["truncated"])
	}
	if pad := q[0].value["event"].(map[string]any)["pad"].(string); len(pad) != ingest.DefaultMaxBodyBytes/4 {
		t.Errorf("quarantined event's pad is %d bytes, want it whole", len(pad))
	}
}

// TestEnvelopesRecordTheSender checks that every envelope says which
// token sent it and from which network, as the server saw the connection:
// X-Forwarded-For counts only from a trusted proxy, and then only the
// entry that proxy appended.
func TestEnvelopesRecordTheSender(t *testing.T) {
	b := startBroker(t, "")
	// The gateway, as the local stack runs it: on loopback.
	loopback, err := clientnet.ParseTrusted("127.0.0.0/8,::1/128")
	must(t, err)
	for _, tc := range []struct {
		name    string
		trusted []netip.Prefix
		xff     string
		want    string
	}{
		{"no proxy trusted: the peer", nil, "198.51.100.7", "127.0.0.0/24"},
		{"behind the local gateway", loopback, "198.51.100.7", "198.51.100.0/24"},
		{"a forged entry before the proxy's", loopback, "203.0.113.66, 198.51.100.7", "198.51.100.0/24"},
		{"IPv6", loopback, "2001:db8:5:6::1", "2001:db8:5::/48"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, b, harnessOpts{trustedProxies: tc.trusted})
			r := h.put("/cms/app/events", eventsBody(`{"type":"REQUEST","name":"LAUNCH_REQUEST","sessionId":"s-1"}`, `{"type":"REQUEST"}`),
				append(h.bearer("a1"), "X-Forwarded-For", tc.xff)...)
			if r.status != http.StatusOK {
				t.Fatalf("PUT: %d %s", r.status, r.raw)
			}
			recs := readTopic(t, b.Addr(), h.topic)
			if len(recs) != 1 {
				t.Fatalf("%d records, want 1", len(recs))
			}
			if got := recs[0].value; got["tokenId"] != h.tokenIDs["a1"] || got["clientNetwork"] != tc.want {
				t.Errorf("envelope tokenId %v clientNetwork %v, want %s %s", got["tokenId"], got["clientNetwork"], h.tokenIDs["a1"], tc.want)
			}
			// Quarantine records do not carry it.
			for _, q := range readTopic(t, b.Addr(), h.quarantine) {
				if _, ok := q.value["clientNetwork"]; ok {
					t.Errorf("quarantine record %v", q.value)
				}
			}
		})
	}
}
