// Package gateway is the one address clients call. The reference client
// framework takes a single base URL for every call, event batches
// included, so the gateway sends PUT /cms/app/events and /cms/apps/events
// to ingest and every other request to the content API. With an operator
// listener, the client one forwards /cms paths only.
package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/assistantcms/cms/pkg/edge/clientnet"
	"github.com/assistantcms/cms/pkg/edge/cors"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/schemas/openapi"
)

// Config names the upstreams and bounds the gateway's waits.
type Config struct {
	// Ingest and API are the upstreams' base URLs (http://host:port).
	Ingest, API string
	// ResponseTimeout bounds the wait for an upstream's response headers.
	ResponseTimeout time.Duration
	// ShutdownTimeout bounds draining requests in flight on shutdown.
	ShutdownTimeout time.Duration
	// HTTP bounds client connections. Its ReadTimeout also bounds a body:
	// one trickled slower is answered 408. Its WriteTimeout includes the
	// upstream's wait, so it must be longer than ResponseTimeout.
	HTTP httpserve.Limits
	// MinUploadRate paces event batches as ingest does: a body that falls
	// behind it is cut off with 408 and its upstream request ends, so
	// that ingest gives back at once what the request held there, even
	// when the gateway has not yet passed on what little came. A zero
	// Rate or Grace takes the defaults below; a negative Rate sets none.
	MinUploadRate httpserve.MinUploadRate
	// TrustedProxies are the proxies in front of the gateway (a load
	// balancer, a TLS terminator) whose X-Forwarded-For it passes on,
	// with the address they called from appended, so that upstreams see
	// who the client is. From any other peer, a client's X-Forwarded-For
	// is dropped: it would name whoever the client wished.
	TrustedProxies []netip.Prefix
	// SourceAddr, when valid, is the local address the gateway connects
	// to its upstreams from. On one host, where every client is on
	// loopback, an address of the gateway's own (127.0.0.2, say) is what
	// the upstreams trust as their proxy, rather than all of loopback.
	SourceAddr netip.Addr
	// CORS, when it allows some origin, is the policy browsers see: the
	// gateway answers preflights itself, adds the policy's headers to
	// every answer, and forwards requests without their Origin, so that
	// the upstreams, whatever their own policy, answer as to a page of
	// their own origin and add none. Nil passes everything through.
	CORS *cors.Policy
}

// Defaults of Config.
const (
	DefaultResponseTimeout   = 30 * time.Second
	DefaultShutdownTimeout   = 10 * time.Second
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 60 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	// DefaultMinUploadRate and DefaultMinUploadGrace are ingest's.
	DefaultMinUploadRate  = 16 << 10
	DefaultMinUploadGrace = 2 * time.Second
)

// Upstream names.
const (
	upstreamIngest = "ingest"
	upstreamAPI    = "api"
)

// IsEventsPath reports whether path is one of ingest's: the two spellings
// of the events endpoint.
func IsEventsPath(path string) bool {
	return path == "/cms/app/events" || path == "/cms/apps/events"
}

// Gateway routes requests to ingest or the content API.
type Gateway struct {
	cfg      Config
	ingest   *httputil.ReverseProxy
	api      *httputil.ReverseProxy
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	checker  *httpserve.Checker
	mux      *http.ServeMux
	handler  http.Handler
	server   *http.Server
	log      *slog.Logger
	// stopping is closed when the server begins to shut down: streams
	// passing through end then, since they would outlast any drain.
	stopping chan struct{}
	// ingestMetrics and apiMetrics are each upstream's series of
	// requests and latency.
	ingestMetrics, apiMetrics *upstreamMetrics
	// copyBuffers lends the proxies the buffers they copy answers with.
	copyBuffers *bufferPool
}

// New returns a gateway to the upstreams in cfg.
func New(cfg Config, log *slog.Logger) (*Gateway, error) {
	if cfg.ResponseTimeout <= 0 {
		cfg.ResponseTimeout = DefaultResponseTimeout
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	if cfg.MinUploadRate.Rate == 0 {
		cfg.MinUploadRate.Rate = DefaultMinUploadRate
	}
	if cfg.MinUploadRate.Grace <= 0 {
		cfg.MinUploadRate.Grace = DefaultMinUploadGrace
	}
	cfg.HTTP = cfg.HTTP.Or(httpserve.Limits{ReadHeaderTimeout: DefaultReadHeaderTimeout, ReadTimeout: DefaultReadTimeout,
		WriteTimeout: DefaultWriteTimeout, IdleTimeout: DefaultIdleTimeout, MaxHeaderBytes: DefaultMaxHeaderBytes})
	if cfg.HTTP.WriteTimeout <= cfg.ResponseTimeout {
		// Otherwise a slow upstream's answer would be cut off unsent.
		return nil, fmt.Errorf("write timeout %s must be longer than the response timeout %s", cfg.HTTP.WriteTimeout, cfg.ResponseTimeout)
	}
	g := &Gateway{cfg: cfg, log: log, checker: httpserve.NewChecker(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "cms", Subsystem: "gateway", Name: "requests_total",
			Help: "Requests passed on, by upstream and status code (503 when the upstream could not be reached).",
		}, []string{"upstream", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "cms", Subsystem: "gateway", Name: "request_duration_seconds",
			Help:    "Time to answer requests through the gateway, by upstream.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"upstream"}),
	}
	reg := httpserve.NewRegistry(g.requests, g.latency)
	g.ingestMetrics, g.apiMetrics = newUpstreamMetrics(g, upstreamIngest), newUpstreamMetrics(g, upstreamAPI)
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	if cfg.SourceAddr.IsValid() {
		dialer.LocalAddr = &net.TCPAddr{IP: cfg.SourceAddr.Unmap().AsSlice()}
	}
	transport := &http.Transport{
		DialContext:           dialer.DialContext,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   128,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: cfg.ResponseTimeout,
		// Bodies pass through as sent: gzip batches stay gzip.
		DisableCompression: true,
		// Room for a request and a whole body of wholeBodies, so that
		// they go in one write.
		WriteBufferSize: wholeBodyMax + 4<<10,
	}
	rt := &wholeBodies{rt: transport, budget: wholeBodyBudget}
	g.copyBuffers = &bufferPool{p: sync.Pool{New: func() any { return new([copyBufferSize]byte) }}}
	for _, u := range []struct {
		name, raw string
		proxy     **httputil.ReverseProxy
	}{{upstreamIngest, cfg.Ingest, &g.ingest}, {upstreamAPI, cfg.API, &g.api}} {
		target, err := url.Parse(u.raw)
		if err != nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
			return nil, fmt.Errorf("%s upstream %q: want http://host:port", u.name, u.raw)
		}
		*u.proxy = g.proxy(u.name, target, rt)
		g.checker.Add(u.name, upstreamReady(transport, target.JoinPath("/readyz").String()))
	}
	g.mux = http.NewServeMux()
	httpserve.Mount(httpserve.GetOn(g.mux), reg, g.checker)
	g.mux.Handle("/", http.HandlerFunc(g.route))
	g.handler = cfg.CORS.Handler(g.mux)
	g.server = httpserve.NewServer(g.handler, cfg.HTTP, log)
	g.stopping = make(chan struct{})
	g.server.RegisterOnShutdown(func() { close(g.stopping) })
	return g, nil
}

func (g *Gateway) proxy(name string, target *url.URL, transport http.RoundTripper) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			if len(g.cfg.TrustedProxies) > 0 && clientnet.Trusted(r.In.RemoteAddr, g.cfg.TrustedProxies) {
				// Appended to, as a proxy in a chain does.
				r.Out.Header["X-Forwarded-For"] = r.In.Header["X-Forwarded-For"]
			}
			r.SetXForwarded()
			// The client's Host is kept: upstreams log what was called.
			r.Out.Host = r.In.Host
			if g.cfg.CORS.Enabled() {
				// The gateway's policy is the one stated (see Config.CORS).
				r.Out.Header.Del("Origin")
			}
		},
		Transport: transport,
		// An upstream that answers after the client's body failed is
		// answering the truncated body it was sent (its own read timeout
		// may fire first); the client hears why instead.
		ModifyResponse: func(resp *http.Response) error {
			sw, ok := resp.Request.Context().Value(callKey{}).(*clientAnswer)
			if !ok {
				return nil
			}
			if isEventStream(resp.Header.Get("Content-Type")) {
				sw.stream(g.stopping)
			} else {
				sw.holdHeaders = resp.ContentLength >= 0
			}
			if sw.body != nil {
				if err := sw.body.failure(); err != nil {
					return fmt.Errorf("client request body: %w", err)
				}
			}
			return nil
		},
		// Event responses are small; streaming anything else at once
		// keeps long answers flowing.
		FlushInterval: -1,
		// Without a pool, every answer would allocate a copy buffer of
		// its own: most of what the gateway allocated, and of its
		// garbage collection.
		BufferPool: g.copyBuffers,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if sw, ok := r.Context().Value(callKey{}).(*clientAnswer); ok && sw.body != nil {
				if berr := sw.body.failure(); berr != nil {
					// The client's fault: told so in the error shape, not
					// answered as a client gone away (499, no body) or an
					// unreachable upstream (503, inviting a retry).
					g.clientBodyError(w, r, berr)
					return
				}
			}
			if errors.Is(err, context.Canceled) {
				// The client went away; nobody reads an answer.
				w.WriteHeader(499)
				return
			}
			g.log.Warn("upstream unreachable", "upstream", name, "method", r.Method, "path", r.URL.Path, "err", err)
			// 503 with Retry-After: the reference client retries, and
			// ingest never claimed the batch.
			httpserve.RetryAfter(w, 1)
			httpserve.Error(w, http.StatusServiceUnavailable, "", "The "+name+" service cannot be reached; retry shortly.")
		},
	}
}

// upstreamReady checks an upstream's readiness endpoint.
func upstreamReady(rt http.RoundTripper, readyURL string) httpserve.Check {
	client := &http.Client{Transport: rt, Timeout: 2 * time.Second}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, readyURL, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered %d", readyURL, resp.StatusCode)
		}
		return nil
	}
}

// clientAnswer is the answer to the client: it remembers the status code
// written, holds the headers of an answer of known length until its body,
// and gives each write of a stream of events (text/event-stream), which
// lasts as long as its client and the upstream keep it, a write timeout of
// its own rather than one for the whole answer; the gateway's shutdown
// ends a stream.
type clientAnswer struct {
	http.ResponseWriter
	code int
	// writeTimeout bounds one write of a stream.
	writeTimeout time.Duration
	// ctx is the request's upstream; cancel ends it.
	ctx       context.Context
	cancel    context.CancelFunc
	streaming bool
	// holdHeaders is set for an answer of known length: its headers
	// are not flushed before its body, so that they go in one write.
	holdHeaders bool
	// wrote is set once some of the answer's body is written.
	wrote bool
	// body is the client's request body, nil without one.
	body *clientBody
}

// callKey is the context key of a request's *clientAnswer, which
// ModifyResponse and ErrorHandler reach through the upstream request.
type callKey struct{}

// bufferPool lends ReverseProxy the buffers it copies answers with.
type bufferPool struct{ p sync.Pool }

// copyBufferSize is the size of ReverseProxy's own buffers.
const copyBufferSize = 32 << 10

func (b *bufferPool) Get() []byte { return b.p.Get().(*[copyBufferSize]byte)[:] }

func (b *bufferPool) Put(buf []byte) {
	if cap(buf) == copyBufferSize {
		b.p.Put((*[copyBufferSize]byte)(buf[:copyBufferSize]))
	}
}

// isEventStream reports whether a Content-Type is text/event-stream.
func isEventStream(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "text/event-stream")
}

// stream makes the answer a stream: no read deadline (it would end the
// request's context as net/http reads on for the client going away), a
// write deadline per write, and an end when stopping closes.
func (s *clientAnswer) stream(stopping <-chan struct{}) {
	s.streaming = true
	_ = http.NewResponseController(s.ResponseWriter).SetReadDeadline(time.Time{})
	ctx, cancel := s.ctx, s.cancel
	go func() {
		select {
		case <-stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
}

func (s *clientAnswer) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *clientAnswer) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	if s.streaming {
		_ = http.NewResponseController(s.ResponseWriter).SetWriteDeadline(time.Now().Add(s.writeTimeout))
	}
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

// FlushError flushes, except an answer's headers alone when its body is
// of known length. ReverseProxy, flushing at once (FlushInterval -1),
// also flushes the headers on a timer of its own as it starts copying the
// body; when the timer wins, the answer costs two writes (and the client
// two reads) instead of one, the body following at once. ReverseProxy
// calls this and Write under one lock.
func (s *clientAnswer) FlushError() error {
	if s.holdHeaders && !s.wrote {
		return nil
	}
	return http.NewResponseController(s.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection (flushes).
func (s *clientAnswer) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// clientBody remembers why reading a client's request body failed, so
// that the failure is answered as the client's rather than as an
// unreachable upstream. The transport reads the body on a goroutine of
// its own, hence the lock.
type clientBody struct {
	io.ReadCloser
	mu  sync.Mutex
	err error
}

func (b *clientBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		b.mu.Lock()
		if b.err == nil {
			b.err = err
		}
		b.mu.Unlock()
	}
	return n, err
}

func (b *clientBody) failure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// clientBodyError answers a request whose body could not be read: 408
// when it arrived slower than the minimum upload rate (in ingest's words)
// or not within the read timeout, 400 otherwise.
func (g *Gateway) clientBodyError(w http.ResponseWriter, r *http.Request, err error) {
	g.log.Info("request body not received", "method", r.Method, "path", r.URL.Path, "err", err)
	w.Header().Set("Connection", "close")
	var slow *httpserve.SlowBodyError
	if errors.As(err, &slow) {
		httpserve.Error(w, http.StatusRequestTimeout, "", slow.Error())
		return
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		httpserve.Error(w, http.StatusRequestTimeout, "", "The request body did not arrive within "+g.cfg.HTTP.ReadTimeout.String()+".")
		return
	}
	httpserve.Error(w, http.StatusBadRequest, "", "The request body could not be read.")
}

func (g *Gateway) route(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	proxy, m := g.api, g.apiMetrics
	events := IsEventsPath(r.URL.Path)
	if events {
		proxy, m = g.ingest, g.ingestMetrics
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	sw := &clientAnswer{ResponseWriter: w, writeTimeout: g.cfg.HTTP.WriteTimeout, ctx: ctx, cancel: cancel}
	// One copy of the request, for its context: the proxy clones it again.
	r = r.WithContext(context.WithValue(ctx, callKey{}, sw))
	if r.Body != nil && r.Body != http.NoBody {
		src := r.Body
		if events && g.cfg.MinUploadRate.Enabled() {
			// Until the proxy is done: after an upstream's early answer
			// its transport may still be waiting on the client's body.
			paced := g.cfg.MinUploadRate.Watch(w, r.Body)
			defer paced.Stop()
			src = paced
		}
		sw.body = &clientBody{ReadCloser: src}
		r.Body = sw.body
	}
	proxy.ServeHTTP(sw, r)
	m.answered(sw.code, time.Since(start))
}

// clientPaths answers 404 itself to every path but /cms/..., the health
// endpoints, the REST contract (/openapi.yaml, which runtime teams read)
// and the gateway's own /metrics, which httpserve keeps on the operator
// listener: whatever else an upstream serves (/status, /analytics) is for
// operators, who call the upstream's operator address.
func clientPaths(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if strings.HasPrefix(p, "/cms/") || httpserve.IsHealthPath(p) || p == openapi.Path || p == "/metrics" {
			h.ServeHTTP(w, r)
			return
		}
		httpserve.Error(w, http.StatusNotFound, "", "The gateway serves no "+p+": clients call /cms/... paths.")
	})
}

// Handler is the gateway's HTTP handler, for tests and embedding.
func (g *Gateway) Handler() http.Handler { return g.handler }

// Serve answers on ln until ctx ends, then drains requests in flight.
// When ln carries an operator listener, the client listener answers only
// /cms paths and health, and the gateway's metrics answer on the operator
// one.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener) error {
	if httpserve.OperatorOf(ln) != nil {
		g.server.Handler = clientPaths(g.server.Handler)
	}
	if err := httpserve.Serve(ctx, g.log, "gateway", g.server, ln, g.checker, g.cfg.ShutdownTimeout, "ingest", g.cfg.Ingest, "api", g.cfg.API); err != nil {
		return err
	}
	g.log.Info("gateway stopped")
	return nil
}

// upstreamMetrics are an upstream's series, looked up once rather than by
// their labels on every request.
type upstreamMetrics struct {
	name     string
	requests *prometheus.CounterVec
	latency  prometheus.Observer
	// byCode holds the counters of the status codes seen so far.
	byCode [600]atomic.Pointer[codeCounter]
}

type codeCounter struct{ prometheus.Counter }

func newUpstreamMetrics(g *Gateway, name string) *upstreamMetrics {
	return &upstreamMetrics{name: name, requests: g.requests, latency: g.latency.WithLabelValues(name)}
}

// answered counts a request answered with code after d.
func (m *upstreamMetrics) answered(code int, d time.Duration) {
	m.latency.Observe(d.Seconds())
	if code < 0 || code >= len(m.byCode) {
		m.requests.WithLabelValues(m.name, strconv.Itoa(code)).Inc()
		return
	}
	c := m.byCode[code].Load()
	if c == nil {
		c = &codeCounter{m.requests.WithLabelValues(m.name, strconv.Itoa(code))}
		m.byCode[code].Store(c)
	}
	c.Inc()
}

// wholeBodyMax is the largest request body wholeBodies reads before
// sending.
const wholeBodyMax = 64 << 10

// wholeBodyBudget bounds the memory of the bodies wholeBodies holds at
// once: many clients sending slowly, each within the minimum upload rate,
// would otherwise hold wholeBodyMax each. Past it, bodies stream as they
// come.
const wholeBodyBudget = 16 << 20

// wholeBodies sends a request body of known length up to wholeBodyMax
// with its headers, in one write. Over HTTP/1 net/http writes the headers
// first, on their own, and then the body as it is read, unless the body
// is one it knows to be in memory; ReverseProxy's body never is. A body
// that fails to arrive fails the request before it reaches the upstream.
type wholeBodies struct {
	rt     http.RoundTripper
	budget int64
	held   atomic.Int64
}

func (t *wholeBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	n := req.ContentLength
	if req.Body == nil || req.Body == http.NoBody || n <= 0 || n > wholeBodyMax {
		return t.rt.RoundTrip(req)
	}
	if t.held.Add(n) > t.budget {
		t.held.Add(-n)
		return t.rt.RoundTrip(req)
	}
	defer t.held.Add(-n)
	buf := make([]byte, n)
	_, err := io.ReadFull(req.Body, buf)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	out := *req
	out.Body = io.NopCloser(bytes.NewReader(buf))
	return t.rt.RoundTrip(&out)
}
