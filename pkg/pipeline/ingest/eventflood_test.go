package ingest_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/pipeline/ingest"
)

// tinyEvents is a gzip batch of n small valid events, whose session IDs
// repeat within gzip's window so that it compresses to a few kilobytes.
func tinyEvents(t *testing.T, n int) []byte {
	t.Helper()
	var raw bytes.Buffer
	raw.WriteString(`{"events":[`)
	for i := range n {
		if i > 0 {
			raw.WriteByte(',')
		}
		fmt.Fprintf(&raw, `{"type":"REQUEST","name":"L","sessionId":"s%d"}`, i%250)
	}
	raw.WriteString(`]}`)
	var z bytes.Buffer
	zw, err := gzip.NewWriterLevel(&z, gzip.BestCompression)
	must(t, err)
	_, err = zw.Write(raw.Bytes())
	must(t, err)
	must(t, zw.Close())
	return z.Bytes()
}

// sent is what the server answered one batch.
type sent struct {
	status         int
	message, retry string
	closed         bool
	took           time.Duration
}

// sendGzip PUTs a gzip body to path with token.
func sendGzip(c *http.Client, url, path, token string, body []byte) (sent, error) {
	req, err := http.NewRequest(http.MethodPut, url+path, bytes.NewReader(body))
	if err != nil {
		return sent{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Encoding", "gzip")
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return sent{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return sent{}, err
	}
	s := sent{status: resp.StatusCode, retry: resp.Header.Get("Retry-After"), closed: resp.Close, took: time.Since(start)}
	if s.status != http.StatusOK {
		var eb struct{ Message string }
		if err := json.Unmarshal(raw, &eb); err != nil {
			return s, fmt.Errorf("answer %d %q: %w", s.status, raw, err)
		}
		s.message = eb.Message
	}
	return s, nil
}

// heapPeak samples the heap's live and unswept objects until stopped and
// reports the most it saw. Ingest runs in this process, so this is its
// heap, with the test's own few megabytes.
type heapPeak struct {
	peak atomic.Uint64
	stop chan struct{}
	done chan struct{}
}

func watchHeap() *heapPeak {
	h := &heapPeak{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > h.peak.Load() {
				h.peak.Store(v)
			}
			select {
			case <-h.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return h
}

func (h *heapPeak) end() uint64 {
	close(h.stop)
	<-h.done
	return h.peak.Load()
}

// TestEventFloodRefused sends what a leaked runtime token can: batches of
// 100,000 tiny events, each a few tens of kilobytes of gzip, two at a
// time, over and over, while another organization's app sends its usual
// batches. Each flood batch is refused 413 naming MAX_EVENTS once its
// events pass the most a batch may hold, before the validator indexes it
// or builds a record, so the server's heap stays within an app's share of
// the body memory; the other app's batches keep answering 200 promptly,
// and only they are stored.
func TestEventFloodRefused(t *testing.T) {
	const (
		rounds = 6 // of each of the two senders
		// A victim's batch answers in milliseconds; seconds on this small
		// shared machine under the race detector.
		bound = 3 * time.Second
		// The most the heap may grow by: an app's default share of the
		// body memory. A flood batch accepted whole grows it by about
		// 150 MiB.
		heapBound = ingest.DefaultMaxBodyMemory / 4
	)
	b := startBroker(t, "")
	h := newHarness(t, b, harnessOpts{})
	flood := tinyEvents(t, 100_000)
	t.Logf("flood batch: 100000 events in %d bytes of gzip", len(flood))

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	heap := watchHeap()
	c := &http.Client{Transport: &http.Transport{}, Timeout: 40 * time.Second}
	defer c.CloseIdleConnections()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		answers []sent
		done    atomic.Bool
	)
	for range 2 {
		wg.Go(func() {
			for range rounds {
				s, err := sendGzip(c, h.url, "/cms/app/events", h.tokens["a1"], flood)
				if err != nil {
					t.Errorf("flood: %v", err)
					return
				}
				mu.Lock()
				answers = append(answers, s)
				mu.Unlock()
			}
		})
	}
	go func() { wg.Wait(); done.Store(true) }()
	// The victim sends for as long as the flood lasts, and at least six.
	victim := &http.Client{Transport: &http.Transport{}, Timeout: 40 * time.Second}
	defer victim.CloseIdleConnections()
	var ok, stored int
	var slowest time.Duration
	var refused []string
	for i := 0; i < 6 || !done.Load(); i++ {
		status, _, err := sendBatchTimed(victim, h.url, h.tokens["b1"], eventsBody(launch(fmt.Sprintf("victim-%d", i))), &slowest, bound)
		switch {
		case err != nil:
			refused = append(refused, err.Error())
		case status != http.StatusOK:
			refused = append(refused, "status "+strconv.Itoa(status))
		default:
			ok++
			stored++
		}
	}
	wg.Wait()
	peak := heap.end()
	grew := int64(peak) - int64(base.HeapAlloc)

	want := fmt.Sprintf("holds more than %d events; at most %d are allowed (MAX_EVENTS)", ingest.DefaultMaxEvents, ingest.DefaultMaxEvents)
	counts := map[string]int{}
	var slowestFlood time.Duration
	for _, s := range answers {
		counts[strconv.Itoa(s.status)+" "+s.message]++
		slowestFlood = max(slowestFlood, s.took)
		if s.status != http.StatusRequestEntityTooLarge || s.message != want || !s.closed {
			t.Errorf("flood batch answered %d (connection closed: %v): %q; want 413 %q and the connection closed", s.status, s.closed, s.message, want)
		}
	}
	t.Logf("flood: %d batches answered %v, the slowest in %s; victim: %d batches answered 200, the slowest in %s; heap peak %d MiB, %d MiB over the %d MiB before",
		len(answers), counts, slowestFlood.Round(time.Millisecond), ok, slowest.Round(time.Millisecond), peak>>20, grew>>20, base.HeapAlloc>>20)
	if len(answers) != 2*rounds {
		t.Errorf("%d flood batches answered, want %d", len(answers), 2*rounds)
	}
	if len(refused) > 0 {
		t.Errorf("beside the flood, %d of the other app's batches failed or took over %s: %s", len(refused), bound, strings.Join(refused, "; "))
	}
	if grew > heapBound {
		t.Errorf("the heap grew by %d MiB under the flood, more than an app's share of the body memory (%d MiB)", grew>>20, heapBound>>20)
	}
	checkStored(t, h, stored)
}

// sendBatchTimed is sendBatch, keeping the slowest answer and failing one
// slower than bound.
func sendBatchTimed(c *http.Client, url, token, body string, slowest *time.Duration, bound time.Duration) (int, string, error) {
	start := time.Now()
	status, retry, err := sendBatch(c, url, token, body)
	took := time.Since(start)
	*slowest = max(*slowest, took)
	if err == nil && took > bound {
		err = fmt.Errorf("answered %d after %s", status, took.Round(time.Millisecond))
	}
	return status, retry, err
}

// TestEventRateLimits floods ingest with batches within the most events a
// batch may hold, from two senders at once, through one token, through
// two tokens of one app and through two apps of one organization, with
// only that limit set low. The limit admits its burst and then its rate:
// the flood's batches past it get 429 naming the limit and its variables
// with Retry-After, none of their events is stored, and another
// organization's batches are answered 200 throughout.
func TestEventRateLimits(t *testing.T) {
	const (
		perBatch = 2_000
		rate     = 4_000 // events a second: two batches
		burst    = 3 * perBatch
		window   = 2 * time.Second
	)
	b := startBroker(t, "")
	// Senders are a token and the path it sends to.
	type sender struct{ token, path string }
	cases := []struct {
		name    string
		set     func(c *ingest.Config)
		senders []sender
		msg     string
	}{
		{"one token", func(c *ingest.Config) {
			c.EventRatePerToken, c.EventBurstPerToken = rate, burst
		}, []sender{{"a1", "/cms/app/events"}, {"a1", "/cms/app/events"}},
			`this token past its event rate limit of 4000 events a second with bursts of 6000 (EVENT_RATE_PER_TOKEN, EVENT_BURST_PER_TOKEN)`},
		{"one app, through its token and its organization's", func(c *ingest.Config) {
			c.EventRatePerApp, c.EventBurstPerApp = rate, burst
		}, []sender{{"a1", "/cms/app/events"}, {"orgA", "/cms/app/events?appId=app-a1"}},
			`app "app-a1" past its event rate limit of 4000 events a second with bursts of 6000 (EVENT_RATE_PER_APP, EVENT_BURST_PER_APP)`},
		{"one organization, through two apps", func(c *ingest.Config) {
			c.EventRatePerOrg, c.EventBurstPerOrg = rate, burst
		}, []sender{{"a1", "/cms/app/events"}, {"a2", "/cms/app/events"}},
			`organization "org-a" past its event rate limit of 4000 events a second with bursts of 6000 (EVENT_RATE_PER_ORG, EVENT_BURST_PER_ORG)`},
	}
	batch := tinyEvents(t, perBatch)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, b, harnessOpts{maxEvents: perBatch, tune: func(c *ingest.Config) {
				// Only the limit under test: the others off.
				c.EventRatePerToken, c.EventRatePerApp, c.EventRatePerOrg = -1, -1, -1
				tc.set(c)
			}})
			c := &http.Client{Transport: &http.Transport{}, Timeout: 40 * time.Second}
			defer c.CloseIdleConnections()
			var (
				wg                sync.WaitGroup
				accepted, limited atomic.Int64
			)
			start := time.Now()
			for _, s := range tc.senders {
				wg.Go(func() {
					for time.Since(start) < window {
						r, err := sendGzip(c, h.url, s.path, h.tokens[s.token], batch)
						switch {
						case err != nil:
							t.Errorf("flood: %v", err)
							return
						case r.status == http.StatusOK:
							accepted.Add(1)
						case r.status == http.StatusTooManyRequests && strings.Contains(r.message, tc.msg) &&
							strings.HasPrefix(r.message, "the batch's 2000 events would take ") && r.retry == "1":
							limited.Add(1)
						default:
							t.Errorf("flood batch answered %d, Retry-After %q: %q; want 200, or 429 naming %q with Retry-After 1", r.status, r.retry, r.message, tc.msg)
							return
						}
					}
				})
			}
			var victim victimRun
			for time.Since(start) < window {
				r := h.put("/cms/app/events", eventsBody(launch("victim")), h.bearer("b1")...)
				if r.status != http.StatusOK {
					victim.refused = append(victim.refused, r.raw)
					continue
				}
				victim.ok++
			}
			wg.Wait()
			took := time.Since(start)
			t.Logf("flood: %d batches of %d events answered 200, %d refused 429 in %s; victim: %d answered 200",
				accepted.Load(), perBatch, limited.Load(), took.Round(time.Millisecond), victim.ok)
			// A token bucket admits its burst, then its rate.
			most := (burst + rate*took.Seconds()) / perBatch
			if n := accepted.Load(); float64(n) > most || n < burst/perBatch {
				t.Errorf("%d batches of %d events accepted in %s; the limit admits %d to %.1f", n, perBatch, took, burst/perBatch, most)
			}
			if limited.Load() == 0 {
				t.Error("no flood batch was refused")
			}
			if len(victim.refused) > 0 || victim.ok == 0 {
				t.Errorf("another organization's batches: %d answered 200, refused: %v", victim.ok, victim.refused)
			}
			checkStored(t, h, int(accepted.Load())*perBatch+victim.ok)
		})
	}
}
