package ingest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/pipeline/event"
)

// allowAll authenticates every request as app a1, with the token ID
// taken from the Authorization header ("t" without one); auth has its own
// tests.
type allowAll struct{}

func (allowAll) Authenticate(_ context.Context, h http.Header) (auth.Principal, error) {
	token := h.Get("Authorization")
	if token == "" {
		token = "t"
	}
	return auth.Principal{TokenID: token, OrganizationID: "o1", AppID: "a1", Scopes: content.RuntimeScopes}, nil
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

func (b *blockingPublisher) Publish(ctx context.Context, accepted, quarantined []event.Message) error {
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
	h, _ := newTestHandler(pub, Config{MaxInFlight: 2, MaxInFlightPerToken: 3})
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

func (g *gatePublisher) Publish(ctx context.Context, accepted, quarantined []event.Message) error {
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
	h, _ := newTestHandler(pub, Config{MaxInFlight: 4}) // a share of 2
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
		!strings.Contains(rec.Body.String(), "already has 2 requests in flight, its share of the server") {
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
	if _, tokens, _ := h.admission.inUse(); tokens != 0 {
		t.Errorf("%d tokens in flight after every request finished", tokens)
	}
}

// TestMemoryBudget holds a large body until the body memory budget is
// nearly spent: the next large body gets 503, a small one still passes,
// and the budget is whole again once the held request finishes.
func TestMemoryBudget(t *testing.T) {
	pub := &gatePublisher{entered: make(chan struct{}), release: make(chan struct{})}
	// A large body takes three times its size past the allowance: itself,
	// its envelopes and its records.
	const budget = 3 << 20
	h, _ := newTestHandler(pub, Config{MaxBodyMemory: budget})
	large := 900 << 10
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- putAs(h, "a", "HOLD", large) }()
	<-pub.entered
	rec := putAs(h, "b", "GO", large)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" ||
		!strings.Contains(rec.Body.String(), "memory for request bodies") {
		t.Errorf("second large body: %d %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if rec := putAs(h, "b", "GO", BodyAllowance-100); rec.Code != 200 {
		t.Errorf("body within the allowance: %d %s", rec.Code, rec.Body)
	}
	close(pub.release)
	if rec := <-done; rec.Code != 200 {
		t.Errorf("held request: %d %s", rec.Code, rec.Body)
	}
	if rec := putAs(h, "b", "GO", large); rec.Code != 200 {
		t.Errorf("large body after the budget came back: %d %s", rec.Code, rec.Body)
	}
	if _, _, free := h.admission.inUse(); free != budget {
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
	cases := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{}, true},
		{"a decompressed body the budget cannot hold", Config{MaxDecompressedBytes: 100 << 20}, false},
		{"a wire body the budget cannot hold", Config{MaxBodyBytes: 1 << 20, MaxDecompressedBytes: 1 << 20, MaxBodyMemory: 2 << 20}, false},
		{"just enough", Config{MaxBodyBytes: 1 << 20, MaxDecompressedBytes: 1 << 20, MaxBodyMemory: 3 * (1<<20 - BodyAllowance)}, true},
	}
	for _, c := range cases {
		if err := c.cfg.check(); (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
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
