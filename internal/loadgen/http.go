package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// HTTPConfig configures RunHTTP.
type HTTPConfig struct {
	// URL is the full events endpoint, e.g. http://127.0.0.1:8081/cms/app/events.
	URL   string
	Token string
	// Bodies are sent in turn; each holds EventsPerBody events.
	Bodies        [][]byte
	EventsPerBody int
	// Concurrency is the number of workers: in a closed loop each sends
	// its next request as soon as the last one is answered; in an open
	// loop it bounds the requests outstanding at once.
	Concurrency int
	Duration    time.Duration
	// Rate, in requests per second, selects the open loop; 0 is a closed
	// loop.
	Rate float64
	// Timeout bounds one request; zero means 30 s.
	Timeout time.Duration
	// Client is reused across runs so connections stay warm; nil makes one
	// sized for Concurrency.
	Client *http.Client
	// GetURLs, when set, makes a read run instead: GET requests to these
	// URLs in turn, a 200 counting as success. URL and Bodies are unused.
	GetURLs []string
}

// Report is the outcome of one load run.
type Report struct {
	// Mode is closed, open or ceiling.
	Mode        string  `json:"mode"`
	Concurrency int     `json:"concurrency"`
	TargetRate  float64 `json:"target_requests_per_sec,omitempty"`
	// Elapsed runs from the first request's start to the last one's end.
	Elapsed time.Duration `json:"elapsed_ns"`
	// Requests counts finished attempts: HTTP requests, or WriteMessages
	// calls for the ceiling.
	Requests int64 `json:"requests"`
	OK       int64 `json:"ok"`
	Failed   int64 `json:"failed"`
	// Outcomes counts attempts by HTTP status code, or by error text.
	Outcomes map[string]int64 `json:"outcomes"`
	// Missed counts open-loop requests scheduled inside the window that
	// had not started shortly after it closed, because every worker was
	// busy.
	Missed int64 `json:"missed,omitempty"`
	// MaxStartLag is how far behind schedule the latest open-loop request
	// started; a large lag means the outstanding bound was reached.
	MaxStartLag time.Duration `json:"max_start_lag_ns,omitempty"`
	// Events is EventsPerBody times OK.
	Events int64 `json:"events"`
	// RejectedEvents sums the "rejected" counts of successful answers; the
	// generated events are valid, so anything here is a problem.
	RejectedEvents int64   `json:"rejected_events"`
	EventsPerSec   float64 `json:"events_per_sec"`
	// Latency is measured per attempt; in the open loop from the scheduled
	// start, so time spent waiting for a free worker counts.
	Latency Latency `json:"latency"`
}

// String is a one-line summary.
func (r *Report) String() string {
	s := fmt.Sprintf("%s c=%d: %.0f events/s, %d ok, %d failed, p50 %s p90 %s p99 %s max %s over %s",
		r.Mode, r.Concurrency, r.EventsPerSec, r.OK, r.Failed,
		ms(r.Latency.P50), ms(r.Latency.P90), ms(r.Latency.P99), ms(r.Latency.Max), r.Elapsed.Round(time.Millisecond))
	if r.Mode == "open" {
		s += fmt.Sprintf(", target %.0f req/s, missed %d, max start lag %s", r.TargetRate, r.Missed, ms(r.MaxStartLag))
	}
	if r.Failed > 0 {
		s += fmt.Sprintf(", outcomes %v", r.Outcomes)
	}
	if r.RejectedEvents > 0 {
		s += fmt.Sprintf(", %d events rejected", r.RejectedEvents)
	}
	return s
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + "ms"
}

// NewClient returns an HTTP/1.1 client that keeps a connection per worker.
func NewClient(concurrency int) *http.Client {
	concurrency = max(concurrency, 1)
	return &http.Client{Transport: &http.Transport{
		// Proxy stays nil: the target is a loopback address.
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        2 * concurrency,
		MaxIdleConnsPerHost: concurrency,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		// Bodies are ~50 KB; a larger buffer means fewer write calls.
		WriteBufferSize: 64 << 10,
	}}
}

// tally is one worker's results, merged when the run ends so that workers
// share nothing while it goes.
type tally struct {
	lat      []time.Duration
	outcomes map[string]int64
	ok       int64
	failed   int64
	rejected int64
	missed   int64
	maxLag   time.Duration
	last     time.Time
}

func newTally() *tally { return &tally{outcomes: make(map[string]int64)} }

func (t *tally) record(start, end time.Time, outcome string, ok bool, rejected int) {
	t.lat = append(t.lat, end.Sub(start))
	t.outcomes[outcome]++
	if ok {
		t.ok++
	} else {
		t.failed++
	}
	t.rejected += int64(rejected)
	if end.After(t.last) {
		t.last = end
	}
}

func merge(mode string, conc int, start time.Time, eventsPer int, tallies []*tally) *Report {
	r := &Report{Mode: mode, Concurrency: conc, Outcomes: make(map[string]int64)}
	var lat []time.Duration
	last := start
	for _, t := range tallies {
		lat = append(lat, t.lat...)
		for k, v := range t.outcomes {
			r.Outcomes[k] += v
		}
		r.OK += t.ok
		r.Failed += t.failed
		r.RejectedEvents += t.rejected
		r.Missed += t.missed
		r.MaxStartLag = max(r.MaxStartLag, t.maxLag)
		if t.last.After(last) {
			last = t.last
		}
	}
	r.Requests = r.OK + r.Failed
	r.Elapsed = last.Sub(start)
	r.Events = int64(eventsPer) * r.OK
	if r.Elapsed > 0 {
		r.EventsPerSec = float64(r.Events) / r.Elapsed.Seconds()
	}
	r.Latency = Summarize(lat)
	return r
}

// RunHTTP sends the bodies to cfg.URL for cfg.Duration and reports what
// happened. Requests still in flight when the window closes are waited
// for; cancelling ctx stops the run early.
func RunHTTP(ctx context.Context, cfg HTTPConfig) (*Report, error) {
	if (len(cfg.GetURLs) == 0 && (cfg.URL == "" || len(cfg.Bodies) == 0)) || cfg.Concurrency <= 0 || cfg.Duration <= 0 {
		return nil, errors.New("load run needs a URL and bodies (or URLs to get), a positive concurrency and a positive duration")
	}
	if cfg.EventsPerBody <= 0 {
		cfg.EventsPerBody = DefaultBatch
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Client == nil {
		cfg.Client = NewClient(cfg.Concurrency)
	}
	if cfg.Rate < 0 {
		return nil, fmt.Errorf("rate %.3g requests/s is negative", cfg.Rate)
	}

	tallies := make([]*tally, cfg.Concurrency)
	for i := range tallies {
		tallies[i] = newTally()
	}
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(cfg.Duration)
	mode := "closed"
	if cfg.Rate > 0 {
		mode = "open"
		planned := plannedRequests(cfg.Rate, cfg.Duration)
		var next atomic.Int64
		for w := range cfg.Concurrency {
			wg.Go(func() { openWorker(ctx, &cfg, tallies[w], start, end, planned, &next) })
		}
	} else {
		for w := range cfg.Concurrency {
			wg.Go(func() { closedWorker(ctx, &cfg, tallies[w], w, end) })
		}
	}
	wg.Wait()
	r := merge(mode, cfg.Concurrency, start, cfg.EventsPerBody, tallies)
	r.TargetRate = cfg.Rate
	if err := ctx.Err(); err != nil {
		return r, fmt.Errorf("load run interrupted: %w", err)
	}
	return r, nil
}

func closedWorker(ctx context.Context, cfg *HTTPConfig, t *tally, w int, end time.Time) {
	// Workers start at different bodies so that concurrent requests
	// differ, as they would from many clients.
	for i := w; ctx.Err() == nil; i += cfg.Concurrency {
		begin := time.Now()
		if !begin.Before(end) {
			return
		}
		outcome, ok, rejected := send(ctx, cfg, i)
		t.record(begin, time.Now(), outcome, ok, rejected)
	}
}

func openWorker(ctx context.Context, cfg *HTTPConfig, t *tally, start, end time.Time, planned int64, next *atomic.Int64) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for ctx.Err() == nil {
		i := next.Add(1) - 1
		if i >= planned {
			return
		}
		at := start.Add(scheduleOffset(i, cfg.Rate))
		if wait := time.Until(at); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
		}
		now := time.Now()
		if !now.Before(end.Add(lateGrace(cfg.Duration))) {
			t.missed++
			continue
		}
		t.maxLag = max(t.maxLag, now.Sub(at))
		outcome, ok, rejected := send(ctx, cfg, int(i))
		// From the scheduled start, not the actual one: a request that
		// had to wait for a free worker was still delayed by the server.
		t.record(at, time.Now(), outcome, ok, rejected)
	}
}

// lateGrace is how long after the window closes a request scheduled
// inside it may still start: a timer that fires a little late at the end
// is not a backlog, but an open loop behind by seconds must not run on.
func lateGrace(d time.Duration) time.Duration {
	return min(d/10, time.Second)
}

// scheduleOffset is when request i of an open loop at rate requests/s
// starts, relative to the run's start.
func scheduleOffset(i int64, rate float64) time.Duration {
	return time.Duration(math.Round(float64(i) * float64(time.Second) / rate))
}

// plannedRequests is how many requests an open loop at rate schedules in
// d: those whose start falls inside [0, d).
func plannedRequests(rate float64, d time.Duration) int64 {
	n := int64(math.Ceil(rate * d.Seconds()))
	for n > 0 && scheduleOffset(n-1, rate) >= d {
		n--
	}
	return n
}

// ingestAnswer is the part of a 200 answer the generator checks.
type ingestAnswer struct {
	Accepted int `json:"accepted"`
	Rejected int `json:"rejected"`
}

// send makes request i of a run and classifies the outcome.
func send(ctx context.Context, cfg *HTTPConfig, i int) (outcome string, ok bool, rejected int) {
	if len(cfg.GetURLs) > 0 {
		return get(ctx, cfg, cfg.GetURLs[i%len(cfg.GetURLs)])
	}
	return put(ctx, cfg, cfg.Bodies[i%len(cfg.Bodies)])
}

// get fetches one URL; a 200 is a success.
func get(ctx context.Context, cfg *HTTPConfig, url string) (outcome string, ok bool, rejected int) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "error: " + err.Error(), false, 0
	}
	if cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.Token)
	}
	resp, err := cfg.Client.Do(req)
	if err != nil {
		return errorOutcome(err), false, 0
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return "error: read answer: " + errorOutcome(err), false, 0
	}
	return strconv.Itoa(resp.StatusCode), resp.StatusCode == http.StatusOK, 0
}

// put sends one body and classifies the outcome.
func put(ctx context.Context, cfg *HTTPConfig, body []byte) (outcome string, ok bool, rejected int) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, cfg.URL, bytes.NewReader(body))
	if err != nil {
		return "error: " + err.Error(), false, 0
	}
	req.Header.Set("Content-Type", "application/json")
	if cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.Token)
	}
	resp, err := cfg.Client.Do(req)
	if err != nil {
		return errorOutcome(err), false, 0
	}
	// Read to the end so that the connection is reused.
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	outcome = strconv.Itoa(resp.StatusCode)
	if err != nil {
		return "error: read answer: " + errorOutcome(err), false, 0
	}
	if resp.StatusCode != http.StatusOK {
		return outcome, false, 0
	}
	var a ingestAnswer
	if err := json.Unmarshal(data, &a); err != nil {
		return "200 with unreadable body", false, 0
	}
	return outcome, true, a.Rejected
}

// errorOutcome names an error briefly, so that outcomes group by cause
// rather than by connection.
func errorOutcome(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "error: timeout"
	case errors.Is(err, context.Canceled):
		return "error: canceled"
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return "error: " + op.Op + ": " + op.Err.Error()
	}
	s := err.Error()
	if len(s) > 80 {
		s = s[:80]
	}
	return "error: " + s
}

// FailedOutcomes returns a copy of r's outcome counts without the successes.
func (r *Report) FailedOutcomes() map[string]int64 {
	m := maps.Clone(r.Outcomes)
	delete(m, "200")
	delete(m, "ok")
	return m
}
