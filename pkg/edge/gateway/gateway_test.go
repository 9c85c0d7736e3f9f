package gateway

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/assistantcms/cms/internal/devbroker"
	"github.com/assistantcms/cms/internal/fixture"
	"github.com/assistantcms/cms/internal/ingesttest"
	"github.com/assistantcms/cms/pkg/content/contentapi"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/pipeline/ingest"
	pkafka "github.com/assistantcms/cms/pkg/pipeline/kafka"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// brokerBin is the development broker, built once for the package: the
// test runs ingest against it over TCP.
var brokerBin string

func TestMain(m *testing.M) { os.Exit(devbroker.RunTests(m, &brokerBin)) }

const bundleJSON = `{
 "organizations": [{"id": "org-1", "name": "Org"}],
 "apps": [{"appId": "app-1", "organizationId": "org-1", "name": "Shop"}],
 "handlers": [{"appId": "app-1", "intentId": "LaunchRequest", "name": "Launch"}]
}`

const launch = `{"type":"REQUEST","name":"LAUNCH_REQUEST","channel":"web","platform":"stentor","sessionId":"s-1","userId":"u-1","environment":"production","isNewSession":true,"isoTime":"2026-11-21T10:00:00.000Z"}`

// front starts a gateway made with cfg on a test server until the test
// ends, and returns its URL.
func front(tb testing.TB, cfg Config) string {
	tb.Helper()
	g, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	tb.Cleanup(srv.Close)
	return srv.URL
}

// serve runs a service on a loopback port until the test ends.
func serve(t *testing.T, run func(ctx context.Context, ln net.Listener) error) (url string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, ln) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}
	t.Cleanup(stop)
	return "http://" + ln.Addr().String(), stop
}

type reply struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, method, url, token string, body []byte, headers ...string) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

// TestOneAddress sends event batches and content reads to the gateway
// alone, with ingest, the broker and the content API real behind it.
func TestOneAddress(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	broker := devbroker.StartForTest(t, brokerBin)
	store, tokens := fixture.Open(t, bundleJSON, map[string]tenancy.Token{"app": {OrganizationID: "org-1", AppID: "app-1"}})
	token := tokens["app"]
	ingestURL, topic := ingesttest.Serve(t, broker.Addr(), store, "gateway-events")
	api, err := contentapi.NewService(contentapi.ServiceConfig{ShutdownTimeout: 10 * time.Second}, store, log)
	if err != nil {
		t.Fatal(err)
	}
	apiURL, stopAPI := serve(t, api.Serve)
	g, err := New(Config{Ingest: ingestURL, API: apiURL}, log)
	if err != nil {
		t.Fatal(err)
	}
	gw, _ := serve(t, g.Serve)

	if r := do(t, http.MethodGet, gw+"/readyz", "", nil); r.status != 200 {
		t.Fatalf("readyz %d: %s", r.status, r.body)
	}
	batch := []byte(`{"events":[` + launch + `]}`)
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	zw.Write(batch)
	zw.Close()
	for _, tt := range []struct {
		path    string
		body    []byte
		headers []string
	}{
		{"/cms/app/events", batch, []string{"Content-Type", "application/json"}},
		{"/cms/apps/events", batch, []string{"Content-Type", "application/json"}},
		{"/cms/app/events", zipped.Bytes(), []string{"Content-Type", "application/json", "Content-Encoding", "gzip"}},
	} {
		if r := do(t, http.MethodPut, gw+tt.path, token, tt.body, tt.headers...); r.status != 200 {
			t.Errorf("PUT %s %v: %d %s", tt.path, tt.headers, r.status, r.body)
		}
	}
	if n := countRecords(t, broker.Addr(), topic); n != 3 {
		t.Errorf("%d events on the topic, want the 3 sent through the gateway", n)
	}
	// Reads reach the API; the events path reaches ingest whatever the
	// method, and ingest answers for it.
	if r := do(t, http.MethodGet, gw+"/cms/handler/LaunchRequest", token, nil); r.status != 200 || !strings.Contains(r.body, `"name":"Launch"`) {
		t.Errorf("GET handler: %d %s", r.status, r.body)
	}
	if r := do(t, http.MethodGet, gw+"/cms/app/events", token, nil); r.status != http.StatusMethodNotAllowed {
		t.Errorf("GET /cms/app/events: %d %s, want ingest's 405", r.status, r.body)
	}
	if r := do(t, http.MethodGet, gw+"/cms/handler/LaunchRequest", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("no token: %d, want the API's 401", r.status)
	}

	// With the API gone, reads get a 503 to retry and readiness fails;
	// events still flow.
	stopAPI()
	r := do(t, http.MethodGet, gw+"/cms/handler/LaunchRequest", token, nil)
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, `"errorType":"ServerError"`) {
		t.Errorf("API down: %d %v %s", r.status, r.header, r.body)
	}
	deadline := time.Now().Add(5 * time.Second) // readiness results are cached for a second
	for do(t, http.MethodGet, gw+"/readyz", "", nil).status != http.StatusServiceUnavailable {
		if time.Now().After(deadline) {
			t.Fatal("readyz still 200 with the API down")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := do(t, http.MethodPut, gw+"/cms/app/events", token, batch, "Content-Type", "application/json"); r.status != 200 {
		t.Errorf("events with the API down: %d %s", r.status, r.body)
	}
	m := do(t, http.MethodGet, gw+"/metrics", "", nil).body
	for _, want := range []string{
		`cms_gateway_requests_total{code="200",upstream="ingest"} 4`,
		`cms_gateway_requests_total{code="503",upstream="api"} 1`,
		`cms_gateway_requests_total{code="405",upstream="ingest"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// countRecords reads the end offset of partition 0.
func countRecords(t *testing.T, broker, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := kafka.DialLeader(ctx, "tcp", broker, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	end, err := conn.ReadLastOffset()
	if err != nil {
		t.Fatal(err)
	}
	return end
}

func TestIsEventsPath(t *testing.T) {
	for path, want := range map[string]bool{
		"/cms/app/events": true, "/cms/apps/events": true,
		"/cms/app/events/": false, "/cms/app": false, "/cms/handler": false, "/": false, "/cms/app/events2": false,
	} {
		if IsEventsPath(path) != want {
			t.Errorf("IsEventsPath(%q) = %v", path, !want)
		}
	}
}

func TestNewRefusesBadUpstreams(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range []Config{
		{Ingest: "", API: "http://127.0.0.1:1"},
		{Ingest: "127.0.0.1:1", API: "http://127.0.0.1:1"},
		{Ingest: "http://127.0.0.1:1", API: "ftp://x"},
	} {
		if _, err := New(c, log); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
}

// TestForwardedHeaders checks what an upstream sees of the client: its
// address in X-Forwarded-For, and the body and headers as sent.
func TestForwardedHeaders(t *testing.T) {
	got := make(chan *http.Request, 1)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		got <- r
		w.WriteHeader(http.StatusAccepted)
	}))
	defer upstream.Close()
	gw := front(t, Config{Ingest: upstream.URL, API: upstream.URL})
	r := do(t, http.MethodPut, gw+"/cms/app/events", "tok", []byte("zipped"), "Content-Encoding", "gzip")
	if r.status != http.StatusAccepted {
		t.Fatalf("status %d", r.status)
	}
	req := <-got
	body, _ := io.ReadAll(req.Body)
	if req.Header.Get("X-Forwarded-For") != "127.0.0.1" || req.Header.Get("Authorization") != "Bearer tok" ||
		req.Header.Get("Content-Encoding") != "gzip" || string(body) != "zipped" {
		t.Errorf("upstream saw %v, body %q", req.Header, body)
	}
}

// TestBodiesPassWhole sends bodies of every size around the one up to
// which the gateway reads a body before calling the upstream: each
// arrives whole, with its length.
func TestBodiesPassWhole(t *testing.T) {
	type seen struct {
		length int64
		body   []byte
	}
	got := make(chan seen, 1)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- seen{r.ContentLength, body}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer upstream.Close()
	gw := front(t, Config{Ingest: upstream.URL, API: upstream.URL})
	for _, n := range []int{1, 1000, wholeBodyMax - 1, wholeBodyMax, wholeBodyMax + 1, 3 * wholeBodyMax} {
		body := bytes.Repeat([]byte("0123456789"), n/10+1)[:n]
		if r := do(t, http.MethodPut, gw+"/cms/app/events", "tok", body); r.status != http.StatusAccepted {
			t.Fatalf("%d bytes: status %d %s", n, r.status, r.body)
		}
		if s := <-got; s.length != int64(n) || !bytes.Equal(s.body, body) {
			t.Errorf("%d bytes: the upstream got %d bytes, Content-Length %d", n, len(s.body), s.length)
		}
	}
}

// TestForwardedForFromTrustedProxies: a client's X-Forwarded-For is
// dropped, so that it cannot name whom it pleases, unless the gateway's
// peer is a proxy it trusts (a load balancer in front of it); then the
// chain is passed on with the peer appended.
func TestForwardedForFromTrustedProxies(t *testing.T) {
	got := make(chan string, 1)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- strings.Join(r.Header.Values("X-Forwarded-For"), "|")
		w.WriteHeader(http.StatusAccepted)
	}))
	defer upstream.Close()
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	for _, tc := range []struct {
		name    string
		trusted []netip.Prefix
		want    string
	}{
		{"no proxy trusted", nil, "127.0.0.1"},
		{"the peer is a trusted proxy", loopback, "198.51.100.7, 127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := front(t, Config{Ingest: upstream.URL, API: upstream.URL, TrustedProxies: tc.trusted})
			if r := do(t, http.MethodGet, gw+"/cms/app", "tok", nil, "X-Forwarded-For", "198.51.100.7"); r.status != http.StatusAccepted {
				t.Fatalf("status %d", r.status)
			}
			if xff := <-got; xff != tc.want {
				t.Errorf("upstream saw X-Forwarded-For %q, want %q", xff, tc.want)
			}
		})
	}
}

// TestConnectsFromItsSourceAddress: with SourceAddr the upstreams see
// the gateway's connections, requests and readiness checks alike, come
// from that address, so that they can trust it alone rather than every
// local client; without it the system picks (127.0.0.1 on loopback).
func TestConnectsFromItsSourceAddress(t *testing.T) {
	peers := make(chan string, 4)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		select {
		case peers <- r.URL.Path + " " + host:
		default:
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer upstream.Close()
	for _, tc := range []struct {
		name   string
		source netip.Addr
		want   string
	}{
		{"unset", netip.Addr{}, "127.0.0.1"},
		{"a loopback address of its own", netip.MustParseAddr("127.0.0.2"), "127.0.0.2"},
		{"another one", netip.MustParseAddr("127.0.0.53"), "127.0.0.53"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := front(t, Config{Ingest: upstream.URL, API: upstream.URL, SourceAddr: tc.source})
			if r := do(t, http.MethodGet, gw+"/cms/app", "tok", nil); r.status != http.StatusOK {
				t.Fatalf("status %d", r.status)
			}
			if got, want := <-peers, "/cms/app "+tc.want; got != want {
				t.Errorf("upstream saw %q, want %q", got, want)
			}
			if r := do(t, http.MethodGet, gw+"/readyz", "", nil); r.status != http.StatusOK {
				t.Fatalf("readyz: status %d %s", r.status, r.body)
			}
			for range 2 {
				if got, want := <-peers, "/readyz "+tc.want; got != want {
					t.Errorf("upstream saw %q, want %q", got, want)
				}
			}
		})
	}
}

func TestHTTPLimits(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	g, err := New(Config{Ingest: "http://127.0.0.1:1", API: "http://127.0.0.1:1"}, log)
	if err != nil {
		t.Fatal(err)
	}
	s := g.server
	if s.ReadHeaderTimeout != DefaultReadHeaderTimeout || s.ReadTimeout != DefaultReadTimeout || s.WriteTimeout != DefaultWriteTimeout ||
		s.IdleTimeout != DefaultIdleTimeout || s.MaxHeaderBytes != DefaultMaxHeaderBytes {
		t.Errorf("defaults: %v %v %v %v %d", s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout, s.MaxHeaderBytes)
	}
	want := httpserve.Limits{ReadHeaderTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 40 * time.Second, IdleTimeout: 3 * time.Second, MaxHeaderBytes: 4096}
	g, err = New(Config{Ingest: "http://127.0.0.1:1", API: "http://127.0.0.1:1", HTTP: want}, log)
	if err != nil {
		t.Fatal(err)
	}
	if s := g.server; httpserve.LimitsOf(s) != want {
		t.Errorf("configured: %v %v %v %v %d", s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout, s.MaxHeaderBytes)
	}
	// An answer could never be written after waiting this long upstream.
	_, err = New(Config{Ingest: "http://127.0.0.1:1", API: "http://127.0.0.1:1", ResponseTimeout: time.Minute, HTTP: httpserve.Limits{WriteTimeout: time.Minute}}, log)
	if err == nil || !strings.Contains(err.Error(), "longer than the response timeout") {
		t.Errorf("a write timeout no longer than the response timeout: %v", err)
	}
}

// TestSlowBodyIsTheClientsFault trickles a request body through the
// gateway slower than its read timeout: the answer is 408 in the JSON
// error shape, counted as such, not a 503 that blames the upstream and
// invites the client to retry the same upload.
func TestSlowBodyIsTheClientsFault(t *testing.T) {
	read := make(chan error, 1)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		read <- err
		w.WriteHeader(http.StatusOK)
	}))
	defer upstream.Close()
	const timeout = 500 * time.Millisecond
	g, err := New(Config{Ingest: upstream.URL, API: upstream.URL, HTTP: httpserve.Limits{ReadTimeout: timeout}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	gw, _ := serve(t, g.Serve)
	conn, err := net.Dial("tcp", strings.TrimPrefix(gw, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, "PUT /cms/app/events HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"events\":["); err != nil {
		t.Fatal(err)
	}
	answered := make(chan *http.Response, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Errorf("read answer: %v", err)
		}
		answered <- resp
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var resp *http.Response
	give := time.After(10 * time.Second)
	for waiting := true; waiting; {
		select {
		case resp = <-answered:
			waiting = false
		case <-tick.C:
			_, _ = io.WriteString(conn, " ") // fails once the gateway has closed
		case <-give:
			t.Fatal("no answer within 10s")
		}
	}
	if resp == nil {
		return // the read failed, as reported
	}
	body, _ := io.ReadAll(resp.Body)
	took := time.Since(start)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), `"httpStatus":408`) || took < timeout/2 || took > timeout+5*time.Second {
		t.Errorf("after %v: %d %s; want 408 in the JSON shape after about %v", took, resp.StatusCode, body, timeout)
	}
	// A body this small is read whole before the upstream is called: it
	// is never called, or its read fails.
	select {
	case err := <-read:
		if err == nil {
			t.Error("the upstream read the whole body of a request cut off")
		}
	case <-time.After(time.Second):
	}
	m := do(t, http.MethodGet, gw+"/metrics", "", nil).body
	if !strings.Contains(m, `cms_gateway_requests_total{code="408",upstream="ingest"} 1`) {
		t.Errorf("metrics lack the 408")
	}
}

// TestStalledBatchIsCutOffAtTheMinimumRate sends event batches through
// the gateway, with ingest and the broker real behind it, that stall: one
// before the gateway has passed anything on, one after a gzip bomb's
// compressed bytes reached ingest, which decompressed them and holds its
// app's only request slot. Each is answered 408 for the minimum upload
// rate within seconds, not at a read timeout, and ingest gives back what
// the request held: the app's next batch is answered 200.
func TestStalledBatchIsCutOffAtTheMinimumRate(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	broker := devbroker.StartForTest(t, brokerBin)
	store, tokens := fixture.Open(t, bundleJSON, map[string]tenancy.Token{"app": {OrganizationID: "org-1", AppID: "app-1"}})
	token := tokens["app"]
	topic := fmt.Sprintf("gateway-stalled-%d", os.Getpid())
	ingestURL := ingesttest.Start(t, ingest.ServiceConfig{
		Kafka: pkafka.Cluster{Brokers: []string{broker.Addr()}}, EventsTopic: topic, QuarantineTopic: topic + "-quarantine",
		TopicPartitions: 1, TopicReplication: 1, ShutdownTimeout: 10 * time.Second,
		// Four slots, a quarter of them for each app: one held request of
		// app-1 refuses the next with 429 until it is given back.
		Handler: ingest.Config{MaxInFlight: 4},
	}, store, log)
	g, err := New(Config{Ingest: ingestURL, API: ingestURL}, log)
	if err != nil {
		t.Fatal(err)
	}
	gw, _ := serve(t, g.Serve)
	var zipped bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&zipped, gzip.BestCompression)
	_, _ = zw.Write(make([]byte, 14<<20))
	_ = zw.Close()
	bomb := zipped.Bytes()[:zipped.Len()-8] // no trailer: ingest waits for it

	for _, tc := range []struct {
		name    string
		headers string
		sent    []byte
		// missing is what the declared length lacks of what is sent.
		missing int
	}{
		{"stalls within the gateway's buffer", "", []byte(`{"events":[`), 1 << 20},
		{"a small batch stalls before ingest is called", "", []byte(`{"events":[`), 1000},
		{"stalls once a gzip bomb reached ingest", "Content-Encoding: gzip\r\n", bomb, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", strings.TrimPrefix(gw, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(45 * time.Second))
			start := time.Now()
			head := fmt.Sprintf("PUT /cms/app/events HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\n%sContent-Length: %d\r\n\r\n", token, tc.headers, len(tc.sent)+tc.missing)
			if _, err := conn.Write(append([]byte(head), tc.sent...)); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("read the answer: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			took := time.Since(start)
			// The default grace of 2 s, and a second for every 16 KiB sent.
			if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), `"message":"the body arrived too slowly: `) ||
				took < DefaultMinUploadGrace || took > DefaultMinUploadGrace+6*time.Second {
				t.Errorf("after %s: %d %s; want a 408 for the upload rate after %s and a second for every 16 KiB", took, resp.StatusCode, body, DefaultMinUploadGrace)
			}
			// Ingest lets the request go: nothing is in flight there, and
			// the app's next batch is answered.
			deadline := time.Now().Add(5 * time.Second)
			for !strings.Contains(do(t, http.MethodGet, ingestURL+"/metrics", "", nil).body, "\ncms_ingest_in_flight_requests 0\n") {
				if time.Now().After(deadline) {
					t.Fatal("ingest still has a request in flight 5s after the gateway answered")
				}
				time.Sleep(20 * time.Millisecond)
			}
			if r := do(t, http.MethodPut, gw+"/cms/app/events", token, []byte(`{"events":[`+launch+`]}`)); r.status != 200 {
				t.Errorf("the app's next batch: %d %s", r.status, r.body)
			}
		})
	}
}

// TestOperatorAddress serves the gateway with an operator listener: the
// client listener forwards /cms paths only and answers health, every
// other path is the gateway's own 404, and its metrics answer on the
// operator listener.
func TestOperatorAddress(t *testing.T) {
	forwarded := make(chan string, 64)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			forwarded <- r.URL.Path
		}
		httpserve.WriteJSON(w, http.StatusOK, map[string]string{"path": r.URL.Path})
	}))
	t.Cleanup(upstream.Close)
	g, err := New(Config{Ingest: upstream.URL, API: upstream.URL}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	op, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	oper := "http://" + op.Addr().String()
	client, _ := serve(t, func(ctx context.Context, ln net.Listener) error {
		return g.Serve(ctx, httpserve.WithOperator(ln, op))
	})

	for _, tc := range []struct {
		base, path string
		want       int
		forwarded  bool
	}{
		{client, "/cms/app", 200, true},
		{client, "/cms/app/events", 200, true},
		{client, "/healthz", 200, false},
		{client, "/readyz", 200, false},
		{client, "/metrics", 404, false},
		{client, "/status", 404, false},
		{client, "/status/data", 404, false},
		{client, "/analytics", 404, false},
		{client, "/analytics/data", 404, false},
		{client, "/debug/pprof/", 404, false},
		{client, "/openapi.yaml", 200, true}, // the contract, for runtime teams
		{client, "/", 404, false},
		{client, "/cms", 404, false},
		{oper, "/metrics", 200, false},
		{oper, "/debug/pprof/", 200, false},
		{oper, "/healthz", 200, false},
		{oper, "/readyz", 200, false},
		{oper, "/status", 404, false},
		{oper, "/cms/app", 404, false},
	} {
		r := do(t, http.MethodGet, tc.base+tc.path, "", nil)
		if r.status != tc.want {
			t.Errorf("%s%s: %d, want %d: %.200s", tc.base, tc.path, r.status, tc.want, r.body)
		}
		if r.status == 404 && !strings.Contains(r.body, `"httpStatus":404`) {
			t.Errorf("%s%s: %s, want the error shape", tc.base, tc.path, r.body)
		}
		select {
		case p := <-forwarded:
			if !tc.forwarded || p != tc.path {
				t.Errorf("%s%s: the upstream was called for %s", tc.base, tc.path, p)
			}
		default:
			if tc.forwarded {
				t.Errorf("%s%s: not forwarded", tc.base, tc.path)
			}
		}
	}
	m := do(t, http.MethodGet, oper+"/metrics", "", nil).body
	// /cms/app and /openapi.yaml went to the api, the events to ingest.
	for _, want := range []string{`cms_gateway_requests_total{code="200",upstream="api"} 2`, `cms_gateway_requests_total{code="200",upstream="ingest"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("operator metrics lack %s", want)
		}
	}
}

// roundTripFunc is an http.RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestWholeBodiesStayWithinTheirBudget: clients sending slowly cannot
// make the gateway hold more than the budget of whole bodies; past it,
// bodies stream as they come.
func TestWholeBodiesStayWithinTheirBudget(t *testing.T) {
	for _, tc := range []struct {
		name      string
		heldFirst int64 // held by other requests
		size      int
		wantWhole bool
	}{
		{"within the budget", 0, 50, true},
		{"exactly the budget", 50, 50, true},
		{"past the budget", 80, 50, false},
		{"over the size read whole", 0, wholeBodyMax + 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := io.NopCloser(bytes.NewReader(make([]byte, tc.size)))
			var wb *wholeBodies
			wb = &wholeBodies{budget: 100, rt: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				whole := r.Body != src
				if whole != tc.wantWhole {
					t.Errorf("body read whole: %v, want %v", whole, tc.wantWhole)
				}
				if held := wb.held.Load(); whole && held != tc.heldFirst+int64(tc.size) || !whole && held != tc.heldFirst {
					t.Errorf("%d bytes held while sending", held)
				}
				return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
			})}
			if tc.size > int(wb.budget) {
				wb.budget = wholeBodyBudget
			}
			wb.held.Store(tc.heldFirst)
			req := httptest.NewRequest(http.MethodPut, "http://ingest/cms/app/events", nil)
			req.Body, req.ContentLength = src, int64(tc.size)
			if _, err := wb.RoundTrip(req); err != nil {
				t.Fatal(err)
			}
			if held := wb.held.Load(); held != tc.heldFirst {
				t.Errorf("%d bytes held after the request, want %d", held, tc.heldFirst)
			}
		})
	}
}
