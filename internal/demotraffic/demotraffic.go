// Package demotraffic sends realistic runtime traffic to a running stack:
// conversations of a launch and turns drawn from an app's own intents and
// FAQs, one batch per turn holding every event the reference client sends
// for it (the request, the request and response, the end of the turn),
// with fallback, knowledge-base, low-confidence and failed turns among
// them, so that ClickHouse, its rollups, suggestions and dashboards fill
// up. Stats count exactly what ingest accepted, by kind of turn, so that
// tests can hold the analysts' answers to them.
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
	chschema "github.com/assistantcms/cms/schemas/clickhouse"
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
	// Turns counts the turns whose batch ingest accepted whole, by how
	// they went; Turns.Sessions and Turns.Users those with an accepted
	// launch.
	Turns TurnStats
	// Failures counts failed requests by status code, or "error".
	Failures map[string]int64
	Latency  loadgen.Latency
	Elapsed  time.Duration
}

// TurnStats count accepted turns by how they went.
type TurnStats struct {
	// Sessions and Users are those whose launch was accepted.
	Sessions, Users int64
	// Answered, Fallback and Failed partition the turns: answered turns
	// matched an intent or were answered from the knowledge base,
	// fallback turns were not understood, failed turns raised an error
	// (and sent no REQUEST_RESPONSE).
	Answered, Fallback, Failed int64
	// KnowledgeBase and LowConfidence are answered turns that used the
	// knowledge base, and that matched an intent with a confidence
	// below LowConfidence.
	KnowledgeBase, LowConfidence int64
	// ByIntent counts matched turns per intent.
	ByIntent map[string]int64
	// Unanswered counts fallback and low-confidence questions by text.
	Unanswered map[string]int64
	// Outcomes counts sessions by how their last accepted turn went:
	// "answered", "fallback" or "error" (the sessions rollup's outcome).
	Outcomes map[string]int64
}

// unanswered counts a question as the unanswered_daily rollup keeps it:
// normalised, unless it looks like it holds personal data.
func (t *TurnStats) unanswered(q string) {
	if q = chschema.NormalizeQuery(q); !chschema.IsPrivate(q) {
		t.Unanswered[q]++
	}
}

// LowConfidence is the match confidence below which a turn counts as
// low-confidence in the analysts' rollups.
const LowConfidence = 0.5

// Shares of the turns after a launch that go each way, in percent.
const (
	fallbackPercent      = 10
	failedPercent        = 5
	lowConfidencePercent = 15 // of the intent turns
)

// unansweredQueries are what users say that no intent or FAQ answers.
func unansweredQueries() []string {
	return []string{"can i pay with crypto", "do you sell skateboards", "what is the meaning of life", "tell me a joke"}
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
	turns                          TurnStats
	users                          map[string]bool
}

func (r *run) stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := maps.Clone(r.failures)
	turns := r.turns
	turns.ByIntent, turns.Unanswered, turns.Outcomes = maps.Clone(r.turns.ByIntent), maps.Clone(r.turns.Unanswered), maps.Clone(r.turns.Outcomes)
	return Stats{Sessions: r.sessions.Load(), Requests: r.requests.Load(), Accepted: r.accepted.Load(), Quarantined: r.quarantined.Load(), OK: r.ok.Load(),
		Failed: r.failed.Load(), Failures: f, Latency: loadgen.Summarize(append([]time.Duration(nil), r.latencies...)),
		Elapsed: time.Since(r.start), Turns: turns}
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
	r := &run{cfg: cfg, start: time.Now(), failures: map[string]int64{}, users: map[string]bool{},
		turns: TurnStats{ByIntent: map[string]int64{}, Unanswered: map[string]int64{}, Outcomes: map[string]int64{}}}
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
	if !r.send(ctx, []any{launchEvent(s, time.Now())}, func(t *TurnStats) {
		t.Sessions++
		if !r.users[s.user] {
			r.users[s.user] = true
			t.Users++
		}
	}) {
		return
	}
	// The session's outcome is that of its last accepted turn.
	outcome := ""
	defer func() {
		if outcome != "" {
			r.mu.Lock()
			r.turns.Outcomes[outcome]++
			r.mu.Unlock()
		}
	}()
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
		d := r.drawTurn(rng)
		events, count := turnEvents(s, d, time.Now())
		if !r.send(ctx, events, count) {
			return
		}
		outcome = [...]string{answered: "answered", fallback: "fallback", failed: "error"}[d.kind]
	}
}

// turnKind is how a turn goes.
type turnKind int

const (
	answered turnKind = iota
	fallback
	failed
)

// drawnTurn is a turn as a session plays it.
type drawnTurn struct {
	Turn
	kind       turnKind
	confidence float64
}

// drawTurn picks the next turn and how it goes.
func (r *run) drawTurn(rng *rand.Rand) drawnTurn {
	d := drawnTurn{Turn: r.cfg.Turns[rng.IntN(len(r.cfg.Turns))], confidence: 0.55 + 0.45*rng.Float64()}
	switch p := rng.IntN(100); {
	case p < fallbackPercent:
		qs := unansweredQueries()
		d.Turn = Turn{Intent: "", Query: qs[rng.IntN(len(qs))], Answer: "Sorry, I did not get that."}
		d.kind, d.confidence = fallback, 0
	case p < fallbackPercent+failedPercent:
		d.kind = failed
	case d.Intent != knowledgeBaseIntent && rng.IntN(100) < lowConfidencePercent:
		d.confidence = 0.2 + 0.29*rng.Float64()
	}
	// As sent: three decimals.
	d.confidence = float64(int(d.confidence*1000)) / 1000
	return d
}

type sessionInfo struct{ id, user, channel string }

// knowledgeBaseIntent is the handler of turns answered from FAQs.
const knowledgeBaseIntent = "KnowledgeBase"

// fallbackHandler handles what no intent matched.
const fallbackHandler = "InputUnknown"

// base is what the reference client's event service puts on every event.
func base(s sessionInfo, typ, name, handler string, at time.Time) map[string]any {
	return map[string]any{
		"type": typ, "name": name, "sessionId": s.id, "userId": s.user, "channel": s.channel,
		"platform": "stentor", "selectedHandler": handler, "currentHandler": handler,
		"environment": "production", "isoTime": at.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
	}
}

func launchEvent(s sessionInfo, at time.Time) map[string]any {
	ev := base(s, "REQUEST", "LAUNCH_REQUEST", "LaunchRequest", at)
	ev["isNewSession"] = true
	return ev
}

// turnEvents are the events of one turn, in the order the reference
// client sends them, and what they count once accepted.
func turnEvents(s sessionInfo, d drawnTurn, at time.Time) ([]any, func(*TurnStats)) {
	requestType, handler := "INTENT_REQUEST", d.Intent
	request := map[string]any{"type": requestType, "intentId": d.Intent, "rawQuery": d.Query,
		"sessionId": s.id, "userId": s.user, "matchConfidence": d.confidence}
	switch {
	case d.kind == fallback:
		requestType, handler = "INPUT_UNKNOWN_REQUEST", fallbackHandler
		request = map[string]any{"type": requestType, "rawQuery": d.Query, "sessionId": s.id, "userId": s.user}
	case d.Intent == knowledgeBaseIntent:
		// What the runtime got from the FAQ query, as its request logs it.
		request["knowledgeBaseResult"] = map[string]any{"faqs": []any{map[string]any{"questions": []string{d.Query}, "answer": d.Answer}}}
	}
	req := base(s, "REQUEST", requestType, handler, at)
	req["payload"] = map[string]any{"request": request, "intent": d.Intent, "matchConfidence": d.confidence, "rawQuery": d.Query}
	if d.kind == fallback {
		req["payload"] = map[string]any{"request": request, "rawQuery": d.Query}
	}
	finished := base(s, "LambdaSuccessEvent", "Lambda Finished", handler, at)
	if d.kind == failed {
		failure := base(s, "ERROR", "TypeError", handler, at)
		failure["payload"] = map[string]any{"message": "Cannot read properties of undefined", "stack": []any{
			map[string]any{"file": "handler.js", "methodName": "handleRequest", "lineNumber": 42, "column": 7}}}
		finished["type"], finished["payload"] = "LambdaErrorEvent", "Cannot read properties of undefined"
		return []any{req, failure, finished}, func(t *TurnStats) { t.Failed++ }
	}
	rr := base(s, "AnalyticsEvent", "REQUEST_RESPONSE", handler, at)
	rr["payload"] = map[string]any{
		"request":  request,
		"response": map[string]any{"outputSpeech": map[string]any{"displayText": d.Answer, "ssml": "<speak>" + d.Answer + "</speak>"}},
	}
	count := func(t *TurnStats) {
		if d.kind == fallback {
			t.Fallback++
			t.unanswered(d.Query)
			return
		}
		t.Answered++
		t.ByIntent[d.Intent]++
		if d.Intent == knowledgeBaseIntent {
			t.KnowledgeBase++
		}
		if d.confidence < LowConfidence {
			t.LowConfidence++
			t.unanswered(d.Query)
		}
	}
	return []any{req, rr, finished}, count
}

// AnsweredTurn is one turn of a session as the reference client sends it
// when the turn is answered (the request, REQUEST_RESPONSE and the
// handler's end), with a confident match: a single turn for tests that
// follow events through the stack.
func AnsweredTurn(sessionID, userID, channel string, t Turn, at time.Time) []any {
	events, _ := turnEvents(sessionInfo{id: sessionID, user: userID, channel: channel}, drawnTurn{Turn: t, kind: answered, confidence: 0.9}, at)
	return events
}

// send PUTs one batch holding events and counts the outcome, calling
// count (under the run's lock) when ingest accepted the whole batch;
// false stops the session.
func (r *run) send(ctx context.Context, events []any, count func(*TurnStats)) bool {
	body, err := json.Marshal(map[string]any{"events": events})
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
	if answer.Accepted == len(events) {
		r.mu.Lock()
		count(&r.turns)
		r.mu.Unlock()
	}
	return true
}

func (r *run) fail(why string) {
	r.failed.Add(1)
	r.mu.Lock()
	r.failures[why]++
	r.mu.Unlock()
}
