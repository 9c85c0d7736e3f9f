package livehttp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/pipeline/kafka"
	"github.com/assistantcms/cms/pkg/pipeline/livetail"
)

const (
	eventsTopic     = "ev"
	quarantineTopic = "q"
)

// source is a livetail.Source that reads nothing: the tests hand the hub
// records themselves.
type source struct{}

func (source) Run(ctx context.Context, _ kafka.TailHandler) { <-ctx.Done() }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// server serves the stream of app "a" of organization "org" from a hub
// configured with cfg, behind a server with the given timeouts.
type server struct {
	hub     *livetail.Hub
	url     string
	revoked atomic.Bool
}

func newServer(t *testing.T, cfg livetail.Config, hc Config, timeouts time.Duration) *server {
	t.Helper()
	cfg.EventsTopic, cfg.QuarantineTopic = eventsTopic, quarantineTopic
	s := &server{hub: livetail.NewHub(cfg, source{}, nil, quiet)}
	h := New(s.hub, hc, nil, quiet)
	recheck := func(context.Context) error {
		if s.revoked.Load() {
			return &auth.Error{Kind: auth.Unauthenticated, Message: "Unauthorized"}
		}
		return nil
	}
	page := Page()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if httpserve.WantsPage(r) || r.URL.Path != Path {
			page.ServeHTTP(w, r)
			return
		}
		h.Stream(w, r, auth.Target{OrganizationID: "org", AppID: "a"}, recheck)
	}))
	if timeouts > 0 {
		srv.Config.ReadTimeout, srv.Config.WriteTimeout = timeouts, timeouts
	}
	srv.Start()
	t.Cleanup(func() {
		s.hub.Close()
		srv.Close()
	})
	s.url = srv.URL + Path
	return s
}

// message is one Server-Sent Event, or a comment (kind ":").
type message struct {
	kind, data string
}

// stream is a client of the stream.
type stream struct {
	resp *http.Response
	msgs chan message
	// err is why reading ended: io.EOF for a response that ended whole.
	err  error
	done chan struct{}
}

func open(t *testing.T, url string) *stream {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	s := &stream{resp: resp, msgs: make(chan message, 10_000), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer resp.Body.Close()
		r := bufio.NewReader(resp.Body)
		var m message
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				s.err = err
				return
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case line == "":
				if m.kind != "" {
					s.msgs <- m
				}
				m = message{}
			case strings.HasPrefix(line, ": "):
				s.msgs <- message{kind: ":", data: line[2:]}
			case strings.HasPrefix(line, "event: "):
				m.kind = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				m.data = line[len("data: "):]
			}
		}
	}()
	t.Cleanup(func() { resp.Body.Close(); <-s.done })
	return s
}

// next returns the next message that is not a comment, unless kind is ":".
func (s *stream) next(t *testing.T, kind string) message {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-s.msgs:
			if m.kind == ":" && kind != ":" {
				continue
			}
			if m.kind != kind {
				t.Fatalf("message %q (%s), want %q", m.kind, m.data, kind)
			}
			return m
		case <-s.done:
			select {
			case m := <-s.msgs:
				if m.kind != kind && !(m.kind == ":" && kind != ":") {
					t.Fatalf("message %q (%s), want %q", m.kind, m.data, kind)
				}
				if m.kind == kind {
					return m
				}
				continue
			default:
			}
			t.Fatalf("the stream ended (%v) before a %q message", s.err, kind)
		case <-deadline:
			t.Fatalf("no %q message within 10s", kind)
		}
	}
}

// ended waits for the response to end and reports whether it ended whole
// (its last chunk read) rather than cut.
func (s *stream) ended(t *testing.T) error {
	t.Helper()
	select {
	case <-s.done:
		return s.err
	case <-time.After(10 * time.Second):
		t.Fatal("the stream goes on")
		return nil
	}
}

func envelope(app, id string, payload string) kafka.Message {
	v := fmt.Sprintf(`{"v":1,"eventId":%q,"appId":%q,"organizationId":"org","receivedAt":"2026-05-06T07:08:09.120Z","event":{"appId":%q,"type":"REQUEST","name":"N","sessionId":"s","payload":%s}}`,
		id, app, app, payload)
	return kafka.Message{Topic: eventsTopic, Key: []byte(app + "/s"), Value: []byte(v)}
}

// waitReading reads the stream's start, tells the hub its tail reads, and
// reads the state message that says so.
func waitReading(t *testing.T, s *server, st *stream) {
	t.Helper()
	st.next(t, "start")
	s.hub.Reading(kafka.Resumption{First: true})
	st.next(t, "state")
}

func TestStreamShowsEventsUpToItsLimit(t *testing.T) {
	s := newServer(t, livetail.Config{EventsPerSecond: 1000}, Config{}, 0)
	st := open(t, s.url+"?limit=3")
	if ct := st.resp.Header.Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if cc := st.resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q", cc)
	}
	start := st.next(t, "start")
	var sv struct {
		AppID string `json:"appId"`
		Limit int    `json:"limit"`
	}
	if err := json.Unmarshal([]byte(start.data), &sv); err != nil || sv.AppID != "a" || sv.Limit != 3 {
		t.Errorf("start %s: want app a, limit 3 (%v)", start.data, err)
	}
	s.hub.Reading(kafka.Resumption{First: true})
	st.next(t, "state")
	for i := range 5 {
		s.hub.Message(envelope("b", fmt.Sprint("other", i), `{}`))
		s.hub.Message(envelope("a", fmt.Sprint(i), `{"i":`+fmt.Sprint(i)+`}`))
	}
	for i := range 3 {
		m := st.next(t, "event")
		var ev livetail.Event
		if err := json.Unmarshal([]byte(m.data), &ev); err != nil || ev.EventID != fmt.Sprint(i) || string(ev.Payload) != fmt.Sprintf(`{"i":%d}`, i) {
			t.Errorf("event %d: %s (%v)", i, m.data, err)
		}
	}
	end := st.next(t, "end")
	if !strings.Contains(end.data, `"reason":"limit"`) {
		t.Errorf("end %s, want the limit's", end.data)
	}
	if err := st.ended(t); !errors.Is(err, io.EOF) {
		t.Errorf("the stream ended with %v, want a whole response", err)
	}
}

func TestStreamSummaries(t *testing.T) {
	s := newServer(t, livetail.Config{EventsPerSecond: 2}, Config{Summary: 100 * time.Millisecond}, 0)
	st := open(t, s.url)
	waitReading(t, s, st)
	for i := range 10 {
		s.hub.Message(envelope("a", fmt.Sprint(i), `{}`))
	}
	st.next(t, "event")
	st.next(t, "event")
	var sum struct {
		Seen, Shown, Skipped uint64
		Total                struct{ Seen, Shown, Skipped uint64 }
	}
	if err := json.Unmarshal([]byte(st.next(t, "summary").data), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Seen != 10 || sum.Shown != 2 || sum.Skipped != 8 || sum.Total.Seen != 10 {
		t.Errorf("summary %+v, want 10 seen, 2 shown, 8 skipped", sum)
	}
	// Records passed over unread are told though none of the app's came.
	s.hub.Unread(40)
	var unread struct {
		Seen, Unread uint64
		Total        struct{ Seen, Unread uint64 }
	}
	if err := json.Unmarshal([]byte(st.next(t, "summary").data), &unread); err != nil {
		t.Fatal(err)
	}
	if unread.Seen != 0 || unread.Unread != 40 || unread.Total.Seen != 10 || unread.Total.Unread != 40 {
		t.Errorf("summary %+v, want 40 unread and none seen", unread)
	}
}

// TestStreamOutlivesTheServersTimeouts: a stream lasts longer than the
// server's read and write timeouts, kept open by heartbeats.
func TestStreamOutlivesTheServersTimeouts(t *testing.T) {
	s := newServer(t, livetail.Config{}, Config{Heartbeat: 100 * time.Millisecond}, 300*time.Millisecond)
	st := open(t, s.url)
	waitReading(t, s, st)
	beats := 0
	deadline := time.Now().Add(1200 * time.Millisecond)
	for time.Now().Before(deadline) {
		if m := st.next(t, ":"); m.data == "keep-alive" {
			beats++
		}
	}
	if beats < 3 {
		t.Errorf("%d heartbeats in 1.2 s at 100 ms, want several", beats)
	}
	s.hub.Message(envelope("a", "late", `{}`))
	if m := st.next(t, "event"); !strings.Contains(m.data, `"eventId":"late"`) {
		t.Errorf("after 1.2 s: %s", m.data)
	}
}

func TestStreamBadParameters(t *testing.T) {
	s := newServer(t, livetail.Config{}, Config{}, 0)
	for _, tc := range []struct{ query, field string }{
		{"quarantined=yes", "quarantined"},
		{"limit=0", "limit"},
		{"limit=100001", "limit"},
		{"limit=x", "limit"},
		{"type=" + strings.Repeat("t", 257), "type"},
		{"userId=%ff", "userId"},
	} {
		resp, err := http.Get(s.url + "?" + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			HTTPStatus int    `json:"httpStatus"`
			Field      string `json:"field"`
			Message    string `json:"message"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || body.Field != tc.field || body.Message == "" {
			t.Errorf("?%.40s: %d %+v, want 400 naming %s", tc.query, resp.StatusCode, body, tc.field)
		}
	}
}

func TestStreamWithoutKafka(t *testing.T) {
	h := New(nil, Config{}, nil, quiet)
	w := httptest.NewRecorder()
	h.Stream(w, httptest.NewRequest(http.MethodGet, Path, nil), auth.Target{AppID: "a"}, nil)
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "KAFKA_BROKERS") {
		t.Errorf("%d %s, want 503 naming KAFKA_BROKERS", w.Code, w.Body)
	}
}

func TestStreamsOverTheBounds(t *testing.T) {
	s := newServer(t, livetail.Config{MaxWatchersPerApp: 1}, Config{}, 0)
	open(t, s.url).next(t, "start")
	resp, err := http.Get(s.url)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "LIVE_MAX_WATCHERS_PER_APP") {
		t.Errorf("a second watcher of the app: %d, Retry-After %q, %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
}

func TestStreamEndsCleanlyOnShutdown(t *testing.T) {
	s := newServer(t, livetail.Config{}, Config{}, 0)
	st := open(t, s.url)
	waitReading(t, s, st)
	s.hub.Message(envelope("a", "queued", `{}`))
	s.hub.Close()
	// What was queued still goes out, then the end.
	for {
		m := <-st.msgs
		if m.kind == "end" {
			if !strings.Contains(m.data, `"reason":"shutdown"`) {
				t.Errorf("end %s, want shutdown's", m.data)
			}
			break
		}
	}
	if err := st.ended(t); !errors.Is(err, io.EOF) {
		t.Errorf("the stream ended with %v, want a whole response", err)
	}
}

func TestStreamEndsWhenTheTokenNoLongerMay(t *testing.T) {
	s := newServer(t, livetail.Config{}, Config{Recheck: 50 * time.Millisecond}, 0)
	st := open(t, s.url)
	waitReading(t, s, st)
	s.revoked.Store(true)
	if m := st.next(t, "end"); !strings.Contains(m.data, `"reason":"token"`) || !strings.Contains(m.data, "Unauthorized") {
		t.Errorf("end %s, want the token's", m.data)
	}
	if err := st.ended(t); !errors.Is(err, io.EOF) {
		t.Errorf("the stream ended with %v", err)
	}
}

// TestClientThatNeverReads: a client that sends its request and reads
// nothing more is dropped, and what it cost in memory stays bounded
// however much is sent to its app meanwhile.
func TestClientThatNeverReads(t *testing.T) {
	s := newServer(t, livetail.Config{EventsPerSecond: 1e6, MaxWatchersPerApp: 1, QueueLength: 16, PayloadBytes: 64 << 10},
		Config{WriteTimeout: 300 * time.Millisecond}, 0)
	conn, err := net.Dial("tcp", strings.TrimPrefix(strings.TrimSuffix(s.url, Path), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The smallest receive buffer: the kernel holds less for the client.
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 10)
	}
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: test\r\n\r\n", Path); err != nil {
		t.Fatal(err)
	}
	// The app has its one watcher once a second one is refused.
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err := http.Get(s.url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the client that never reads is not watching")
		}
	}
	s.hub.Reading(kafka.Resumption{First: true})

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
		}
	})
	// 3,000 events of 60 KB each: 180 MB sent to the app.
	payload := `"` + strings.Repeat("x", 60<<10) + `"`
	freed := false
	for i := 0; i < 3000; i++ {
		s.hub.Message(envelope("a", fmt.Sprint(i), payload))
		if i%100 == 99 {
			// Dropped once a new watcher of the app gets in.
			resp, err := http.Get(s.url + "?limit=1")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				freed = true
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	close(stop)
	wg.Wait()
	if !freed {
		t.Error("the client that never reads still holds the app's one watcher after 180 MB were sent to it")
	}
	const bound = 48 << 20
	if grown := int64(peak.Load()) - int64(base); grown > bound {
		t.Errorf("the heap grew by %d MB while the client did not read, over %d MB", grown>>20, bound>>20)
	} else {
		t.Logf("the heap grew by at most %.1f MB", float64(grown)/(1<<20))
	}
}

func TestPage(t *testing.T) {
	s := newServer(t, livetail.Config{}, Config{}, 0)
	for _, tc := range []struct{ path, accept, contentType, contains string }{
		{Path, "text/html,application/xhtml+xml,*/*;q=0.8", "text/html; charset=utf-8", `<script src="/cms/app/events/live/page.js" defer></script>`},
		{ScriptPath, "*/*", "text/javascript; charset=utf-8", `"Authorization": "Bearer " + token`},
		{StylePath, "text/css,*/*;q=0.1", "text/css; charset=utf-8", "tr.quarantined"},
	} {
		req, _ := http.NewRequest(http.MethodGet, strings.TrimSuffix(s.url, Path)+tc.path, nil)
		req.Header.Set("Accept", tc.accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != tc.contentType || !strings.Contains(string(b), tc.contains) {
			t.Errorf("GET %s: %d %s, want %s holding %s", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), tc.contentType, tc.contains)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); csp != httpserve.PageCSP {
			t.Errorf("GET %s: CSP %q", tc.path, csp)
		}
	}
	// The script reads the stream with the token in a header: never an
	// EventSource, which could carry it only in the address.
	js, _ := pageFiles.ReadFile("page/live.js")
	if strings.Contains(string(js), "EventSource") || strings.Contains(string(js), "innerHTML") {
		t.Error("the page's script uses EventSource or innerHTML")
	}
}
