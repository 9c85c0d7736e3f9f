// Package demotraffic sends realistic runtime traffic to a running stack:
// conversations of a LAUNCH_REQUEST and REQUEST_RESPONSE turns drawn from
// an app's own intents and FAQs, one batch per turn as assistant runtimes
// send them, so that ClickHouse, suggestions and dashboards fill up.
package demotraffic

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/assistantcms/cms/internal/loadgen"
	"github.com/assistantcms/cms/pkg/content"
)

// Turn is one thing a user says and what the assistant answers.
type Turn struct {
	Intent, Query, Answer string
}

var slotRef = regexp.MustCompile(`\$?\{[^}]*\}`)

// slotValues fill slot references in utterance patterns.
func slotValues() []string {
	return []string{"saturday", "riverside", "a gravel bike", "size 54", "12345", "tomorrow", "the blue one"}
}

// TurnsFrom draws turns from appID's content in b: each intent's
// utterance patterns with slot references filled in, answered by the
// intent's handler name, and each FAQ question with its answer.
func TurnsFrom(b *content.Bundle, appID string) ([]Turn, error) {
	var out []Turn
	values := slotValues()
	for _, r := range b.Records {
		if r.AppID != appID {
			continue
		}
		var f struct {
			Name              string   `json:"name"`
			UtterancePatterns []string `json:"utterancePatterns"`
			Questions         []string `json:"questions"`
			Answer            string   `json:"answer"`
		}
		switch r.Kind {
		case content.KindIntent, content.KindFAQ:
			if err := json.Unmarshal(r.Doc, &f); err != nil {
				return nil, fmt.Errorf("%s %q: %w", r.Kind, r.ID, err)
			}
		default:
			continue
		}
		for i, p := range f.UtterancePatterns {
			q := slotRef.ReplaceAllStringFunc(p, func(string) string { return values[i%len(values)] })
			out = append(out, Turn{Intent: r.ID, Query: strings.Join(strings.Fields(q), " "), Answer: "Here is what I found about " + strings.ToLower(f.Name) + "."})
		}
		for _, q := range f.Questions {
			out = append(out, Turn{Intent: "KnowledgeBase", Query: q, Answer: f.Answer})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("app %q has no intents with utterance patterns and no FAQs to talk about", appID)
	}
	return out, nil
}

// Config is what Run sends and how fast.
type Config struct {
	// URL is the events endpoint, e.g. http://127.0.0.1:18000/cms/app/events.
	URL   string
	Token string
	Turns []Turn
	// Channels are the channel IDs sessions come from.
	Channels []string
	// SessionsPerSecond is how many conversations start each second.
	SessionsPerSecond float64
	// TurnsPerSession is the most turns after the launch (at least one).
	TurnsPerSession int
	// TurnGap is the mean pause between a session's turns.
	TurnGap time.Duration
	// Duration bounds the run; zero runs until ctx ends.
	Duration time.Duration
	// MaxSessions bounds the conversations open at once.
	MaxSessions int
	Seed        uint64
	Client      *http.Client
}

// Stats count what a run sent.
type Stats struct {
	Sessions, Requests, OK, Failed int64
	// Accepted and Quarantined are the events ingest answered for.
	Accepted, Quarantined int64
	// Failures counts failed requests by status code, or "error".
	Failures map[string]int64
	Latency  loadgen.Latency
	Elapsed  time.Duration
}

// run is one Run's shared state.
type run struct {
	cfg                            Config
	start                          time.Time
	sessions, requests, ok, failed atomic.Int64
	accepted, quarantined          atomic.Int64
	mu                             sync.Mutex
	failures                       map[string]int64
	latencies                      []time.Duration
}

func (r *run) stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := maps.Clone(r.failures)
	return Stats{Sessions: r.sessions.Load(), Requests: r.requests.Load(), Accepted: r.accepted.Load(), Quarantined: r.quarantined.Load(), OK: r.ok.Load(),
		Failed: r.failed.Load(), Failures: f, Latency: loadgen.Summarize(append([]time.Duration(nil), r.latencies...)),
		Elapsed: time.Since(r.start)}
}

// Run sends conversations until cfg.Duration has passed or ctx ends,
// calling progress (if not nil) twice a second, and waits for the
// conversations under way to finish their current request.
func Run(ctx context.Context, cfg Config, progress func(Stats)) (Stats, error) {
	if len(cfg.Turns) == 0 {
		return Stats{}, fmt.Errorf("no turns to send")
	}
	if cfg.SessionsPerSecond <= 0 {
		return Stats{}, fmt.Errorf("sessions per second must be positive, got %g", cfg.SessionsPerSecond)
	}
	if len(cfg.Channels) == 0 {
		cfg.Channels = []string{"web"}
	}
	if cfg.TurnsPerSession <= 0 {
		cfg.TurnsPerSession = 5
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = 256
	}
	if cfg.Client == nil {
		// An own transport, closed at the end: connections it dialed and
		// never used would otherwise hold up the server's graceful
		// shutdown for seconds.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = cfg.MaxSessions
		defer tr.CloseIdleConnections()
		cfg.Client = &http.Client{Timeout: 30 * time.Second, Transport: tr}
	}
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	r := &run{cfg: cfg, start: time.Now(), failures: map[string]int64{}}
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed+1))
	slots := make(chan struct{}, cfg.MaxSessions)
	var wg sync.WaitGroup
	every := time.Duration(float64(time.Second) / cfg.SessionsPerSecond)
	next := time.NewTicker(every)
	defer next.Stop()
	report := time.NewTicker(500 * time.Millisecond)
	defer report.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			wg.Wait()
			s := r.stats()
			if progress != nil {
				progress(s)
			}
			return s, nil
		case <-report.C:
			if progress != nil {
				progress(r.stats())
			}
		case <-next.C:
			select {
			case slots <- struct{}{}:
			default:
				continue // as many conversations open as allowed
			}
			// Each session draws from its own generator: rng is not
			// safe for concurrent use.
			seed := rng.Uint64()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				r.session(ctx, n, seed)
			}()
		}
	}
}

// session sends one conversation: a launch, then turns with pauses.
func (r *run) session(ctx context.Context, n int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	r.sessions.Add(1)
	s := sessionInfo{
		id:      fmt.Sprintf("demo-%d-%08x", n, rng.Uint32()),
		user:    fmt.Sprintf("user-%04d", rng.IntN(2000)),
		channel: r.cfg.Channels[rng.IntN(len(r.cfg.Channels))],
	}
	if !r.send(ctx, launchEvent(s, time.Now())) {
		return
	}
	turns := 1 + rng.IntN(r.cfg.TurnsPerSession)
	for range turns {
		if gap := r.cfg.TurnGap; gap > 0 {
			pause := time.NewTimer(gap/2 + time.Duration(rng.Int64N(int64(gap))))
			select {
			case <-ctx.Done():
				pause.Stop()
				return
			case <-pause.C:
			}
		}
		t := r.cfg.Turns[rng.IntN(len(r.cfg.Turns))]
		if !r.send(ctx, turnEvent(s, t, 0.55+0.45*rng.Float64(), time.Now())) {
			return
		}
	}
}

type sessionInfo struct{ id, user, channel string }

func launchEvent(s sessionInfo, at time.Time) map[string]any {
	return map[string]any{
		"type": "REQUEST", "name": "LAUNCH_REQUEST", "sessionId": s.id, "userId": s.user, "channel": s.channel,
		"platform": "stentor", "selectedHandler": "LaunchRequest", "currentHandler": "LaunchRequest",
		"environment": "production", "isNewSession": true, "isoTime": at.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
	}
}

func turnEvent(s sessionInfo, t Turn, confidence float64, at time.Time) map[string]any {
	return map[string]any{
		"type": "AnalyticsEvent", "name": "REQUEST_RESPONSE", "sessionId": s.id, "userId": s.user, "channel": s.channel,
		"platform": "stentor", "selectedHandler": t.Intent, "currentHandler": t.Intent, "environment": "production",
		"isoTime": at.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		"payload": map[string]any{
			"request": map[string]any{"type": "INTENT_REQUEST", "intentId": t.Intent, "rawQuery": t.Query,
				"sessionId": s.id, "userId": s.user, "matchConfidence": float64(int(confidence*1000)) / 1000},
			"response": map[string]any{"outputSpeech": map[string]any{"displayText": t.Answer, "ssml": "<speak>" + t.Answer + "</speak>"}},
		},
	}
}

// send PUTs one batch holding ev and counts the outcome; false stops the
// session.
func (r *run) send(ctx context.Context, ev map[string]any) bool {
	body, err := json.Marshal(map[string]any{"events": []any{ev}})
	if err != nil {
		r.fail("error")
		return false
	}
	// A request once sent is seen through, even when the run stops, so
	// that what ingest accepted is counted; the client's timeout bounds it.
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPut, r.cfg.URL, bytes.NewReader(body))
	if err != nil {
		r.fail("error")
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+r.cfg.Token)
	start := time.Now()
	resp, err := r.cfg.Client.Do(req)
	if err != nil {
		r.requests.Add(1)
		r.fail("error")
		return false
	}
	var answer struct {
		Accepted int `json:"accepted"`
		Rejected int `json:"rejected"`
	}
	decodeErr := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&answer)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	r.requests.Add(1)
	r.mu.Lock()
	r.latencies = append(r.latencies, time.Since(start))
	r.mu.Unlock()
	if resp.StatusCode != http.StatusOK {
		r.fail(strconv.Itoa(resp.StatusCode))
		return false
	}
	if decodeErr != nil {
		r.fail("unreadable answer")
		return false
	}
	r.ok.Add(1)
	r.accepted.Add(int64(answer.Accepted))
	r.quarantined.Add(int64(answer.Rejected))
	return true
}

func (r *run) fail(why string) {
	r.failed.Add(1)
	r.mu.Lock()
	r.failures[why]++
	r.mu.Unlock()
}
