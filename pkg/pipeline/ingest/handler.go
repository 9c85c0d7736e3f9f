// Package ingest serves PUT /cms/app/events: it authenticates a batch,
// validates its events and answers only after the broker has acknowledged
// every record it accepted.
package ingest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/edge/ratelimit"
	"github.com/assistantcms/cms/pkg/pipeline/event"
)

// Publisher stores records durably; it returns nil only once the broker has
// acknowledged all of them.
type Publisher interface {
	Publish(ctx context.Context, accepted, quarantined []event.Message) error
}

// Authenticator checks tokens and decides which app a request acts for.
type Authenticator interface {
	Authenticate(ctx context.Context, h http.Header) (auth.Principal, error)
	Resolve(ctx context.Context, p auth.Principal, appIDParam string) (auth.Target, error)
}

// Config holds the handler's limits.
type Config struct {
	// MaxBodyBytes caps the body as sent on the wire.
	MaxBodyBytes int64
	// MaxDecompressedBytes caps a gzip body once decompressed.
	MaxDecompressedBytes int64
	// ProduceTimeout bounds the wait for the broker's acknowledgement.
	ProduceTimeout time.Duration
	// MaxInFlight bounds requests handled at once; more get 503.
	MaxInFlight int
	// MaxInFlightPerToken bounds the requests of one token handled at
	// once, so that one client (slow bodies, say) cannot take every slot
	// from the others; more get 429. Zero means half of MaxInFlight.
	MaxInFlightPerToken int
	// TrustedProxies are the peers whose X-Forwarded-For names the client
	// whose network envelopes record (see ClientNetwork); none when empty.
	TrustedProxies []netip.Prefix
	// MaxBodyMemory bounds the memory all requests' bodies, and the
	// records built from them, hold at once: MemoryPerBodyByte for every
	// body byte beyond the first BodyAllowance of each, which small
	// batches never pass. A request that would exceed it gets 503. It
	// keeps concurrent large bodies, and gzip bombs decompressing to
	// MaxDecompressedBytes, from exhausting memory.
	MaxBodyMemory int64
}

// Defaults for Config: bodies of a runtime's knowledge-base turns, and of
// batches a runtime grew while the service was out of reach, fit.
const (
	DefaultMaxBodyBytes         = 10 << 20
	DefaultMaxDecompressedBytes = 64 << 20
	DefaultProduceTimeout       = 5 * time.Second
	DefaultMaxInFlight          = 256
	DefaultMaxBodyMemory        = 256 << 20
	// BodyAllowance is the part of each body MaxBodyMemory does not count.
	BodyAllowance = 64 << 10
	// MemoryPerBodyByte is what a body byte costs until its answer: the
	// body, the validator's record of where its values lie (about one
	// byte per body byte) and the records built from it.
	MemoryPerBodyByte    = 3
	maxIdempotencyKeyLen = 256
)

func (c Config) withDefaults() Config {
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxDecompressedBytes <= 0 {
		c.MaxDecompressedBytes = DefaultMaxDecompressedBytes
	}
	if c.ProduceTimeout <= 0 {
		c.ProduceTimeout = DefaultProduceTimeout
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxInFlightPerToken <= 0 {
		c.MaxInFlightPerToken = max(1, c.MaxInFlight/2)
	}
	if c.MaxBodyMemory <= 0 {
		c.MaxBodyMemory = DefaultMaxBodyMemory
	}
	return c
}

// check refuses limits under which the largest body allowed could never
// be admitted: it would get 503, and a client retrying it would never
// get through.
func (c Config) check() error {
	c = c.withDefaults()
	for _, l := range []struct {
		name string
		n    int64
	}{{"MAX_BODY_BYTES", c.MaxBodyBytes}, {"MAX_DECOMPRESSED_BYTES", c.MaxDecompressedBytes}} {
		if need := (l.n - BodyAllowance) * MemoryPerBodyByte; need > c.MaxBodyMemory {
			return fmt.Errorf("MAX_BODY_MEMORY %d cannot hold a body of %s %d (%d bytes with the records built from it); raise it or lower %s",
				c.MaxBodyMemory, l.name, l.n, need, l.name)
		}
	}
	return nil
}

// Handler serves the events endpoint.
type Handler struct {
	cfg       Config
	validator *event.Validator
	auth      Authenticator
	pub       Publisher
	limiter   *ratelimit.Limiter
	metrics   *Metrics
	log       *slog.Logger
	now       func() time.Time
	admission *Admission
	bufs      sync.Pool
	gzips     sync.Pool
}

// New returns a Handler. limiter may be nil (no per-token limit).
func New(cfg Config, v *event.Validator, a Authenticator, p Publisher, limiter *ratelimit.Limiter, m *Metrics, log *slog.Logger) *Handler {
	cfg = cfg.withDefaults()
	return &Handler{
		cfg: cfg, validator: v, auth: a, pub: p, limiter: limiter, metrics: m, log: log,
		now:       time.Now,
		admission: NewAdmission(cfg.MaxInFlight, cfg.MaxInFlightPerToken, cfg.MaxBodyMemory),
		bufs:      sync.Pool{New: func() any { return new(bytes.Buffer) }},
	}
}

// Register adds the handler's routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	// The interface names both spellings of the path.
	for _, r := range [...]string{"/cms/app/events", "/cms/apps/events"} {
		mux.Handle(r, h)
	}
}

// response is the body of a 200 or 422 answer.
type response struct {
	Accepted int                `json:"accepted"`
	Rejected int                `json:"rejected"`
	Errors   []event.FieldError `json:"errors"`
	Message  string             `json:"message,omitempty"`
}

// statusWriter remembers the status for metrics and logs.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (h *Handler) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	start := h.now()
	h.metrics.inFlight.Inc()
	w := &statusWriter{ResponseWriter: rw, status: http.StatusOK}
	route := r.URL.Path
	defer func() {
		h.metrics.inFlight.Dec()
		h.metrics.requests.WithLabelValues(route, strconv.Itoa(w.status)).Inc()
		h.metrics.duration.WithLabelValues(route).Observe(h.now().Sub(start).Seconds())
	}()
	h.serve(w, r)
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut {
		w.Header().Set("Allow", http.MethodPut)
		httpserve.Error(w, http.StatusMethodNotAllowed, "", "method "+r.Method+" is not allowed; use PUT")
		return
	}
	ctx := r.Context()
	principal, err := h.auth.Authenticate(ctx, r.Header)
	if err != nil {
		h.authError(w, r, err)
		return
	}
	query := r.URL.Query()
	target, err := h.auth.Resolve(ctx, principal, query.Get("appId"))
	if err != nil {
		h.authError(w, r, err)
		return
	}
	if ok, wait := h.limiter.Allow(target.TokenID); !ok {
		httpserve.RetryAfter(w, wait.Seconds())
		httpserve.Error(w, http.StatusTooManyRequests, "", "rate limit of this token exceeded; retry later")
		return
	}
	strict, err := parseStrict(query.Get("strict"))
	if err != nil {
		httpserve.Error(w, http.StatusBadRequest, "strict", err.Error())
		return
	}
	pass, err := h.admission.Enter(target.TokenID)
	switch {
	case errors.Is(err, ErrTokenBusy):
		httpserve.RetryAfter(w, 1)
		httpserve.Error(w, http.StatusTooManyRequests, "", fmt.Sprintf(
			"this token already has %d requests in flight, its share of the server; retry later", h.admission.PerToken()))
		return
	case err != nil:
		httpserve.RetryAfter(w, 1)
		httpserve.Error(w, http.StatusServiceUnavailable, "", "the server is at capacity; retry later")
		return
	}
	// Released once the body and the records built from it are let go.
	defer pass.Release()
	if status, field, msg := checkHeaders(r); status != 0 {
		httpserve.Error(w, status, field, msg)
		return
	}

	buf := h.bufs.Get().(*bytes.Buffer)
	defer h.putBuf(buf)
	if status, msg := h.readBody(r, buf, &pass); status != 0 {
		if status == http.StatusServiceUnavailable {
			httpserve.RetryAfter(w, 1)
		}
		httpserve.Error(w, status, "", msg)
		return
	}
	body := buf.Bytes()

	meta := event.Meta{AppID: target.AppID, OrganizationID: target.OrganizationID, ReceivedAt: h.now(),
		TokenID: target.TokenID, ClientNetwork: ClientNetwork(r, h.cfg.TrustedProxies)}
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		meta.IDSeed = "key:" + key
	} else {
		sum := xxh3.Hash128(body).Bytes()
		meta.IDSeed = "body:" + hex.EncodeToString(sum[:])
	}
	res, err := h.validator.ProcessBatch(body, meta)
	if err != nil {
		var be *event.BatchError
		if errors.As(err, &be) {
			httpserve.Error(w, batchStatus(be.Kind), be.Field, be.Message)
			return
		}
		httpserve.Error(w, http.StatusInternalServerError, "", "batch could not be processed")
		return
	}
	resp := response{Accepted: len(res.Accepted), Rejected: len(res.Quarantined), Errors: res.Errors}
	if resp.Errors == nil {
		resp.Errors = []event.FieldError{}
	}
	if strict && resp.Rejected > 0 {
		res.Release()
		resp.Accepted = 0
		resp.Message = "strict mode: the batch holds invalid events, so none was stored"
		httpserve.WriteJSON(w, http.StatusUnprocessableEntity, resp)
		return
	}

	// The batch is stored whole even if the client goes away meanwhile:
	// net/http cancels the request's context when a client half-closes its
	// connection, which some clients do right after sending, and a batch
	// cut off mid-publish would be stored in part. The produce timeout
	// still bounds the wait.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.ProduceTimeout)
	defer cancel()
	pstart := h.now()
	err = h.pub.Publish(pctx, res.Accepted, res.Quarantined)
	if err != nil {
		h.metrics.produceLatency.WithLabelValues("error").Observe(h.now().Sub(pstart).Seconds())
		h.log.LogAttrs(ctx, slog.LevelWarn, "publish failed", slog.String("app", target.AppID),
			slog.Int("events", len(res.Accepted)+len(res.Quarantined)), slog.Any("err", err))
		httpserve.RetryAfter(w, 1)
		httpserve.Error(w, http.StatusServiceUnavailable, "", "the events could not be stored (the broker did not acknowledge them); retry the batch")
		return
	}
	// The broker holds the records now; the buffer can serve another batch.
	// After a failure it is left to the garbage collector instead, as the
	// producer may still be sending from it.
	res.Release()
	h.metrics.produceLatency.WithLabelValues("ok").Observe(h.now().Sub(pstart).Seconds())
	h.metrics.batchSize.Observe(float64(resp.Accepted + resp.Rejected))
	h.metrics.events.WithLabelValues("accepted").Add(float64(resp.Accepted))
	if resp.Rejected > 0 {
		h.metrics.events.WithLabelValues("rejected").Add(float64(resp.Rejected))
		last := -1
		for _, e := range res.Errors {
			if e.Index != last { // one count per event, by its first error
				h.metrics.rejected.WithLabelValues(e.Reason, fieldLabel(e.Field)).Inc()
				last = e.Index
			}
		}
	}
	httpserve.WriteJSON(w, http.StatusOK, resp)
}

func (h *Handler) authError(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := http.StatusInternalServerError, "authentication failed"
	var ae *auth.Error
	if errors.As(err, &ae) {
		status, msg = httpserve.AuthStatus(ae.Kind), ae.Message
	}
	if status >= 500 {
		h.log.LogAttrs(r.Context(), slog.LevelError, "authentication failed", slog.Any("err", err))
		httpserve.RetryAfter(w, 1)
	}
	httpserve.Error(w, status, "", msg)
}

// batchStatus is the HTTP status of a batch refused whole.
func batchStatus(k event.BatchErrorKind) int {
	if k == event.BatchTooLarge {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}

func parseStrict(v string) (bool, error) {
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("must be true or false, got %q", v)
	}
	return b, nil
}

// checkHeaders vets Content-Type, Content-Encoding and Idempotency-Key.
func checkHeaders(r *http.Request) (status int, field, msg string) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		// The interface's prose spells the type "application-json".
		if err != nil || (mt != "application/json" && mt != "application-json") {
			return http.StatusUnsupportedMediaType, "Content-Type", fmt.Sprintf("Content-Type %q is not supported; send application/json", ct)
		}
	}
	switch strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))) {
	case "", "identity", "gzip":
	default:
		return http.StatusUnsupportedMediaType, "Content-Encoding", fmt.Sprintf("Content-Encoding %q is not supported; send gzip or no encoding", r.Header.Get("Content-Encoding"))
	}
	if k := r.Header.Get("Idempotency-Key"); len(k) > maxIdempotencyKeyLen {
		return http.StatusBadRequest, "Idempotency-Key", fmt.Sprintf("must be at most %d bytes, got %d", maxIdempotencyKeyLen, len(k))
	}
	return 0, "", ""
}

// readBody reads the body into buf within the wire and decompressed
// limits, never reading more than one byte past a limit, counting what it
// holds against pass.
func (h *Handler) readBody(r *http.Request, buf *bytes.Buffer, pass *Pass) (status int, msg string) {
	tooLarge := fmt.Sprintf("body exceeds %d bytes", h.cfg.MaxBodyBytes)
	const tooSlow = "the body did not arrive within the server's read timeout"
	if r.ContentLength > h.cfg.MaxBodyBytes {
		return http.StatusRequestEntityTooLarge, tooLarge
	}
	wire := &countingReader{r: io.LimitReader(r.Body, h.cfg.MaxBodyBytes+1)}
	var src io.Reader = wire
	gz := strings.EqualFold(strings.TrimSpace(r.Header.Get("Content-Encoding")), "gzip")
	if gz {
		zr, err := h.gzipReader(wire)
		if err != nil {
			if isTimeout(wire.err) {
				return http.StatusRequestTimeout, tooSlow
			}
			if wire.n > h.cfg.MaxBodyBytes {
				return http.StatusRequestEntityTooLarge, tooLarge
			}
			return http.StatusBadRequest, "body is not valid gzip: " + err.Error()
		}
		defer h.gzips.Put(zr)
		src = io.LimitReader(zr, h.cfg.MaxDecompressedBytes+1)
	}
	_, err := buf.ReadFrom(pass.Body(src))
	switch {
	case errors.Is(err, ErrBodyMemory):
		return http.StatusServiceUnavailable, "the server is at capacity (memory for request bodies); retry later"
	case isTimeout(wire.err):
		// The server's read timeout cut off a client that sent too slowly.
		return http.StatusRequestTimeout, tooSlow
	case wire.n > h.cfg.MaxBodyBytes:
		return http.StatusRequestEntityTooLarge, tooLarge
	case gz && int64(buf.Len()) > h.cfg.MaxDecompressedBytes:
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("decompressed body exceeds %d bytes", h.cfg.MaxDecompressedBytes)
	case err == nil:
		return 0, ""
	case gz && (wire.err == nil || wire.err == io.EOF):
		// The wire was read cleanly, so the fault is in the gzip stream.
		return http.StatusBadRequest, "body is not valid gzip: " + err.Error()
	default:
		return http.StatusBadRequest, "body could not be read: " + err.Error()
	}
}

func (h *Handler) gzipReader(src io.Reader) (*gzip.Reader, error) {
	if zr, ok := h.gzips.Get().(*gzip.Reader); ok {
		if err := zr.Reset(src); err != nil {
			h.gzips.Put(zr)
			return nil, err
		}
		return zr, nil
	}
	return gzip.NewReader(src)
}

// maxPooledBuf keeps one huge body from pinning memory in the pool.
const maxPooledBuf = 1 << 20

func (h *Handler) putBuf(b *bytes.Buffer) {
	if b.Cap() > maxPooledBuf {
		return
	}
	b.Reset()
	h.bufs.Put(b)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// countingReader counts the bytes read from the wire.
type countingReader struct {
	r   io.Reader
	n   int64
	err error
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil {
		c.err = err
	}
	return n, err
}
