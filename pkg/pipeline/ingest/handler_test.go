package ingest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/pipeline/event"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// allowAll authenticates every request from its Authorization header,
// "[org/][app:]token" ("t" when missing): the token ID is token, acting
// for app (a1 when not named) of org (when not named, an organization of
// its own, "o-" and the app); so "o/a1:org" and "o/a2:org" are one
// organization token acting for two apps. auth has its own tests.
type allowAll struct{}

func (allowAll) Authenticate(_ context.Context, h http.Header) (auth.Principal, error) {
	token := h.Get("Authorization")
	if token == "" {
		token = "t"
	}
	org, rest, named := strings.Cut(token, "/")
	if !named {
		org, rest = "", token
	}
	app := "a1"
	if a, tok, ok := strings.Cut(rest, ":"); ok {
		app, token = a, tok
	} else {
		token = rest
	}
	if org == "" {
		org = "o-" + app
	}
	return auth.Principal{TokenID: token, OrganizationID: org, AppID: app, Scopes: tenancy.RuntimeScopes}, nil
}

func (allowAll) Resolve(_ context.Context, p auth.Principal, _ string) (auth.Target, error) {
	return auth.Target{TokenID: p.TokenID, OrganizationID: p.OrganizationID, AppID: p.AppID}, nil
}

// blockingPublisher holds every Publish until released, or fails it.
type blockingPublisher struct {
	entered chan struct{}
	release chan struct{}
	err     error
}

func (b *blockingPublisher) Publish(ctx context.Context, accepted, quarantined []event.Record) error {
	if b.entered != nil {
		b.entered <- struct{}{}
		<-b.release
	}
	return b.err
}

const body = `{"events":[{"type":"REQUEST","name":"LAUNCH_REQUEST"},{"type":7,"name":"x"}]}`

func newTestHandler(pub Publisher, cfg Config) (*Handler, *Metrics) {
	m := NewMetrics(prometheus.NewRegistry())
	return New(cfg, event.NewValidator(event.Limits{}), allowAll{}, pub, nil, m, slog.New(slog.NewTextHandler(io.Discard, nil))), m
}

func put(h http.Handler) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPut, "/cms/app/events", strings.NewReader(body)))
	return rec
}

func TestOverloadAnswers503(t *testing.T) {
	pub := &blockingPublisher{entered: make(chan struct{}), release: make(chan struct{})}
	h, _ := newTestHandler(pub, Config{MaxInFlight: 2, MaxInFlightPerApp: 3, MaxInFlightPerToken: 3})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if rec := put(h); rec.Code != 200 {
				t.Errorf("held request answered %d", rec.Code)
			}
		})
		<-pub.entered
	}
	rec := put(h)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" || !strings.Contains(rec.Body.String(), "at capacity") {
		t.Errorf("third request: %d %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	close(pub.release)
	wg.Wait()
	pub.entered = nil
	if rec := put(h); rec.Code != 200 {
		t.Errorf("after the load passed: %d", rec.Code)
	}
}

// gatePublisher holds the batches whose body asked for it (an event named
// HOLD) until released; others pass at once.
type gatePublisher struct {
	entered chan struct{}
	release chan struct{}
}

func (g *gatePublisher) Publish(ctx context.Context, accepted, quarantined []event.Record) error {
	for _, m := range append(accepted, quarantined...) {
		if strings.Contains(string(m.Value), `"name":"HOLD"`) {
			g.entered <- struct{}{}
			<-g.release
			break
		}
	}
	return nil
}

// putAs sends body with a token; pad adds an ignored top-level field of
// that many bytes.
func putAs(h http.Handler, token, name string, pad int) *httptest.ResponseRecorder {
	b := `{"events":[{"type":"REQUEST","name":"` + name + `"}],"pad":"` + strings.Repeat("p", pad) + `"}`
	req := httptest.NewRequest(http.MethodPut, "/cms/app/events", strings.NewReader(b))
	req.Header.Set("Authorization", token)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestTokenShareOfSlots holds requests of one token until it has its
// share of the slots: its next request gets 429, while another token's
// still goes through, and the share is given back as requests finish.
func TestTokenShareOfSlots(t *testing.T) {
	pub := &gatePublisher{entered: make(chan struct{}), release: make(chan struct{})}
	h, _ := newTestHandler(pub, Config{MaxInFlight: 4, MaxInFlightPerApp: 4, MaxInFlightPerToken: 2})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if rec := putAs(h, "hog", "HOLD", 0); rec.Code != 200 {
				t.Errorf("held request answered %d %s", rec.Code, rec.Body)
			}
		})
		<-pub.entered
	}
	rec := putAs(h, "hog", "GO", 0)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" ||
		!strings.Contains(rec.Body.String(), "this token already has 2 requests in flight, its share of the request slots") {
		t.Errorf("third request of the token: %d %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if rec := putAs(h, "other", "GO", 0); rec.Code != 200 {
		t.Errorf("another token beside the full share: %d %s", rec.Code, rec.Body)
	}
	close(pub.release)
	wg.Wait()
	if rec := putAs(h, "hog", "GO", 0); rec.Code != 200 {
		t.Errorf("the token after its requests finished: %d %s", rec.Code, rec.Body)
	}
	if _, _, tokens, _ := h.admission.inUse(); tokens != 0 {
		t.Errorf("%d tokens in flight after every request finished", tokens)
	}
}

// TestMemoryBudget holds a large body until the body memory budget is
// nearly spent: the next large body, of another app, gets 503, a small one
// still passes, and the budget is whole again once the held request
// finishes.
func TestMemoryBudget(t *testing.T) {
	pub := &gatePublisher{entered: make(chan struct{}), release: make(chan struct{})}
	// A large body takes three times its size past the allowance: itself,
	// its envelopes and its records.
	const budget = 3 << 20
	h, _ := newTestHandler(pub, Config{MaxBodyMemory: budget})
	large := 900 << 10
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- putAs(h, "a1:a", "HOLD", large) }()
	<-pub.entered
	rec := putAs(h, "a2:b", "GO", large)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" ||
		!strings.Contains(rec.Body.String(), "memory for request bodies") {
		t.Errorf("second large body: %d %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if rec := putAs(h, "a2:b", "GO", BodyAllowance-100); rec.Code != 200 {
		t.Errorf("body within the allowance: %d %s", rec.Code, rec.Body)
	}
	close(pub.release)
	if rec := <-done; rec.Code != 200 {
		t.Errorf("held request: %d %s", rec.Code, rec.Body)
	}
	if rec := putAs(h, "a2:b", "GO", large); rec.Code != 200 {
		t.Errorf("large body after the budget came back: %d %s", rec.Code, rec.Body)
	}
	if _, _, _, free := h.admission.inUse(); free != budget {
		t.Errorf("budget holds %d bytes after every request finished, want %d", free, budget)
	}
}

func TestPublishFailureClaimsNothing(t *testing.T) {
	h, m := newTestHandler(&blockingPublisher{err: errors.New("leader not available")}, Config{})
	rec := put(h)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if strings.Contains(rec.Body.String(), "accepted") {
		t.Errorf("503 body mentions accepted events: %s", rec.Body)
	}
	if got := testutil.ToFloat64(m.events.WithLabelValues("accepted")); got != 0 {
		t.Errorf("accepted counter = %v after a failed publish", got)
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues("/cms/app/events", "503")); got != 1 {
		t.Errorf("503 counter = %v", got)
	}
}

func TestMetricsCountOutcomes(t *testing.T) {
	h, m := newTestHandler(&blockingPublisher{}, Config{})
	if rec := put(h); rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	checks := map[string]float64{
		"accepted": testutil.ToFloat64(m.events.WithLabelValues("accepted")),
		"rejected": testutil.ToFloat64(m.events.WithLabelValues("rejected")),
		"by type":  testutil.ToFloat64(m.rejected.WithLabelValues("wrong_type", "type")),
		"200":      testutil.ToFloat64(m.requests.WithLabelValues("/cms/app/events", "200")),
	}
	for name, got := range checks {
		if got != 1 {
			t.Errorf("%s = %v, want 1", name, got)
		}
	}
	const want = `
# HELP cms_ingest_batch_size_events Events per accepted request body.
# TYPE cms_ingest_batch_size_events histogram
cms_ingest_batch_size_events_bucket{le="1"} 0
cms_ingest_batch_size_events_bucket{le="2"} 1
cms_ingest_batch_size_events_bucket{le="5"} 1
cms_ingest_batch_size_events_bucket{le="10"} 1
cms_ingest_batch_size_events_bucket{le="20"} 1
cms_ingest_batch_size_events_bucket{le="50"} 1
cms_ingest_batch_size_events_bucket{le="100"} 1
cms_ingest_batch_size_events_bucket{le="200"} 1
cms_ingest_batch_size_events_bucket{le="500"} 1
cms_ingest_batch_size_events_bucket{le="1000"} 1
cms_ingest_batch_size_events_bucket{le="10000"} 1
cms_ingest_batch_size_events_bucket{le="+Inf"} 1
cms_ingest_batch_size_events_sum 2
cms_ingest_batch_size_events_count 1
`
	if err := testutil.CollectAndCompare(m.batchSize, strings.NewReader(want)); err != nil {
		t.Errorf("batch size histogram: %v", err)
	}
}

func TestFieldLabel(t *testing.T) {
	cases := map[string]string{
		"":     "",
		"type": "type",
		"payload.response.displays[3].items[12].title": "payload.response.displays[].items[].title",
	}
	for in, want := range cases {
		if got := fieldLabel(in); got != want {
			t.Errorf("fieldLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestConfigCheck(t *testing.T) {
	const mib = 1 << 20
	// A gzip body of n bytes decompressed, of the most events a batch may
	// hold.
	gzipBody := func(n int64) int64 {
		return (n+1-BodyAllowance)*MemoryPerBodyByte + DefaultMaxEvents*MemoryPerEvent + gzipStateBytes
	}
	cases := []struct {
		name  string
		cfg   Config
		inErr string // empty: accepted
	}{
		{"defaults", Config{}, ""},
		{"a decompressed body the budget cannot hold", Config{MaxDecompressedBytes: 100 * mib}, "MAX_BODY_MEMORY 268435456 cannot hold a body of MAX_DECOMPRESSED_BYTES 104857600"},
		{"a wire body the budget cannot hold", Config{MaxBodyBytes: mib, MaxDecompressedBytes: mib, MaxBodyMemory: 2 * mib}, "MAX_BODY_MEMORY 2097152 cannot hold a body of MAX_BODY_BYTES 1048576"},
		{"just enough", Config{MaxBodyBytes: mib, MaxDecompressedBytes: mib, MaxBodyMemory: gzipBody(mib)}, ""},
		{"an app's share that cannot hold the largest body", Config{MaxBodyMemoryPerApp: 50 * mib},
			"MAX_BODY_MEMORY_PER_APP 52428800 cannot hold a body of MAX_DECOMPRESSED_BYTES 16777216 of MAX_EVENTS 25000 events"},
		{"an app's share just enough for the largest body", Config{MaxBodyMemoryPerApp: gzipBody(DefaultMaxDecompressedBytes)}, ""},
		{"a budget whose quarter cannot hold the largest body: the share is raised", Config{MaxDecompressedBytes: 64 * mib}, ""},
		{"a token's share that cannot hold the largest body", Config{MaxBodyMemoryPerToken: 50 * mib},
			"MAX_BODY_MEMORY_PER_TOKEN 52428800 cannot hold a body of MAX_DECOMPRESSED_BYTES 16777216 of MAX_EVENTS 25000 events"},
		{"a token's share just enough for the largest body", Config{MaxBodyMemoryPerToken: gzipBody(DefaultMaxDecompressedBytes)}, ""},
		{"an organization's share that cannot hold the largest body", Config{MaxBodyMemoryPerOrg: 50 * mib},
			"MAX_BODY_MEMORY_PER_ORG 52428800 cannot hold a body of MAX_DECOMPRESSED_BYTES 16777216 of MAX_EVENTS 25000 events"},
		{"an organization's share just enough for the largest body", Config{MaxBodyMemoryPerOrg: gzipBody(DefaultMaxDecompressedBytes)}, ""},
		{"a wire body a token's share cannot hold", Config{MaxBodyBytes: mib, MaxDecompressedBytes: mib, MaxBodyMemoryPerToken: mib},
			"MAX_BODY_MEMORY_PER_TOKEN 1048576 cannot hold a body of MAX_BODY_BYTES 1048576"},
		// Each event of the largest batch costs MemoryPerEvent too.
		{"a share that cannot hold the most events", Config{MaxBodyMemoryPerApp: 64 * mib}.WithMaxEvents(100_000),
			"MAX_BODY_MEMORY_PER_APP 67108864 cannot hold a body of MAX_BODY_BYTES 10485760 of MAX_EVENTS 100000 events"},
		{"the most events in the default shares", Config{}.WithMaxEvents(DefaultMaxEvents), ""},
		{"the most events raise the default shares", Config{}.WithMaxEvents(100_000), ""},
		// A batch of MAX_EVENTS must pass a full bucket of each event limit.
		{"a token's event burst below the most events", Config{EventBurstPerToken: DefaultMaxEvents - 1},
			"EVENT_BURST_PER_TOKEN 24999 cannot hold a batch of MAX_EVENTS 25000 events"},
		{"an app's event burst below the most events", Config{EventBurstPerApp: 1000}.WithMaxEvents(2000),
			"EVENT_BURST_PER_APP 1000 cannot hold a batch of MAX_EVENTS 2000 events"},
		{"an organization's event burst below the most events", Config{EventBurstPerOrg: 10},
			"EVENT_BURST_PER_ORG 10 cannot hold a batch of MAX_EVENTS 25000 events"},
		{"an event burst of the most events", Config{EventBurstPerToken: 100, EventBurstPerApp: 100, EventBurstPerOrg: 100}.WithMaxEvents(100), ""},
		{"no event limit, so no burst to hold it", Config{EventRatePerOrg: -1, EventBurstPerOrg: 10}, ""},
	}
	for _, c := range cases {
		err := c.cfg.check()
		if (err == nil) != (c.inErr == "") || (err != nil && !strings.Contains(err.Error(), c.inErr)) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.inErr)
		}
	}
}

// TestDefaultShares derives each app's, token's and organization's shares
// from the server's budgets when they are not set: an app a quarter, a
// token what an app may, an organization half, or more when an app or a
// token may hold more.
func TestDefaultShares(t *testing.T) {
	const mib = 1 << 20
	// Of a 64 MiB gzip body of the most events.
	largest := int64((64*mib+1-BodyAllowance)*MemoryPerBodyByte + DefaultMaxEvents*MemoryPerEvent + gzipStateBytes)
	// Of a 16 MiB gzip body of 100,000 events.
	manyEvents := int64((16*mib+1-BodyAllowance)*MemoryPerBodyByte + 100_000*MemoryPerEvent + gzipStateBytes)
	type shares struct {
		app, token, org                   int
		appMemory, tokenMemory, orgMemory int64
	}
	cases := []struct {
		name      string
		cfg       Config
		want      shares
		shareNote bool
	}{
		{"defaults", Config{}, shares{64, 64, 128, 64 * mib, 64 * mib, 128 * mib}, false},
		{"of what is set", Config{MaxInFlight: 40, MaxBodyMemory: 400 * mib}, shares{10, 10, 20, 100 * mib, 100 * mib, 200 * mib}, false},
		{"at least one slot", Config{MaxInFlight: 3}, shares{1, 1, 1, 64 * mib, 64 * mib, 128 * mib}, false},
		{"raised to hold the largest body, past half", Config{MaxDecompressedBytes: 64 * mib},
			shares{64, 64, 128, largest, largest, largest}, true},
		{"raised to hold the largest body, within half", Config{MaxDecompressedBytes: 64 * mib, MaxBodyMemory: 500 * mib},
			shares{64, 64, 128, largest, largest, 250 * mib}, true},
		{"raised to hold the most events", Config{}.WithMaxEvents(100_000),
			shares{64, 64, 128, manyEvents, manyEvents, 128 * mib}, true},
		{"an app's set", Config{MaxInFlightPerApp: 7, MaxBodyMemoryPerApp: 99 * mib, MaxDecompressedBytes: 64 * mib},
			shares{7, 7, 128, 99 * mib, 99 * mib, 128 * mib}, false},
		{"an app's set past half", Config{MaxInFlightPerApp: 200, MaxBodyMemoryPerApp: 200 * mib},
			shares{200, 200, 200, 200 * mib, 200 * mib, 200 * mib}, false},
		{"a token's set past half", Config{MaxInFlightPerToken: 150, MaxBodyMemoryPerToken: 150 * mib},
			shares{64, 150, 150, 64 * mib, 150 * mib, 150 * mib}, false},
		{"each set", Config{MaxInFlightPerApp: 5, MaxInFlightPerToken: 3, MaxInFlightPerOrg: 9,
			MaxBodyMemoryPerApp: 50 * mib, MaxBodyMemoryPerToken: 60 * mib, MaxBodyMemoryPerOrg: 70 * mib},
			shares{5, 3, 9, 50 * mib, 60 * mib, 70 * mib}, false},
	}
	for _, c := range cases {
		d := c.cfg.withDefaults()
		got := shares{d.MaxInFlightPerApp, d.MaxInFlightPerToken, d.MaxInFlightPerOrg, d.MaxBodyMemoryPerApp, d.MaxBodyMemoryPerToken, d.MaxBodyMemoryPerOrg}
		if got != c.want || (c.cfg.MemoryShareNote() != "") != c.shareNote {
			t.Errorf("%s: shares %+v (note %q), want %+v (a note: %v)", c.name, got, c.cfg.MemoryShareNote(), c.want, c.shareNote)
		}
	}
}

func TestBatchStatuses(t *testing.T) {
	batches := []struct {
		kind event.BatchErrorKind
		want int
	}{
		{event.BatchInvalid, http.StatusBadRequest},
		{event.BatchTooLarge, http.StatusRequestEntityTooLarge},
	}
	for _, c := range batches {
		if got := batchStatus(c.kind); got != c.want {
			t.Errorf("batchStatus(%s) = %d, want %d", c.kind, got, c.want)
		}
	}
}

// refusalCase is one refusal of TestRefusals: requests held in Publish
// first, then the one refused, then one that still passes.
type refusalCase struct {
	name    string
	cfg     Config
	server  func(*http.Server) // adjusts the server, when set
	hold    []sent             // held until the case ends
	refused sent
	status  int
	budget  string
	msg     string // the whole message, or
	inMsg   []string
	took    [2]time.Duration
	passes  *sent // sent after the refusal, beside the held requests
	stall   bool  // the refused request stalls after its body
}

// sent is a request: the token ("app:token"), an ignored pad of that many
// bytes, gzipped when gz.
type sent struct {
	token string
	pad   int
	gz    bool
}

func (s sent) body(name string) []byte {
	b := []byte(`{"events":[{"type":"REQUEST","name":"` + name + `"}],"pad":"` + strings.Repeat("p", s.pad) + `"}`)
	if !s.gz {
		return b
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return z.Bytes()
}

// exchangeRaw sends a request of body on a new connection, with a
// Content-Length that may announce more than body (the connection then
// stalls), and reads the answer.
func exchangeRaw(t *testing.T, addr, token string, body []byte, gz bool, contentLength int) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	head := "PUT /cms/app/events HTTP/1.1\r\nHost: ingest\r\nAuthorization: " + token + "\r\nContent-Length: " + strconv.Itoa(contentLength) + "\r\n"
	if gz {
		head += "Content-Encoding: gzip\r\n"
	}
	go func() { _, _ = conn.Write(append([]byte(head+"\r\n"), body...)) }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read the answer's body: %v", err)
	}
	return resp, raw
}

// TestRefusals runs each budget out over real connections: the refused
// request gets its status, a message naming the budget, Retry-After when
// a retry can pass (429 for the client's own share, 503 for the server's)
// and is counted by that budget alone; a request of another app, or a
// smaller one, still passes.
func TestRefusals(t *testing.T) {
	const mib = 1 << 20
	large := 900 << 10 // takes about 2.5 MiB of body memory
	slow := sent{token: "a1:x", pad: 500}
	cases := []refusalCase{
		{name: "token's share of the slots", cfg: Config{MaxInFlight: 8, MaxInFlightPerApp: 8, MaxInFlightPerToken: 2},
			hold: []sent{{token: "org"}, {token: "org"}}, refused: sent{token: "org"}, status: 429, budget: budgetTokenSlots,
			msg:    "this token already has 2 requests in flight, its share of the request slots; retry later",
			passes: &sent{token: "a1:x"}},
		{name: "app's share of the slots", cfg: Config{MaxInFlight: 8, MaxInFlightPerApp: 2, MaxInFlightPerToken: 8},
			hold: []sent{{token: "a1:x"}, {token: "a1:y"}}, refused: sent{token: "a1:z"}, status: 429, budget: budgetAppSlots,
			msg:    `app "a1" already has 2 requests in flight, its share of the request slots; retry later`,
			passes: &sent{token: "a2:w"}},
		{name: "organization's share of the slots", cfg: Config{MaxInFlight: 8, MaxInFlightPerApp: 8, MaxInFlightPerToken: 8, MaxInFlightPerOrg: 2},
			hold: []sent{{token: "o/a1:x"}, {token: "o/a2:org"}}, refused: sent{token: "o/a3:org2"}, status: 429, budget: budgetOrgSlots,
			msg:    `organization "o" already has 2 requests in flight, its share of the request slots; retry later`,
			passes: &sent{token: "p/a4:y"}},
		{name: "every slot", cfg: Config{MaxInFlight: 2, MaxInFlightPerApp: 2},
			hold: []sent{{token: "a1:x"}, {token: "a2:y"}}, refused: sent{token: "a3:z"}, status: 503, budget: budgetSlots,
			msg: "the server is at capacity: all 2 request slots are taken; retry later"},
		{name: "app's share of the body memory", cfg: Config{MaxBodyMemory: 8 * mib, MaxBodyMemoryPerApp: 3 * mib},
			hold: []sent{{token: "a1:x", pad: large}}, refused: sent{token: "a1:y", pad: large}, status: 429, budget: budgetAppMemory,
			msg:    `the bodies of app "a1" in flight hold its share of the memory for request bodies (3145728 bytes); retry later`,
			passes: &sent{token: "a2:w", pad: large}},
		{name: "app's share of the body memory, gzip bomb", cfg: Config{MaxBodyMemory: 64 * mib, MaxBodyMemoryPerApp: 3 * mib},
			refused: sent{token: "a1:y", pad: 15 * mib, gz: true}, status: 429, budget: budgetAppMemory,
			msg:    `the bodies of app "a1" in flight hold its share of the memory for request bodies (3145728 bytes); retry later`,
			passes: &sent{token: "a1:y", pad: 100 << 10, gz: true}},
		{name: "token's share of the body memory", cfg: Config{MaxBodyMemory: 8 * mib, MaxBodyMemoryPerApp: 3 * mib, MaxBodyMemoryPerToken: 3 * mib, MaxBodyMemoryPerOrg: 8 * mib},
			hold: []sent{{token: "o/a1:org", pad: large}}, refused: sent{token: "o/a2:org", pad: large}, status: 429, budget: budgetTokenMemory,
			msg:    `the bodies of this token in flight hold its share of the memory for request bodies (3145728 bytes); retry later`,
			passes: &sent{token: "o/a2:x", pad: large}},
		{name: "token's share of the body memory, gzip bomb", cfg: Config{MaxBodyMemory: 64 * mib, MaxBodyMemoryPerApp: 32 * mib, MaxBodyMemoryPerToken: 3 * mib},
			refused: sent{token: "o/a1:org", pad: 15 * mib, gz: true}, status: 429, budget: budgetTokenMemory,
			msg:    `the bodies of this token in flight hold its share of the memory for request bodies (3145728 bytes); retry later`,
			passes: &sent{token: "o/a2:org", pad: 100 << 10, gz: true}},
		{name: "organization's share of the body memory", cfg: Config{MaxBodyMemory: 8 * mib, MaxBodyMemoryPerApp: 3 * mib, MaxBodyMemoryPerOrg: 3 * mib},
			hold: []sent{{token: "o/a1:x", pad: large}}, refused: sent{token: "o/a2:org", pad: large}, status: 429, budget: budgetOrgMemory,
			msg:    `the bodies of organization "o" in flight hold its share of the memory for request bodies (3145728 bytes); retry later`,
			passes: &sent{token: "p/a3:y", pad: large}},
		{name: "the body memory", cfg: Config{MaxBodyMemory: 6 * mib, MaxBodyMemoryPerApp: 3 * mib},
			hold: []sent{{token: "a1:x", pad: large}, {token: "a2:y", pad: large}}, refused: sent{token: "a3:z", pad: large}, status: 503, budget: budgetMemory,
			msg:    "the server is at capacity (memory for request bodies); retry later",
			passes: &sent{token: "a3:z", pad: 1000}},
		{name: "the minimum upload rate", cfg: Config{MinUploadRate: 1000, MinUploadGrace: 300 * time.Millisecond},
			refused: slow, stall: true, status: 408, budget: budgetUploadRate,
			inMsg: []string{fmt.Sprintf("the body arrived too slowly: %d bytes in ", len(slow.body("GO"))),
				"; after the first 300ms a body must arrive at 1000 bytes a second or faster"},
			// 300 ms, and more than half a second for the body's bytes.
			took:   [2]time.Duration{800 * time.Millisecond, 5 * time.Second},
			passes: &sent{token: "a1:x"}},
		{name: "the read timeout", cfg: Config{MinUploadRate: -1}, server: func(s *http.Server) { s.ReadTimeout = time.Second },
			refused: slow, stall: true, status: 408, budget: budgetReadTimeout,
			msg:  "the body did not arrive within the server's read timeout",
			took: [2]time.Duration{time.Second, 6 * time.Second}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pub := &gatePublisher{entered: make(chan struct{}), release: make(chan struct{})}
			h, m := newTestHandler(pub, tc.cfg)
			srv := httptest.NewUnstartedServer(h)
			if tc.server != nil {
				tc.server(srv.Config)
			}
			srv.Start()
			defer srv.Close()
			addr := srv.Listener.Addr().String()
			var held sync.WaitGroup
			for _, s := range tc.hold {
				held.Go(func() {
					body := s.body("HOLD")
					if resp, raw := exchangeRaw(t, addr, s.token, body, s.gz, len(body)); resp.StatusCode != 200 {
						t.Errorf("held request %s: %d %s", s.token, resp.StatusCode, raw)
					}
				})
				<-pub.entered
			}
			body := tc.refused.body("GO")
			length := len(body)
			if tc.stall {
				length += 100_000 // announced, never sent
			}
			start := time.Now()
			resp, raw := exchangeRaw(t, addr, tc.refused.token, body, tc.refused.gz, length)
			took := time.Since(start)
			var eb httpserve.ErrorBody
			if err := json.Unmarshal(raw, &eb); err != nil {
				t.Fatalf("answer %d %s: %v", resp.StatusCode, raw, err)
			}
			if resp.StatusCode != tc.status || eb.HTTPStatus != tc.status {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tc.status, raw)
			}
			if tc.msg != "" && eb.Message != tc.msg {
				t.Errorf("message %q, want %q", eb.Message, tc.msg)
			}
			for _, s := range tc.inMsg {
				if !strings.Contains(eb.Message, s) {
					t.Errorf("message %q lacks %q", eb.Message, s)
				}
			}
			if wantRetry := map[bool]string{true: "1", false: ""}[tc.status != 408]; resp.Header.Get("Retry-After") != wantRetry {
				t.Errorf("Retry-After %q, want %q", resp.Header.Get("Retry-After"), wantRetry)
			}
			if !resp.Close {
				t.Error("the connection is kept open after the refusal, with a body unread")
			}
			if tc.took[1] > 0 && (took < tc.took[0] || took > tc.took[1]) {
				t.Errorf("answered after %s, want %s to %s", took, tc.took[0], tc.took[1])
			}
			for _, b := range budgets() {
				want := map[bool]float64{true: 1, false: 0}[b == tc.budget]
				if got := testutil.ToFloat64(m.refusals.WithLabelValues(b)); got != want {
					t.Errorf("refusals for %s: %v, want %v", b, got, want)
				}
			}
			if tc.passes != nil {
				body := tc.passes.body("GO")
				if resp, raw := exchangeRaw(t, addr, tc.passes.token, body, tc.passes.gz, len(body)); resp.StatusCode != 200 {
					t.Errorf("request that fits beside the held ones: %d %s", resp.StatusCode, raw)
				}
			}
			close(pub.release)
			held.Wait()
			if requests, apps, tokens, free := h.admission.inUse(); requests != 0 || apps != 0 || tokens != 0 || free != h.admission.Shares().Memory {
				t.Errorf("after every request: %d requests of %d apps and %d tokens, %d of %d bytes free",
					requests, apps, tokens, free, h.admission.Shares().Memory)
			}
		})
	}
}
