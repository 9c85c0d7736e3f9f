package delivery

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// flakyIngest answers 503 to the first attempt of every third batch and
// 200 otherwise, and keeps the event IDs of the batches it answered 200.
type flakyIngest struct {
	mu       sync.Mutex
	attempts map[string]int
	stored   map[string]bool
	bad      []string
	// enough is closed once 30 batches have arrived.
	enough chan struct{}
	once   sync.Once
}

func (f *flakyIngest) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Events []map[string]any `json:"events"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || r.Header.Get("Authorization") != "Bearer tok" {
		f.mu.Lock()
		f.bad = append(f.bad, r.Header.Get("Idempotency-Key"))
		f.mu.Unlock()
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts[key]++
	if len(f.attempts) == 30 {
		f.once.Do(func() { close(f.enough) })
	}
	n, _ := strconv.Atoi(key[strings.LastIndexByte(key, '-')+1:])
	if n%3 == 0 && f.attempts[key] == 1 {
		w.Header().Set("Retry-After", "0")
		http.Error(w, "broker unavailable", http.StatusServiceUnavailable)
		return
	}
	for _, e := range body.Events {
		f.stored[e["eventId"].(string)] = true
	}
	_, _ = w.Write([]byte(`{"accepted":1}`))
}

func TestLoadRetriesUntilEveryBatchIsAcknowledged(t *testing.T) {
	f := &flakyIngest{attempts: map[string]int{}, stored: map[string]bool{}, enough: make(chan struct{})}
	srv := httptest.NewServer(f)
	defer srv.Close()

	l, err := Start(t.Context(), Config{URL: srv.URL, Token: "tok", EventsPerSecond: 2000, BatchSize: 10,
		Concurrency: 4, RunID: "unit-1", RetryBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-f.enough:
	case <-time.After(20 * time.Second):
		t.Fatal("30 batches did not arrive within 20 s")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	st, err := l.Stop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.bad) > 0 {
		t.Fatalf("ingest refused batches %v", f.bad)
	}
	if st.Batches < 30 || st.Acknowledged != st.Batches {
		t.Fatalf("batches %d, acknowledged %d", st.Batches, st.Acknowledged)
	}
	if st.Answers["503"] == 0 || st.Retries != st.Answers["503"] || st.Requests != st.Batches+st.Retries {
		t.Errorf("answers %v, retries %d, requests %d, batches %d", st.Answers, st.Retries, st.Requests, st.Batches)
	}
	if int64(st.Latency.Count) != st.Answers["200"] || st.Latency.Max <= 0 {
		t.Errorf("latency of %d answers, max %s; want one per 200 (%d)", st.Latency.Count, st.Latency.Max, st.Answers["200"])
	}
	if st.Failures() != st.Answers["503"] {
		t.Errorf("failures %d, 503s %d", st.Failures(), st.Answers["503"])
	}
	if int64(len(f.stored)) != st.AcknowledgedEvents || st.AcknowledgedEvents != st.Batches*10 {
		t.Errorf("stored %d events, acknowledged %d", len(f.stored), st.AcknowledgedEvents)
	}
	for id := range f.stored {
		if n, k, ok := parseEventID("unit-1", id); !ok || n >= int(st.Batches) || k >= 10 {
			t.Errorf("stored ID %q is not one of the run's", id)
		}
	}
	// A retried batch is sent as the same bytes: same IDs, same times.
	if a, b := l.body(7, time.Unix(0, 0)), l.body(7, time.Unix(0, 0)); string(a) != string(b) {
		t.Error("the same batch made twice differs")
	}
}

func TestEventIDRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		run  string
		n, k int
	}{{"r", 0, 0}, {"soak-2026-11-22", 123456, 49}, {"a.b-c", 7, 3}} {
		n, k, ok := parseEventID(tc.run, eventID(tc.run, tc.n, tc.k))
		if !ok || n != tc.n || k != tc.k {
			t.Errorf("%q %d %d: got %d %d %v", tc.run, tc.n, tc.k, n, k, ok)
		}
	}
	for _, id := range []string{"other-1-2", "r-1", "r-x-2", "r--1-2", "r-1-2-3"} {
		if _, _, ok := parseEventID("r", id); ok {
			t.Errorf("%q parsed as an ID of run r", id)
		}
	}
}

func TestStartRefusesRunIDsThatMatchOtherRuns(t *testing.T) {
	for _, id := range []string{"", "a_b", "50%", "a b"} {
		if _, err := Start(t.Context(), Config{URL: "http://127.0.0.1:1", RunID: id, EventsPerSecond: 1}); err == nil {
			t.Errorf("RunID %q accepted", id)
		}
	}
}
