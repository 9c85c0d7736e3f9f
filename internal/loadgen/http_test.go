package loadgen

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

func TestScheduleOffset(t *testing.T) {
	cases := []struct {
		i    int64
		rate float64
		want time.Duration
	}{
		{0, 1000, 0},
		{1, 1000, time.Millisecond},
		{999, 1000, 999 * time.Millisecond},
		{1, 3, 333333333 * time.Nanosecond},
		{2, 3, 666666667 * time.Nanosecond},
		{3, 3, time.Second},
		{5, 0.5, 10 * time.Second},
		{750, 750, time.Second},
	}
	for _, tc := range cases {
		if got := scheduleOffset(tc.i, tc.rate); got != tc.want {
			t.Errorf("scheduleOffset(%d, %v) = %v, want %v", tc.i, tc.rate, got, tc.want)
		}
	}
}

func TestPlannedRequests(t *testing.T) {
	cases := []struct {
		rate float64
		d    time.Duration
		want int64
	}{
		{1000, time.Second, 1000},
		{3, time.Second, 3},
		{2.5, time.Second, 3}, // starts at 0, 0.4 s, 0.8 s
		{0.5, time.Second, 1},
		{0.5, 2 * time.Second, 1}, // the second start, at 2 s, is outside
		{750, 20 * time.Second, 15000},
		{100, 15 * time.Millisecond, 2},
	}
	for _, tc := range cases {
		got := plannedRequests(tc.rate, tc.d)
		if got != tc.want {
			t.Errorf("plannedRequests(%v, %v) = %d, want %d", tc.rate, tc.d, got, tc.want)
		}
		if got > 0 && scheduleOffset(got-1, tc.rate) >= tc.d {
			t.Errorf("rate %v: last planned start %v is not inside %v", tc.rate, scheduleOffset(got-1, tc.rate), tc.d)
		}
	}
}

// fakeIngest answers like the ingest service; every fifth request fails
// when flaky is set.
func fakeIngest(t *testing.T, delay time.Duration, flaky bool) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := n.Add(1)
		if r.Method != http.MethodPut || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(delay)
		if flaky && c%5 == 0 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, `{"accepted":50,"rejected":0,"errors":[]}`)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestRunHTTP(t *testing.T) {
	bodies := Bodies(BodyOptions{Count: 4})
	cases := []struct {
		name      string
		rate      float64
		conc      int
		delay     time.Duration
		flaky     bool
		wantReqs  [2]int64 // inclusive range
		wantFail  bool
		maxP50    time.Duration
		wantMode  string
		minMissed int64
	}{
		// Bounds are wide: the tests run beside others on two cores, so
		// they check the logic, not the speed.
		{"closed", 0, 4, 5 * time.Millisecond, false, [2]int64{10, 240}, false, time.Second, "closed", 0},
		{"closed with errors", 0, 2, 2 * time.Millisecond, true, [2]int64{5, 300}, true, time.Second, "closed", 0},
		{"open under capacity", 200, 8, 2 * time.Millisecond, false, [2]int64{20, 60}, false, time.Second, "open", 0},
		// One worker at 20 ms per request cannot keep 200 req/s: requests
		// start late and that lateness counts in their latency.
		{"open over capacity", 200, 1, 20 * time.Millisecond, false, [2]int64{1, 20}, false, 2 * time.Second, "open", 30},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := fakeIngest(t, tc.delay, tc.flaky)
			r, err := RunHTTP(context.Background(), HTTPConfig{
				URL: srv.URL, Token: "tok", Bodies: bodies, EventsPerBody: 50,
				Concurrency: tc.conc, Duration: 300 * time.Millisecond, Rate: tc.rate,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Log(r)
			if r.Mode != tc.wantMode || r.Requests < tc.wantReqs[0] || r.Requests > tc.wantReqs[1] {
				t.Errorf("mode %s, %d requests; want %s, %v", r.Mode, r.Requests, tc.wantMode, tc.wantReqs)
			}
			if (r.Failed > 0) != tc.wantFail || (tc.wantFail && r.Outcomes["503"] != r.Failed) {
				t.Errorf("failed %d outcomes %v", r.Failed, r.Outcomes)
			}
			if r.Events != 50*r.OK || r.Latency.Count != int(r.Requests) {
				t.Errorf("events %d for %d ok, %d latencies for %d requests", r.Events, r.OK, r.Latency.Count, r.Requests)
			}
			if r.Latency.P50 < tc.delay || r.Latency.P50 > tc.maxP50 {
				t.Errorf("p50 %v, want between %v and %v", r.Latency.P50, tc.delay, tc.maxP50)
			}
			if r.Missed < tc.minMissed {
				t.Errorf("missed %d, want at least %d", r.Missed, tc.minMissed)
			}
			if planned := plannedRequests(tc.rate, 300*time.Millisecond); tc.rate > 0 && r.Requests+r.Missed != planned {
				t.Errorf("%d sent + %d missed, want the %d planned", r.Requests, r.Missed, planned)
			}
		})
	}
}

func TestRunHTTPOpenLoopAvoidsCoordinatedOmission(t *testing.T) {
	// The server stalls its first requests for 100 ms each. A generator
	// that timed from the actual send would report most requests fast;
	// timed from the schedule, the backlog shows up.
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if served.Add(1) <= 4 {
			time.Sleep(100 * time.Millisecond)
		}
		_, _ = io.WriteString(w, `{"accepted":50,"rejected":0}`)
	}))
	defer srv.Close()
	r, err := RunHTTP(context.Background(), HTTPConfig{
		URL: srv.URL, Bodies: Bodies(BodyOptions{Count: 2}), Concurrency: 2,
		Duration: 400 * time.Millisecond, Rate: 100,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(r)
	if r.Latency.P90 < 50*time.Millisecond {
		t.Errorf("p90 %v hides the stall", r.Latency.P90)
	}
	if r.MaxStartLag < 50*time.Millisecond {
		t.Errorf("max start lag %v, want the backlog visible", r.MaxStartLag)
	}
}

func TestRunHTTPRejectsBadConfig(t *testing.T) {
	cases := []HTTPConfig{
		{},
		{URL: "http://127.0.0.1:1", Bodies: [][]byte{{}}, Concurrency: 1},
		{URL: "http://127.0.0.1:1", Bodies: [][]byte{{}}, Concurrency: 1, Duration: time.Second, Rate: -1},
	}
	for i, c := range cases {
		if _, err := RunHTTP(context.Background(), c); err == nil {
			t.Errorf("config %d: no error", i)
		}
	}
}

func TestLateGrace(t *testing.T) {
	cases := []struct{ d, want time.Duration }{
		{300 * time.Millisecond, 30 * time.Millisecond},
		{5 * time.Second, 500 * time.Millisecond},
		{20 * time.Second, time.Second},
		{time.Hour, time.Second},
	}
	for _, tc := range cases {
		if got := lateGrace(tc.d); got != tc.want {
			t.Errorf("lateGrace(%v) = %v, want %v", tc.d, got, tc.want)
		}
	}
}

func TestRunHTTPGet(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Method != http.MethodGet || r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if r.URL.Path == "/missing" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()
	r, err := RunHTTP(t.Context(), HTTPConfig{GetURLs: []string{srv.URL + "/a", srv.URL + "/missing"}, Token: "tok",
		Concurrency: 2, Duration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests == 0 || r.Requests != hits.Load() || r.Outcomes["200"] == 0 || r.Outcomes["404"] == 0 ||
		r.OK != r.Outcomes["200"] || r.Failed != r.Outcomes["404"] {
		t.Errorf("report %+v (server saw %d)", r, hits.Load())
	}
}
