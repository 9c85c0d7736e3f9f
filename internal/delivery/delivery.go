// Package delivery sends a steady load of events through ingest the way an
// assistant runtime does, remembers which events were acknowledged, sends
// every batch that was not acknowledged again (same event IDs, same
// Idempotency-Key) until it is, and afterwards checks ClickHouse: every
// acknowledged event must be there exactly once after deduplication. The
// soak command and the fault tests use it to show that nothing acknowledged
// is lost and that retries leave no duplicates for analysts.
package delivery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/assistantcms/cms/internal/loadgen"
)

// Config shapes a load.
type Config struct {
	// URL is the events endpoint, e.g. http://127.0.0.1:8000/cms/app/events.
	URL   string
	Token string
	// EventsPerSecond is the target rate; batches are scheduled evenly and
	// sent late, never dropped, when every sender is busy.
	EventsPerSecond float64
	// BatchSize is the events per request; 0 means 50.
	BatchSize int
	// Concurrency bounds the requests in flight; 0 means 16.
	Concurrency int
	// RunID prefixes every event ID; it must differ between runs that
	// share a ClickHouse table. Letters, digits, '-' and '.' only.
	RunID string
	// RequestTimeout bounds one attempt; 0 means 15 s.
	RequestTimeout time.Duration
	// RetryBackoff is the pause before sending a failed batch again, unless
	// the answer's Retry-After asks for longer (capped at 5 s); 0 means
	// 200 ms.
	RetryBackoff time.Duration
	// Client sends the requests; nil makes one sized for Concurrency.
	Client *http.Client
}

func (c Config) withDefaults() Config {
	if c.BatchSize <= 0 {
		c.BatchSize = 50
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 16
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 15 * time.Second
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = 200 * time.Millisecond
	}
	if c.Client == nil {
		c.Client = loadgen.NewClient(c.Concurrency)
	}
	return c
}

// Stats describe a load so far.
type Stats struct {
	// Batches were scheduled; Acknowledged of them were answered 200.
	Batches, Acknowledged int64
	// AcknowledgedEvents is Acknowledged times the batch size.
	AcknowledgedEvents int64
	// Requests counts attempts, Retries those that repeated a batch.
	Requests, Retries int64
	// InFlight is the attempts sent and not yet answered.
	InFlight int64
	// Answers counts attempts by HTTP status, or "error" when no answer
	// came (refused connection, timeout, reset).
	Answers map[string]int64
	// LastFailure and LastSuccess are when the latest attempt of each kind
	// ended; zero when there was none.
	LastFailure, LastSuccess time.Time
	// LongestWait is the longest time from a batch's first attempt to its
	// acknowledgement.
	LongestWait time.Duration
	// Latency of the attempts answered 200; filled in by Stop only, since
	// it sorts every sample and Stats is polled.
	Latency loadgen.Latency
	Elapsed time.Duration
}

// Failures is the number of attempts not answered 200.
func (s Stats) Failures() int64 {
	var n int64
	for k, v := range s.Answers {
		if k != "200" {
			n += v
		}
	}
	return n
}

// Load is a running load; Stop ends it.
type Load struct {
	cfg     Config
	start   time.Time
	cancel  context.CancelFunc
	stopped chan struct{} // closed by Stop: schedule no more batches
	wg      sync.WaitGroup

	batches, acknowledged, requests, retries, inFlight atomic.Int64

	mu          sync.Mutex
	acked       []bool // by batch number
	answers     map[string]int64
	lastFailure time.Time
	lastSuccess time.Time
	longestWait time.Duration
	latencies   []time.Duration
}

// Start begins sending; the load runs until Stop or ctx ends.
func Start(ctx context.Context, cfg Config) (*Load, error) {
	cfg = cfg.withDefaults()
	if cfg.URL == "" || cfg.RunID == "" || cfg.EventsPerSecond <= 0 {
		return nil, errors.New("delivery: URL, RunID and a positive EventsPerSecond are required")
	}
	for _, r := range cfg.RunID {
		// The check finds the run's rows with LIKE, where _ and % match
		// other runs' IDs.
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return nil, fmt.Errorf("delivery: RunID %q may hold only letters, digits, '-' and '.'", cfg.RunID)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	l := &Load{cfg: cfg, start: time.Now(), cancel: cancel, stopped: make(chan struct{}), answers: map[string]int64{}}
	due := make(chan int)
	l.wg.Add(1 + cfg.Concurrency)
	go func() {
		defer l.wg.Done()
		defer close(due)
		l.schedule(ctx, due)
	}()
	for range cfg.Concurrency {
		go func() {
			defer l.wg.Done()
			for n := range due {
				l.deliver(ctx, n)
			}
		}()
	}
	return l, nil
}

// schedule hands out batch numbers at the target rate until Stop.
func (l *Load) schedule(ctx context.Context, due chan<- int) {
	every := time.Duration(float64(time.Second) * float64(l.cfg.BatchSize) / l.cfg.EventsPerSecond)
	for n := 0; ; n++ {
		if wait := time.Until(l.start.Add(time.Duration(n) * every)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-l.stopped:
				t.Stop()
				return
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
		l.mu.Lock()
		l.acked = append(l.acked, false)
		l.mu.Unlock()
		l.batches.Add(1)
		select {
		case due <- n:
		case <-l.stopped:
			// Scheduled but never sent: count it as sent by nobody.
			l.mu.Lock()
			l.acked = l.acked[:n]
			l.mu.Unlock()
			l.batches.Add(-1)
			return
		case <-ctx.Done():
			return
		}
	}
}

// deliver sends batch n until it is answered 200 or ctx ends.
func (l *Load) deliver(ctx context.Context, n int) {
	body := l.body(n, time.Now())
	first := time.Now()
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			l.retries.Add(1)
		}
		status, retryAfter, took := l.send(ctx, n, body)
		now := time.Now()
		l.requests.Add(1)
		l.mu.Lock()
		l.answers[status]++
		if status == "200" {
			l.acked[n] = true
			l.lastSuccess = now
			l.latencies = append(l.latencies, took)
			l.longestWait = max(l.longestWait, now.Sub(first))
		} else {
			l.lastFailure = now
		}
		l.mu.Unlock()
		if status == "200" {
			l.acknowledged.Add(1)
			return
		}
		pause := max(l.cfg.RetryBackoff, min(retryAfter, 5*time.Second))
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// send makes one attempt and returns its status ("error" without an
// answer), the Retry-After it asked for and how long it took.
func (l *Load) send(ctx context.Context, n int, body []byte) (string, time.Duration, time.Duration) {
	rctx, cancel := context.WithTimeout(ctx, l.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPut, l.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return "error", 0, 0
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+l.cfg.Token)
	req.Header.Set("Idempotency-Key", l.cfg.RunID+"-"+strconv.Itoa(n))
	start := time.Now()
	l.inFlight.Add(1)
	defer l.inFlight.Add(-1)
	resp, err := l.cfg.Client.Do(req)
	if err != nil {
		return "error", 0, time.Since(start)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	var retryAfter time.Duration
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		retryAfter = time.Duration(s) * time.Second
	}
	return strconv.Itoa(resp.StatusCode), retryAfter, time.Since(start)
}

// Stats reports the load so far, without Latency.
func (l *Load) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	answers := maps.Clone(l.answers)
	acked := l.acknowledged.Load()
	return Stats{
		Batches: l.batches.Load(), Acknowledged: acked, AcknowledgedEvents: acked * int64(l.cfg.BatchSize),
		Requests: l.requests.Load(), Retries: l.retries.Load(), InFlight: l.inFlight.Load(), Answers: answers,
		LastFailure: l.lastFailure, LastSuccess: l.lastSuccess, LongestWait: l.longestWait,
		Elapsed: time.Since(l.start),
	}
}

// Stop schedules no more batches and waits until every batch scheduled has
// been acknowledged, or ctx ends; then the load is over either way. The
// error says how many batches were left unacknowledged.
func (l *Load) Stop(ctx context.Context) (Stats, error) {
	close(l.stopped)
	done := make(chan struct{})
	go func() {
		l.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		l.cancel()
		<-done
		err = fmt.Errorf("stop the load: %w", ctx.Err())
	}
	l.cancel()
	st := l.Stats()
	l.mu.Lock()
	st.Latency = loadgen.Summarize(l.latencies) // no sender is left to append
	l.mu.Unlock()
	if left := st.Batches - st.Acknowledged; left > 0 && err != nil {
		err = fmt.Errorf("%d of %d batches were never acknowledged: %w", left, st.Batches, err)
	}
	return st, err
}
