package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/childproc"
	"github.com/assistantcms/cms/internal/devbroker"
	"github.com/assistantcms/cms/internal/livewatch"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/pipeline/livetail/livehttp"
)

// liveStack is the development broker and ingest as processes, and api
// serve and api gateway run in this process, so that a test can stop
// them and read their exit codes.
type liveStack struct {
	broker          *devbroker.Broker
	api, gateway    string
	tokens          map[string]string
	db              string
	stopAPI         func() (code int, took time.Duration)
	apiLogs, gwLogs *childproc.Output
}

// startLiveStack starts everything with two apps in two organizations:
// demo-app of demo-org and app-b of org-b.
func startLiveStack(ctx context.Context, t *testing.T) *liveStack {
	t.Helper()
	dir := t.TempDir()
	if err := childproc.GoBuild(ctx, dir, "./cmd/ingest"); err != nil {
		t.Fatal(err)
	}
	brokerBin, err := devbroker.Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "cms.db")
	admin := func(args ...string) string {
		t.Helper()
		var out, errs bytes.Buffer
		if code := run(ctx, append([]string{"-content-db", db}, args...), noEnv, &out, &errs); code != 0 {
			t.Fatalf("api %v: exit %d: %s", args, code, errs.String())
		}
		return strings.TrimSpace(out.String())
	}
	s := &liveStack{tokens: map[string]string{}, db: db}
	s.tokens["runtimeA"] = admin("demo", "--quiet")
	s.tokens["manageA"] = admin("demo", "--quiet", "--management")
	s.tokens["readerA"] = admin("token", "create", "--app", "demo-app", "--scopes", "events:read", "--quiet")
	s.tokens["revokedA"] = admin("token", "create", "--app", "demo-app", "--scopes", "events:read,content:read", "--quiet")
	s.tokens["orgA"] = admin("token", "create", "--org", "demo-org", "--scopes", "events:read,content:read", "--quiet")
	admin("org", "create", "--name", "B", "--id", "org-b")
	admin("app", "create", "--org", "org-b", "--name", "B", "--id", "app-b")
	s.tokens["runtimeB"] = admin("token", "create", "--app", "app-b", "--quiet")
	s.tokens["readerB"] = admin("token", "create", "--app", "app-b", "--scopes", "events:read", "--quiet")

	s.broker, err = devbroker.Start(ctx, brokerBin, devbroker.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.broker.Stop() })
	ports, err := childproc.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	ingest := fmt.Sprintf("127.0.0.1:%d", ports[0])
	s.api, s.gateway = fmt.Sprintf("127.0.0.1:%d", ports[1]), fmt.Sprintf("127.0.0.1:%d", ports[2])
	cmd := exec.Command(filepath.Join(dir, "ingest"))
	cmd.Env = append(os.Environ(), "INGEST_ADDR="+ingest, "KAFKA_BROKERS="+s.broker.Addr(), "CONTENT_DB="+db, "RATE_LIMIT_RPS=0", "TOPIC_PARTITIONS=3")
	startProcess(ctx, t, "ingest", cmd, "http://"+ingest+"/readyz")

	s.apiLogs, s.gwLogs = &childproc.Output{}, &childproc.Output{}
	apiEnv := map[string]string{"CONTENT_DB": db, "API_ADDR": s.api, "KAFKA_BROKERS": s.broker.Addr(), "RATE_LIMIT_RPS": "0",
		"ENCODER_DIR": "off", "WORDNET_DIR": "off", "LIVE_EVENTS_PER_SECOND": "100000", "LIVE_SUMMARY_INTERVAL": "300ms",
		"LIVE_HEARTBEAT_INTERVAL": "200ms", "LIVE_MAX_WATCHERS_PER_APP": "4", "TOKEN_CACHE_TTL": liveTokenTTL.String()}
	apiCtx, cancelAPI := context.WithCancel(context.Background())
	apiDone := make(chan int, 1)
	go func() { apiDone <- run(apiCtx, []string{"serve"}, lookupIn(apiEnv), s.apiLogs, s.apiLogs) }()
	var once sync.Once
	var code int
	var took time.Duration
	s.stopAPI = func() (int, time.Duration) {
		once.Do(func() {
			start := time.Now()
			cancelAPI()
			select {
			case code = <-apiDone:
			case <-time.After(30 * time.Second):
				t.Errorf("api serve did not stop within 30s\n%s", s.apiLogs.String())
				code = -1
			}
			took = time.Since(start)
		})
		return code, took
	}
	t.Cleanup(func() { s.stopAPI() })
	waitUntil(t, time.Minute, "api serve ready", func() bool { return status(ctx, "http://"+s.api+"/readyz", "") == http.StatusOK })

	// The gateway's timeouts are short: streams through it must outlast
	// them.
	gwEnv := map[string]string{"GATEWAY_ADDR": s.gateway, "INGEST_URL": "http://" + ingest, "API_URL": "http://" + s.api,
		"HTTP_READ_TIMEOUT": "1s", "HTTP_WRITE_TIMEOUT": "2s", "GATEWAY_RESPONSE_TIMEOUT": "1s"}
	gwCtx, cancelGW := context.WithCancel(context.Background())
	gwDone := make(chan int, 1)
	go func() { gwDone <- run(gwCtx, []string{"gateway"}, lookupIn(gwEnv), s.gwLogs, s.gwLogs) }()
	t.Cleanup(func() { cancelGW(); <-gwDone })
	waitUntil(t, time.Minute, "the gateway ready", func() bool { return status(ctx, "http://"+s.gateway+"/readyz", "") == http.StatusOK })
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("api:\n%s\ngateway:\n%s", tail(s.apiLogs.String(), 6000), tail(s.gwLogs.String(), 3000))
		}
	})
	return s
}

// liveTokenTTL is the api's TOKEN_CACHE_TTL in the live stack: how long
// after its revocation a token may still be accepted.
const liveTokenTTL = 2 * time.Second

func lookupIn(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// watch opens a stream through the gateway and waits until it reads
// Kafka.
func (s *liveStack) watch(t *testing.T, token, query string) *livewatch.Stream {
	t.Helper()
	st, err := livewatch.Open(t.Context(), "http://"+s.gateway+livehttp.Path+query, s.tokens[token], 100_000)
	if err != nil {
		t.Fatalf("watch with %s%s: %v", token, query, err)
	}
	t.Cleanup(st.Close)
	if err := st.WaitReading(30 * time.Second); err != nil {
		t.Fatalf("watch with %s%s: %v", token, query, err)
	}
	return st
}

// send PUTs events through the gateway until ingest answers 200.
func (s *liveStack) send(ctx context.Context, t *testing.T, token string, events []string) {
	t.Helper()
	body := `{"events":[` + strings.Join(events, ",") + `]}`
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+s.gateway+"/cms/app/events", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+s.tokens[token])
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("%d %s", resp.StatusCode, b)
		}
		if time.Now().After(deadline) {
			t.Errorf("PUT events with %s: %v", token, err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// events are n events of app, their IDs prefix-0 to prefix-(n-1); every
// invalidEvery-th one has a numeric session ID, which quarantines it.
func events(prefix string, n, invalidEvery int) (list []string, quarantined map[string]bool) {
	quarantined = map[string]bool{}
	for i := range n {
		id := fmt.Sprintf("%s-%d", prefix, i)
		session := `"` + prefix + `-session"`
		if invalidEvery > 0 && i%invalidEvery == invalidEvery-1 {
			session = "5"
			quarantined[id] = true
		}
		list = append(list, fmt.Sprintf(`{"eventId":%q,"type":"REQUEST","name":"LAUNCH_REQUEST","channel":"web","platform":"web","sessionId":%s,"userId":"u","payload":{"n":%d}}`,
			id, session, i))
	}
	return list, quarantined
}

// collect reads events from st until it has every one of want, failing on
// an event not in want or one seen twice, then checks the summaries
// count them and nothing else.
func collect(t *testing.T, name string, st *livewatch.Stream, want map[string]bool, quarantined map[string]bool) {
	t.Helper()
	got := map[string]bool{}
	deadline := time.After(90 * time.Second)
	for len(got) < len(want) {
		select {
		case m, ok := <-st.C():
			if !ok {
				t.Fatalf("%s: the stream ended (%v) after %d of %d events", name, st.Err(), len(got), len(want))
			}
			if m.Kind != "event" {
				continue
			}
			var ev livewatch.Event
			if err := m.Decode(&ev); err != nil {
				t.Fatal(err)
			}
			switch {
			case !want[ev.EventID]:
				t.Fatalf("%s: an event not of its app: %s", name, m.Data)
			case got[ev.EventID]:
				t.Fatalf("%s: event %s shown twice", name, ev.EventID)
			}
			got[ev.EventID] = true
			if q := quarantined[ev.EventID]; q != (ev.Status == "quarantined") {
				t.Errorf("%s: event %s is %s, want quarantined %v", name, ev.EventID, ev.Status, q)
			} else if q && (len(ev.Reasons) != 1 || ev.Reasons[0].Field != "sessionId" || ev.Reasons[0].Reason != "wrong_type") {
				t.Errorf("%s: event %s's reasons %+v, want sessionId wrong_type", name, ev.EventID, ev.Reasons)
			}
		case <-deadline:
			t.Fatalf("%s: %d of %d events within 90 s", name, len(got), len(want))
		}
	}
	// The summaries have counted every event of the app, and nothing more.
	sum, err := st.WaitSummary(30*time.Second, func(s livewatch.Summary) bool { return s.Total.Seen >= uint64(len(want)) })
	if err != nil || sum.Total.Seen != uint64(len(want)) || sum.Total.Skipped > 0 {
		t.Fatalf("%s: summary %+v (%v), want %d events seen and none skipped", name, sum, err, len(want))
	}
}

// TestLiveEvents runs the live view against the real broker and ingest,
// through the gateway: who may watch, what each watcher sees with two
// apps sending at once, a broker restart and the api's shutdown.
func TestLiveEvents(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	s := startLiveStack(ctx, t)

	t.Run("refused as the content routes refuse", func(t *testing.T) { checkLiveRefusals(t, s) })
	t.Run("each watcher sees its app's events alone, two apps sending at once", func(t *testing.T) {
		a, b := s.watch(t, "readerA", ""), s.watch(t, "readerB", "")
		org := s.watch(t, "orgA", "?appId=demo-app")
		quarantinedOnly := s.watch(t, "readerA", "?quarantined=true")
		listA, qA := events("A", 400, 10)
		listB, qB := events("B", 300, 7)
		var wg sync.WaitGroup
		for _, app := range []struct {
			token string
			list  []string
		}{{"runtimeA", listA}, {"runtimeB", listB}} {
			wg.Go(func() {
				for i := 0; i < len(app.list); i += 25 {
					s.send(ctx, t, app.token, app.list[i:min(i+25, len(app.list))])
				}
			})
		}
		wg.Wait()
		ids := func(prefix string, n int) map[string]bool {
			m := map[string]bool{}
			for i := range n {
				m[fmt.Sprintf("%s-%d", prefix, i)] = true
			}
			return m
		}
		collect(t, "app A's watcher", a, ids("A", 400), qA)
		collect(t, "app B's watcher", b, ids("B", 300), qB)
		collect(t, "the organization's watcher of app A", org, ids("A", 400), qA)
		collect(t, "app A's watcher of quarantined events", quarantinedOnly, qA, qA)
	})
	t.Run("a broker restart is told and the stream goes on", func(t *testing.T) {
		st := s.watch(t, "readerA", "")
		if err := s.broker.Stop(); err != nil {
			t.Fatal(err)
		}
		waitState(t, st, "interrupted", false)
		if err := s.broker.Start(ctx); err != nil {
			t.Fatal(err)
		}
		waitState(t, st, "reading", false)
		list, _ := events("after-restart", 5, 0)
		s.send(ctx, t, "runtimeA", list)
		want := map[string]bool{}
		for i := range 5 {
			want[fmt.Sprintf("after-restart-%d", i)] = true
		}
		got := map[string]bool{}
		for len(got) < 5 {
			m, err := st.Skip("event", 60*time.Second, "state", "summary")
			if err != nil {
				t.Fatalf("after the restart: %v", err)
			}
			var ev livewatch.Event
			_ = m.Decode(&ev)
			if !want[ev.EventID] {
				t.Fatalf("after the restart: event %s, not one sent", ev.EventID)
			}
			got[ev.EventID] = true
		}
	})
	t.Run("a revoked token's stream ends when its requests are refused", func(t *testing.T) { checkRevokedStreamEnds(ctx, t, s) })
	t.Run("the api's shutdown ends every stream with a message", func(t *testing.T) {
		viaGateway := s.watch(t, "readerA", "")
		direct, err := livewatch.Open(ctx, "http://"+s.api+livehttp.Path, s.tokens["readerB"], 1000)
		if err != nil {
			t.Fatal(err)
		}
		defer direct.Close()
		if err := direct.WaitReading(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		code, took := s.stopAPI()
		if code != 0 {
			t.Errorf("api serve exited %d", code)
		}
		// The drain (SHUTDOWN_TIMEOUT, 10 s) waits for no stream.
		if took > 5*time.Second {
			t.Errorf("api serve took %v to stop with streams open", took)
		}
		for name, st := range map[string]*livewatch.Stream{"through the gateway": viaGateway, "direct": direct} {
			m, err := st.Skip("end", 10*time.Second, "event", "state", "summary")
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !strings.Contains(m.Data, `"reason":"shutdown"`) {
				t.Errorf("%s: end %s, want shutdown's", name, m.Data)
			}
			if err := st.Err(); !errors.Is(err, io.EOF) {
				t.Errorf("%s: the answer ended with %v, want whole", name, err)
			}
		}
	})
}

// waitState reads st until a state message of state.
func waitState(t *testing.T, st *livewatch.Stream, state string, lost bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		m, err := st.Skip("state", time.Until(deadline), "event", "summary")
		if err != nil {
			t.Fatalf("waiting for the state %s: %v", state, err)
		}
		var s livewatch.State
		if err := m.Decode(&s); err != nil {
			t.Fatal(err)
		}
		if s.State == state {
			if s.Lost != lost || s.Message == "" {
				t.Errorf("state %+v, want lost %v and a message", s, lost)
			}
			return
		}
	}
}

// checkLiveRefusals: the stream refuses what the content routes refuse,
// with the same status and body, and the tokens web pages carry.
func checkLiveRefusals(t *testing.T, s *liveStack) {
	gw := "http://" + s.gateway
	get := func(path, token string) (int, http.Header, string) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, gw+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	for _, tc := range []struct {
		name, token, query string
		status             int
	}{
		{"no token", "", "", http.StatusUnauthorized},
		{"a bad token", "bad", "", http.StatusUnauthorized},
		{"a token of an app naming another", "manageA", "?appId=app-b", http.StatusForbidden},
		{"an organization token without appId", "orgA", "", http.StatusBadRequest},
		{"an organization token naming another organization's app", "orgA", "?appId=app-b", http.StatusForbidden},
		{"an organization token naming no app", "orgA", "?appId=no-such-app", http.StatusForbidden},
		{"an empty appId", "manageA", "?appId=", http.StatusBadRequest},
	} {
		token := s.tokens[tc.token]
		if tc.token == "bad" {
			token = "cms_0000000000000000_nope"
		}
		code, _, body := get(livehttp.Path+tc.query, token)
		ccode, _, cbody := get("/cms/app"+tc.query, token)
		if code != tc.status || code != ccode || body != cbody {
			t.Errorf("%s: the stream answers %d %s; GET /cms/app %d %s; want %d for both, the same", tc.name, code, body, ccode, cbody, tc.status)
		}
	}
	// A runtime token, which web pages carry, never watches events.
	code, h, body := get(livehttp.Path, s.tokens["runtimeA"])
	if code != http.StatusForbidden || !strings.Contains(body, "lacks the events:read scope needed for watching events") ||
		h.Get("WWW-Authenticate") != `Bearer error="insufficient_scope", scope="events:read"` {
		t.Errorf("a runtime token: %d %s %q, want 403 for the events:read scope", code, body, h.Get("WWW-Authenticate"))
	}
	var shape struct {
		ErrorType  string `json:"errorType"`
		HTTPStatus int    `json:"httpStatus"`
	}
	if err := json.Unmarshal([]byte(body), &shape); err != nil || shape.ErrorType != "HandledError" || shape.HTTPStatus != 403 {
		t.Errorf("the refusal %s is not in the error shape", body)
	}
	// A browser opening the address gets the page, without a token.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, gw+livehttp.Path, nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "<title>Live events") || resp.Header.Get("Content-Security-Policy") != httpserve.PageCSP {
		t.Errorf("the page through the gateway: %d, CSP %q", resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
	}
}

// checkRevokedStreamEnds revokes a token that watches a stream and reads
// content: the stream ends, with the reason token, within a second of the
// time its requests are refused, and both within TOKEN_CACHE_TTL and a
// second of the revocation.
func checkRevokedStreamEnds(ctx context.Context, t *testing.T, s *liveStack) {
	const slack = time.Second + 500*time.Millisecond
	st := s.watch(t, "revokedA", "")
	token := s.tokens["revokedA"]
	get := func() int { return status(ctx, "http://"+s.gateway+"/cms/app", token) }
	if code := get(); code != http.StatusOK {
		t.Fatalf("GET /cms/app with the token before its revocation: %d", code)
	}
	var out, errs bytes.Buffer
	revoked := time.Now()
	if code := run(ctx, []string{"-content-db", s.db, "token", "revoke", token[len("cms_") : len("cms_")+16]}, noEnv, &out, &errs); code != 0 {
		t.Fatalf("token revoke: exit %d: %s", code, errs.String())
	}
	restRefused := make(chan time.Duration, 1)
	go func() {
		for time.Since(revoked) < liveTokenTTL+10*time.Second {
			if get() == http.StatusUnauthorized {
				restRefused <- time.Since(revoked)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		restRefused <- -1
	}()
	m, err := st.Skip("end", liveTokenTTL+10*time.Second, "event", "state", "summary")
	streamEnded := time.Since(revoked)
	if err != nil {
		t.Fatalf("the stream %v after the revocation: %v", streamEnded, err)
	}
	if !strings.Contains(m.Data, `"reason":"token"`) {
		t.Errorf("end %s, want the token's", m.Data)
	}
	rest := <-restRefused
	t.Logf("revoked: requests refused after %v, the stream ended after %v (TOKEN_CACHE_TTL %v)", rest, streamEnded, liveTokenTTL)
	if rest < 0 {
		t.Fatalf("requests with the token were never refused")
	}
	if streamEnded > liveTokenTTL+slack || streamEnded > rest+slack {
		t.Errorf("the stream ended %v after the revocation, requests were refused after %v: want within %v of both, TOKEN_CACHE_TTL %v", streamEnded, rest, slack, liveTokenTTL)
	}
}
