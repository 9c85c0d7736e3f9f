package contentapi

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/auth"
)

// floodTally counts a flood's answers.
type floodTally struct {
	mu       sync.Mutex
	byStatus map[int]int
	problems []string
}

func (f *floodTally) add(status int, problem string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byStatus[status]++
	if problem != "" && len(f.problems) < 5 {
		f.problems = append(f.problems, problem)
	}
}

func (f *floodTally) snapshot() (map[int]int, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[int]int{}
	for k, v := range f.byStatus {
		out[k] = v
	}
	return out, append([]string(nil), f.problems...)
}

// TestRateLimitUnderConcurrentAbuse floods the API from several
// goroutines with one app's token (REST and GraphQL alike) and, beside
// it, with invalid tokens (one repeated, and fresh ones that each miss
// the token cache), while another app's token reads at a steady pace. The
// abuser is held to its budget with 429s carrying Retry-After; the steady
// reader gets no 429 and keeps its throughput, compared with the same
// reader without the flood in windows alternating with the flooded ones,
// so that load from elsewhere on the machine falls on both alike.
func TestRateLimitUnderConcurrentAbuse(t *testing.T) {
	const (
		rps, burst = 100, 50
		// The steady reader asks every 25 ms, 40 a second: within its
		// budget, and slow enough that a 2-core machine under the flood
		// can keep up if nothing shared holds it back.
		pace   = 25 * time.Millisecond
		window = 750 * time.Millisecond
		// A machine busy with other work can starve this process for a
		// while, which no server survives unharmed; the throughput is
		// measured again then. Every other check holds in every window.
		attempts = 3
		minRatio = 0.5
	)
	e := newIsolationEnv(t, ServiceConfig{RateLimitRPS: rps, RateLimitBurst: burst})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	send := func(ctx context.Context, method, path, token, body string) (int, http.Header, string, error) {
		req, err := http.NewRequestWithContext(ctx, method, e.srv.URL+path, strings.NewReader(body))
		if err != nil {
			return 0, nil, "", err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b), err
	}

	// steady reads with app-1's token every pace for one window, adding
	// the answers to statuses; it returns how many were right.
	steady := func(statuses map[int]int) int {
		tick := time.NewTicker(pace)
		defer tick.Stop()
		end := time.Now().Add(window)
		ok := 0
		for now := time.Now(); now.Before(end); now = <-tick.C {
			status, _, body, err := send(context.Background(), http.MethodGet, "/cms/handler/Welcome", e.tokens["app1"], "")
			if err != nil {
				t.Errorf("steady reader: %v", err)
				statuses[0]++
				continue
			}
			statuses[status]++
			if status == http.StatusOK && strings.Contains(body, markerApp1) {
				ok++
			}
		}
		return ok
	}

	// flooded runs the floods for one window of the steady reader.
	repeated, _, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	flooded := func(statuses map[int]int) (ok int, abuserGot, invalidGot map[int]int, took time.Duration) {
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		var floods sync.WaitGroup
		abuser := &floodTally{byStatus: map[int]int{}}
		invalid := &floodTally{byStatus: map[int]int{}}
		var limitedOnce sync.Once
		limited := make(chan struct{}) // closed at the abuser's first 429
		start := time.Now()
		for i := range 4 {
			floods.Go(func() {
				for n := 0; ctx.Err() == nil; n++ {
					method, path, body := http.MethodGet, "/cms/handler", ""
					if (i+n)%2 == 1 {
						method, path, body = http.MethodPost, "/cms/graphql", `{"query":"{ handlers { intentId } }"}`
					}
					status, h, answer, err := send(ctx, method, path, e.tokens["app2"], body)
					if err != nil {
						if ctx.Err() == nil {
							abuser.add(0, err.Error())
						}
						return
					}
					problem := ""
					if status == http.StatusTooManyRequests {
						limitedOnce.Do(func() { close(limited) })
						if s, err := strconv.Atoi(h.Get("Retry-After")); err != nil || s < 1 {
							problem = "429 with Retry-After " + strconv.Quote(h.Get("Retry-After"))
						}
						if !strings.Contains(answer, "Retry-After") && !strings.Contains(answer, "RATE_LIMITED") {
							problem = "429 without a clear message: " + answer
						}
					}
					if strings.Contains(answer, markerApp1) {
						problem = "the abuser was answered app-1's data"
					}
					abuser.add(status, problem)
				}
			})
		}
		for i := range 2 {
			floods.Go(func() {
				for ctx.Err() == nil {
					tok := repeated
					if i == 1 {
						// A new ID every time: each is a database lookup.
						fresh, _, err := auth.NewToken()
						if err != nil {
							invalid.add(0, err.Error())
							return
						}
						tok = fresh
					}
					status, _, _, err := send(ctx, http.MethodGet, "/cms/handler", tok, "")
					if err != nil {
						if ctx.Err() == nil {
							invalid.add(0, err.Error())
						}
						return
					}
					invalid.add(status, "")
				}
			})
		}
		select {
		case <-limited:
			ok = steady(statuses)
		case <-time.After(10 * time.Second):
			t.Errorf("the abuser got no 429 within 10s")
		}
		stop()
		floods.Wait()
		took = time.Since(start)
		abuserGot, abuserProblems := abuser.snapshot()
		invalidGot, invalidProblems := invalid.snapshot()
		for _, p := range append(abuserProblems, invalidProblems...) {
			t.Errorf("flood: %s", p)
		}
		return ok, abuserGot, invalidGot, took
	}

	for attempt := 1; ; attempt++ {
		alone, abused := map[int]int{}, map[int]int{}
		var aloneOK, abusedOK int
		for range 2 {
			aloneOK += steady(alone)
			ok, abuserGot, invalidGot, took := flooded(abused)
			abusedOK += ok
			t.Logf("flood of %v: abuser %v, invalid tokens %v", took.Round(time.Millisecond), abuserGot, invalidGot)
			// The abuser's token gets its burst and its rate, not more;
			// everything else it sent is 429.
			if allowed := float64(burst) + rps*took.Seconds()*1.1 + 5; float64(abuserGot[http.StatusOK]) > allowed {
				t.Errorf("the abuser was answered %d times in %v; its budget allows about %.0f", abuserGot[http.StatusOK], took, allowed)
			}
			if abuserGot[http.StatusTooManyRequests] == 0 || len(abuserGot) != 2 {
				t.Errorf("abuser answers %v: want 200s within the budget and 429s for the rest", abuserGot)
			}
			if len(invalidGot) != 1 || invalidGot[http.StatusUnauthorized] == 0 {
				t.Errorf("invalid tokens were answered %v, want only 401", invalidGot)
			}
		}
		for name, got := range map[string]map[int]int{"alone": alone, "under the flood": abused} {
			if len(got) != 1 || got[http.StatusOK] == 0 {
				t.Errorf("steady reader %s: answers %v, want only 200", name, got)
			}
		}
		if t.Failed() {
			return
		}
		ratio := float64(abusedOK) / float64(aloneOK)
		t.Logf("attempt %d: steady reader %d answers alone, %d under the flood in as many windows of %v: throughput ratio %.2f",
			attempt, aloneOK, abusedOK, window, ratio)
		if ratio >= minRatio {
			return
		}
		if attempt == attempts {
			t.Errorf("the steady reader kept %.0f%% of its throughput under the flood (%d answers against %d alone); want at least %.0f%%",
				100*ratio, abusedOK, aloneOK, 100*minRatio)
			return
		}
	}
}
