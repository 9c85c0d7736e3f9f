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
	"github.com/assistantcms/cms/pkg/auth/authhttp"
	"github.com/assistantcms/cms/pkg/edge/clientnet"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/pipeline/event"
	"github.com/assistantcms/cms/pkg/ratelimit"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// Publisher stores records durably; it returns nil only once the broker has
// acknowledged all of them.
type Publisher interface {
	Publish(ctx context.Context, accepted, quarantined []event.Record) error
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
	// MaxInFlightPerApp bounds the requests handled at once for one app
	// (the app a request acts for, whichever of its tokens, or its
	// organization's token, sent it), so that one tenant (slow bodies,
	// say) cannot take the slots from the others; more get 429. Zero
	// means a quarter of MaxInFlight.
	MaxInFlightPerApp int
	// MaxInFlightPerToken bounds the requests of one token handled at
	// once, whichever apps it acts for; more get 429. An app token's
	// requests are its app's too; this one bounds an organization token,
	// which is as public as an app's when a runtime holds it, over all
	// the apps it acts for, so that it can take no more than one app may.
	// Zero means MaxInFlightPerApp.
	MaxInFlightPerToken int
	// MaxInFlightPerOrg bounds the requests of one organization handled
	// at once, whichever of its tokens sent them; more get 429. Zero
	// means half of MaxInFlight, or MaxInFlightPerApp or
	// MaxInFlightPerToken if more.
	MaxInFlightPerOrg int
	// TrustedProxies are the peers whose X-Forwarded-For names the client
	// whose network envelopes record (see package clientnet); none when empty.
	TrustedProxies []netip.Prefix
	// MaxBodyMemory bounds the memory all requests' bodies, and the
	// records built from them, hold at once: MemoryPerBodyByte for every
	// body byte beyond the first BodyAllowance of each, which small
	// batches never pass, counted before the byte is read (decompressed,
	// for gzip). A request that would exceed it gets 503. It keeps
	// concurrent large bodies, and gzip bombs decompressing to
	// MaxDecompressedBytes, from exhausting memory.
	MaxBodyMemory int64
	// MaxBodyMemoryPerApp bounds what the bodies of one app's requests
	// hold of MaxBodyMemory; a body that would pass it gets 429. Zero
	// means a quarter of MaxBodyMemory, or what the largest body allowed
	// needs if that is more (see MemoryShareNote).
	MaxBodyMemoryPerApp int64
	// MaxBodyMemoryPerToken bounds what the bodies of one token's
	// requests hold of MaxBodyMemory, whichever apps it acts for, as
	// MaxInFlightPerToken bounds its slots; a body that would pass it
	// gets 429. Zero means MaxBodyMemoryPerApp.
	MaxBodyMemoryPerToken int64
	// MaxBodyMemoryPerOrg bounds what the bodies of one organization's
	// requests hold of MaxBodyMemory, whichever of its tokens sent them;
	// a body that would pass it gets 429. Zero means half of
	// MaxBodyMemory, or MaxBodyMemoryPerApp or MaxBodyMemoryPerToken if
	// more.
	MaxBodyMemoryPerOrg int64
	// MinUploadRate and MinUploadGrace pace request bodies: a body has
	// MinUploadGrace, plus a second for every MinUploadRate bytes
	// received on the wire, to arrive; one that falls behind is cut off
	// with 408 and gives back what it held at once, rather than at the
	// server's read timeout. Zero means the defaults; a negative rate
	// sets no minimum.
	MinUploadRate  int64
	MinUploadGrace time.Duration
	// EventRatePerToken and EventBurstPerToken bound the events one
	// token sends, whichever apps it acts for: a token bucket of
	// EventBurstPerToken refilled at EventRatePerToken a second, from
	// which each batch takes its events, all of them or none, before
	// they are validated and published; a batch that finds too few gets
	// 429 with Retry-After. The request rate limit counts requests
	// whatever they hold; this counts what they hold. EventRatePerApp
	// and EventBurstPerApp bound the events of one app, whichever of its
	// tokens, or its organization's, sent them; EventRatePerOrg and
	// EventBurstPerOrg those of one organization. Zero means the
	// defaults: DefaultEventRatePer*, and bursts of twice the most events
	// a batch may hold (four times for an organization); a negative rate
	// sets no limit. A burst must hold the largest batch allowed
	// (MAX_EVENTS), or that batch could never pass.
	EventRatePerToken, EventRatePerApp, EventRatePerOrg    float64
	EventBurstPerToken, EventBurstPerApp, EventBurstPerOrg int

	// maxEvents is the most events in a batch (the validator's limit):
	// what the shares of body memory and the event bursts must hold.
	maxEvents int
}

// Defaults for Config: bodies of a runtime's knowledge-base turns, and of
// batches a runtime grew while the service was out of reach, fit, and so
// does the largest body in a quarter of the body memory.
const (
	DefaultMaxBodyBytes         = 10 << 20
	DefaultMaxDecompressedBytes = 16 << 20
	DefaultProduceTimeout       = 5 * time.Second
	DefaultMaxInFlight          = 256
	DefaultMaxBodyMemory        = 256 << 20
	// DefaultMinUploadRate (128 kbit/s) cuts off only links slower than
	// any a runtime runs on, and a stalled body soon after its grace.
	DefaultMinUploadRate = 16 << 10
	// DefaultMinUploadGrace covers a connection's start and a short
	// network stall; a small batch arrives well within it.
	DefaultMinUploadGrace = 2 * time.Second
	// BodyAllowance is the part of each body MaxBodyMemory does not count.
	BodyAllowance = 64 << 10
	// MemoryPerBodyByte is what a body byte costs until its answer: the
	// body, the validator's record of where its values lie (about one
	// byte per body byte) and the records built from it.
	MemoryPerBodyByte = 3
	// gzipStateBytes is what a gzip decompressor holds: its 32 KiB window,
	// its Huffman tables and its 4 KiB read buffer.
	gzipStateBytes       = 48 << 10
	maxIdempotencyKeyLen = 256
	// DefaultMaxEvents is the most events in one batch (event's): that
	// many events and the largest body allowed, charged MemoryPerEvent and
	// MemoryPerBodyByte, fit in an app's default share of the body
	// memory.
	DefaultMaxEvents = event.DefaultMaxEvents
	// DefaultEventRatePerToken is twice what a token sends at the request
	// rate limit's 1,000 requests a second with a runtime turn's handful
	// of events (five). Its burst holds two of the largest batches.
	DefaultEventRatePerToken = 10_000
	// An app's default is a token's, as for the other shares; an
	// organization's, twice that, and so are their bursts.
	DefaultEventRatePerApp = DefaultEventRatePerToken
	DefaultEventRatePerOrg = 2 * DefaultEventRatePerToken
)

// bodyNeeds is the body memory a body of the limit holding events events
// needs, with the byte past it read to tell whether there is more (so
// that a larger body is told 413, not 429), and for gzip the
// decompressor's state.
func bodyNeeds(limit int64, events int, gz bool) int64 {
	n := (limit+1-BodyAllowance)*MemoryPerBodyByte + int64(events)*MemoryPerEvent
	if gz {
		n += gzipStateBytes
	}
	return max(n, 0)
}

// largestBody is the body memory the largest body allowed needs, with the
// most events a batch may hold.
func (c Config) largestBody() int64 {
	return max(bodyNeeds(c.MaxBodyBytes, c.maxEvents, false), bodyNeeds(c.MaxDecompressedBytes, c.maxEvents, true))
}

// WithMaxEvents returns c for batches of at most n events (the
// validator's limit), which the body memory shares and the event bursts
// must hold.
func (c Config) WithMaxEvents(n int) Config {
	c.maxEvents = n
	return c
}

func (c Config) withDefaults() Config {
	if c.maxEvents <= 0 {
		c.maxEvents = DefaultMaxEvents
	}
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
	if c.MaxInFlightPerApp <= 0 {
		c.MaxInFlightPerApp = max(1, c.MaxInFlight/4)
	}
	// A token is no more trusted than an app: an organization token a
	// runtime holds is as public as an app's. An organization keeps half
	// of the server, so that whatever its tokens do, the others keep the
	// other half, and it still gets more than one app's share for its
	// several apps.
	if c.MaxInFlightPerToken <= 0 {
		c.MaxInFlightPerToken = c.MaxInFlightPerApp
	}
	if c.MaxInFlightPerOrg <= 0 {
		c.MaxInFlightPerOrg = max(c.MaxInFlight/2, c.MaxInFlightPerApp, c.MaxInFlightPerToken)
	}
	if c.MaxBodyMemory <= 0 {
		c.MaxBodyMemory = DefaultMaxBodyMemory
	}
	if c.MaxBodyMemoryPerApp <= 0 {
		c.MaxBodyMemoryPerApp = max(c.MaxBodyMemory/4, min(c.largestBody(), c.MaxBodyMemory))
	}
	if c.MaxBodyMemoryPerToken <= 0 {
		c.MaxBodyMemoryPerToken = c.MaxBodyMemoryPerApp
	}
	if c.MaxBodyMemoryPerOrg <= 0 {
		c.MaxBodyMemoryPerOrg = max(c.MaxBodyMemory/2, c.MaxBodyMemoryPerApp, c.MaxBodyMemoryPerToken)
	}
	if c.MinUploadRate == 0 {
		c.MinUploadRate = DefaultMinUploadRate
	}
	if c.MinUploadGrace <= 0 {
		c.MinUploadGrace = DefaultMinUploadGrace
	}
	for _, r := range c.eventRates() {
		if *r.rate == 0 {
			*r.rate = r.defRate
		}
		if *r.burst <= 0 {
			*r.burst = r.bursts * c.maxEvents
		}
	}
	return c
}

// eventRate is one of the event rate limits of a Config, for the loops
// that complete, check and apply them.
type eventRate struct {
	rate    *float64
	burst   *int
	defRate float64
	// bursts is the default burst in batches of the most events.
	bursts            int
	rateEnv, burstEnv string
}

func (c *Config) eventRates() [3]eventRate {
	return [...]eventRate{
		{&c.EventRatePerToken, &c.EventBurstPerToken, DefaultEventRatePerToken, 2, "EVENT_RATE_PER_TOKEN", "EVENT_BURST_PER_TOKEN"},
		{&c.EventRatePerApp, &c.EventBurstPerApp, DefaultEventRatePerApp, 2, "EVENT_RATE_PER_APP", "EVENT_BURST_PER_APP"},
		{&c.EventRatePerOrg, &c.EventBurstPerOrg, DefaultEventRatePerOrg, 4, "EVENT_RATE_PER_ORG", "EVENT_BURST_PER_ORG"},
	}
}

// check refuses limits under which the largest body allowed could never
// be admitted: it would get 503 or 429, and a client retrying it (as the
// reference client does until it gets a 200) would never get through.
func (c Config) check() error {
	c = c.withDefaults()
	for _, b := range []struct {
		name string
		n    int64
	}{{"MAX_BODY_MEMORY", c.MaxBodyMemory}, {"MAX_BODY_MEMORY_PER_APP", c.MaxBodyMemoryPerApp},
		{"MAX_BODY_MEMORY_PER_TOKEN", c.MaxBodyMemoryPerToken}, {"MAX_BODY_MEMORY_PER_ORG", c.MaxBodyMemoryPerOrg}} {
		for _, l := range []struct {
			name string
			n    int64
			need int64
		}{
			{"MAX_BODY_BYTES", c.MaxBodyBytes, bodyNeeds(c.MaxBodyBytes, c.maxEvents, false)},
			{"MAX_DECOMPRESSED_BYTES", c.MaxDecompressedBytes, bodyNeeds(c.MaxDecompressedBytes, c.maxEvents, true)},
		} {
			if l.need > b.n {
				return fmt.Errorf("%s %d cannot hold a body of %s %d of MAX_EVENTS %d events (%d bytes with the records built from it); raise it or lower %s or MAX_EVENTS",
					b.name, b.n, l.name, l.n, c.maxEvents, l.need, l.name)
			}
		}
	}
	for _, r := range c.eventRates() {
		if *r.rate > 0 && *r.burst < c.maxEvents {
			return fmt.Errorf("%s %d cannot hold a batch of MAX_EVENTS %d events, which would never pass; raise it or lower MAX_EVENTS",
				r.burstEnv, *r.burst, c.maxEvents)
		}
	}
	return nil
}

// MemoryShareNote says, when the default share of body memory for each
// app had to be raised past a quarter of MaxBodyMemory to hold the
// largest body, what that leaves the other apps; empty otherwise.
func (c Config) MemoryShareNote() string {
	if c.MaxBodyMemoryPerApp > 0 {
		return ""
	}
	c = c.withDefaults()
	if c.MaxBodyMemoryPerApp <= c.MaxBodyMemory/4 {
		return ""
	}
	return fmt.Sprintf("each app, and each token, may hold %d of the %d bytes of MAX_BODY_MEMORY, more than a quarter, as the largest body allowed, with MAX_EVENTS events, needs that much; "+
		"lower MAX_DECOMPRESSED_BYTES, MAX_BODY_BYTES or MAX_EVENTS, or raise MAX_BODY_MEMORY, to leave the other apps more", c.MaxBodyMemoryPerApp, c.MaxBodyMemory)
}

// Handler serves the events endpoint.
type Handler struct {
	cfg       Config
	validator *event.Validator
	auth      authhttp.Authenticator
	pub       Publisher
	limiter   *ratelimit.Limiter
	// events are the event rate limits by token, app and organization,
	// in the order they are checked; nil when off.
	events    [3]*ratelimit.Limiter
	maxEvents int
	metrics   *Metrics
	log       *slog.Logger
	now       func() time.Time
	admission *Admission
	pace      httpserve.MinUploadRate
	bufs      sync.Pool
	gzips     sync.Pool
	tooLarge  string // the 413's message, made once
}

// New returns a Handler. limiter may be nil (no per-token limit).
func New(cfg Config, v *event.Validator, a authhttp.Authenticator, p Publisher, limiter *ratelimit.Limiter, m *Metrics, log *slog.Logger) *Handler {
	cfg.maxEvents = v.Limits().MaxEvents
	cfg = cfg.withDefaults()
	var events [3]*ratelimit.Limiter
	for i, r := range cfg.eventRates() {
		events[i] = ratelimit.Optional(*r.rate, *r.burst)
	}
	shares := Shares{Slots: cfg.MaxInFlight, SlotsPerApp: cfg.MaxInFlightPerApp, SlotsPerToken: cfg.MaxInFlightPerToken, SlotsPerOrg: cfg.MaxInFlightPerOrg,
		Memory: cfg.MaxBodyMemory, MemoryPerApp: cfg.MaxBodyMemoryPerApp, MemoryPerToken: cfg.MaxBodyMemoryPerToken, MemoryPerOrg: cfg.MaxBodyMemoryPerOrg}
	return &Handler{
		cfg: cfg, validator: v, auth: a, pub: p, limiter: limiter, metrics: m, log: log,
		events: events, maxEvents: cfg.maxEvents,
		now:       time.Now,
		admission: NewAdmission(shares),
		pace:      httpserve.MinUploadRate{Rate: cfg.MinUploadRate, Grace: cfg.MinUploadGrace},
		bufs:      sync.Pool{New: func() any { return new(bytes.Buffer) }},
		tooLarge:  fmt.Sprintf("body exceeds %d bytes", cfg.MaxBodyBytes),
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

// Unwrap lets http.ResponseController reach the connection, which cuts
// off a body that arrives too slowly.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (h *Handler) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	start := h.now()
	h.metrics.inFlight.Inc()
	w := &statusWriter{ResponseWriter: rw, status: http.StatusOK}
	// Labels come from a fixed set: a path is one of the two the handler
	// is registered for, whatever the request says.
	route := "other"
	if r.URL.Path == "/cms/app/events" || r.URL.Path == "/cms/apps/events" {
		route = r.URL.Path
	}
	defer func() {
		h.metrics.inFlight.Dec()
		h.metrics.requests.WithLabelValues(route, strconv.Itoa(w.status)).Inc()
		h.metrics.duration.WithLabelValues(route).Observe(h.now().Sub(start).Seconds())
	}()
	h.serve(w, r)
}

// serve handles one request in steps: authorize it, admit it within the
// budgets, read its body, validate the batch, publish the records and
// record what became of the events. Each step answers the request itself
// when it ends it.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	ctx, req, ok := h.authorize(w, r)
	if !ok {
		return
	}
	pass, ok := h.admit(w, r, req.target)
	if !ok {
		return
	}
	// Released once the body and the records built from it are let go.
	defer pass.Release()

	buf := h.bufs.Get().(*bytes.Buffer)
	defer h.putBuf(buf)
	events, status, field, msg := h.readBody(w, r, buf, &pass, req.target)
	if status != 0 {
		httpserve.Error(w, status, field, msg)
		return
	}
	if !h.takeEvents(w, r, req.target, events) {
		return
	}
	res, resp, ok := h.validate(w, r, &req, buf.Bytes())
	if !ok {
		return
	}
	if !h.publish(ctx, w, req.target, res) {
		// Nothing was stored: the batch sent again is not charged twice.
		h.refundEvents(req.target, events)
		return
	}
	h.record(resp, res.Errors)
	httpserve.WriteJSON(w, http.StatusOK, resp)
}

// authorized is what authorize learned of a request.
type authorized struct {
	network string // the client's network, as envelopes record it
	target  auth.Target
	strict  bool // store nothing of a batch with invalid events
}

// authorize checks the method, the token, the app the request acts for,
// the token's rate and the query. It answers a request it refuses; the
// context it returns carries the client's network.
func (h *Handler) authorize(w http.ResponseWriter, r *http.Request) (context.Context, authorized, bool) {
	var req authorized
	if r.Method != http.MethodPut {
		w.Header().Set("Allow", http.MethodPut)
		httpserve.Error(w, http.StatusMethodNotAllowed, "", "method "+r.Method+" is not allowed; use PUT")
		return nil, req, false
	}
	req.network = clientnet.Of(r, h.cfg.TrustedProxies)
	ctx := auth.WithClientNetwork(r.Context(), req.network)
	principal, err := h.auth.Authenticate(ctx, r.Header)
	if err == nil {
		err = principal.Require(tenancy.EventsWrite, "sending events")
	}
	if err != nil {
		h.authError(w, r, err)
		return nil, req, false
	}
	query := r.URL.Query()
	if req.target, err = h.auth.Resolve(ctx, principal, query.Get("appId")); err != nil {
		h.authError(w, r, err)
		return nil, req, false
	}
	if ok, wait := h.limiter.Allow(req.target.TokenID); !ok {
		httpserve.RetryAfter(w, wait.Seconds())
		w.Header().Set("Connection", "close") // the body is not read, as in authError
		httpserve.Error(w, http.StatusTooManyRequests, "", "rate limit of this token exceeded; retry later")
		return nil, req, false
	}
	if req.strict, err = parseStrict(query.Get("strict")); err != nil {
		httpserve.Error(w, http.StatusBadRequest, "strict", err.Error())
		return nil, req, false
	}
	return ctx, req, true
}

// admit takes a request slot within the shares of target's organization,
// app and token, and vets the headers that say how to read the body. It
// answers a request it refuses.
func (h *Handler) admit(w http.ResponseWriter, r *http.Request, target auth.Target) (Pass, bool) {
	pass, err := h.admission.Enter(target.OrganizationID, target.AppID, target.TokenID)
	if err != nil {
		status, msg := h.refuse(w, r, target, err)
		httpserve.Error(w, status, "", msg)
		return pass, false
	}
	if status, field, msg := checkHeaders(r); status != 0 {
		pass.Release()
		httpserve.Error(w, status, field, msg)
		return pass, false
	}
	return pass, true
}

// validate checks the batch in body and builds its records. It answers a
// batch refused whole, and in strict mode one with invalid events, and
// then reports false.
func (h *Handler) validate(w http.ResponseWriter, r *http.Request, req *authorized, body []byte) (*event.Result, response, bool) {
	meta := event.Meta{AppID: req.target.AppID, OrganizationID: req.target.OrganizationID, ReceivedAt: h.now(),
		TokenID: req.target.TokenID, ClientNetwork: req.network}
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
			return nil, response{}, false
		}
		httpserve.Error(w, http.StatusInternalServerError, "", "batch could not be processed")
		return nil, response{}, false
	}
	resp := response{Accepted: len(res.Accepted), Rejected: len(res.Quarantined), Errors: res.Errors}
	if resp.Errors == nil {
		resp.Errors = []event.FieldError{}
	}
	if req.strict && resp.Rejected > 0 {
		res.Release()
		resp.Accepted = 0
		resp.Message = "strict mode: the batch holds invalid events, so none was stored"
		httpserve.WriteJSON(w, http.StatusUnprocessableEntity, resp)
		return nil, response{}, false
	}
	return res, resp, true
}

// publish hands the records to the broker and waits for its
// acknowledgement. It answers a failure with 503 and reports false.
func (h *Handler) publish(ctx context.Context, w http.ResponseWriter, target auth.Target, res *event.Result) bool {
	// The batch is stored whole even if the client goes away meanwhile:
	// net/http cancels the request's context when a client half-closes its
	// connection, which some clients do right after sending, and a batch
	// cut off mid-publish would be stored in part. The produce timeout
	// still bounds the wait.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.ProduceTimeout)
	defer cancel()
	start := h.now()
	if err := h.pub.Publish(pctx, res.Accepted, res.Quarantined); err != nil {
		h.metrics.produceLatency.WithLabelValues("error").Observe(h.now().Sub(start).Seconds())
		h.log.LogAttrs(ctx, slog.LevelWarn, "publish failed", slog.String("app", target.AppID),
			slog.Int("events", len(res.Accepted)+len(res.Quarantined)), slog.Any("err", err))
		httpserve.RetryAfter(w, 1)
		httpserve.Error(w, http.StatusServiceUnavailable, "", "the events could not be stored (the broker did not acknowledge them); retry the batch")
		return false
	}
	// The broker holds the records now; the buffer can serve another batch.
	// After a failure it is left to the garbage collector instead, as the
	// producer may still be sending from it.
	res.Release()
	h.metrics.produceLatency.WithLabelValues("ok").Observe(h.now().Sub(start).Seconds())
	return true
}

// record counts the events of a stored batch: accepted, rejected, and
// each rejected event by its first error.
func (h *Handler) record(resp response, errs []event.FieldError) {
	h.metrics.batchSize.Observe(float64(resp.Accepted + resp.Rejected))
	h.metrics.events.WithLabelValues("accepted").Add(float64(resp.Accepted))
	if resp.Rejected == 0 {
		return
	}
	h.metrics.events.WithLabelValues("rejected").Add(float64(resp.Rejected))
	last := -1
	for _, e := range errs {
		if e.Index != last { // one count per event, by its first error
			h.metrics.rejected.WithLabelValues(e.Reason, fieldLabel(e.Field)).Inc()
			last = e.Index
		}
	}
}

func (h *Handler) authError(w http.ResponseWriter, r *http.Request, err error) {
	refusal := authhttp.Refuse(err)
	if refusal.Err != nil {
		h.log.LogAttrs(r.Context(), slog.LevelError, "authentication failed", slog.Any("err", err))
	}
	// The body is not read: closing the connection answers at once,
	// where net/http would first read up to 256 KiB of a body that may
	// never come.
	w.Header().Set("Connection", "close")
	refusal.Write(w)
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
// holds against pass before reading it, at the pace of h.pace. It counts
// the batch's events as they arrive, charges each against pass before the
// validator builds anything for it, and stops at the first one past the
// most a batch may hold; it returns how many there are, or the status,
// field and message of its refusal.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request, buf *bytes.Buffer, pass *Pass, target auth.Target) (events, status int, field, msg string) {
	tooLarge := h.tooLarge
	if r.ContentLength > h.cfg.MaxBodyBytes {
		return 0, http.StatusRequestEntityTooLarge, "", tooLarge
	}
	var body io.Reader = r.Body
	if h.pace.Enabled() && r.ContentLength != 0 {
		paced := h.pace.Watch(w, r.Body)
		defer paced.Stop()
		body = paced
	}
	wire := &countingReader{r: io.LimitReader(body, h.cfg.MaxBodyBytes+1)}
	var src io.Reader = wire
	gz := strings.EqualFold(strings.TrimSpace(r.Header.Get("Content-Encoding")), "gzip")
	if gz {
		if err := pass.Hold(gzipStateBytes); err != nil {
			status, msg = h.refuse(w, r, target, err)
			return 0, status, "", msg
		}
		zr, err := h.gzipReader(wire)
		if err != nil {
			if isTimeout(wire.err) {
				status, msg = h.refuse(w, r, target, wire.err)
				return 0, status, "", msg
			}
			if wire.n > h.cfg.MaxBodyBytes {
				return 0, http.StatusRequestEntityTooLarge, "", tooLarge
			}
			return 0, http.StatusBadRequest, "", "body is not valid gzip: " + err.Error()
		}
		defer h.gzips.Put(zr)
		src = io.LimitReader(zr, h.cfg.MaxDecompressedBytes+1)
	}
	counted := &countingBody{r: pass.Body(src), pass: pass, max: h.maxEvents}
	_, err := buf.ReadFrom(counted)
	events = counted.counter.events
	switch {
	case errors.Is(err, errTooManyEvents):
		// The rest of the body is not read: the connection goes.
		w.Header().Set("Connection", "close")
		return 0, http.StatusRequestEntityTooLarge, "events",
			fmt.Sprintf("holds more than %d events; at most %d are allowed (MAX_EVENTS)", h.maxEvents, h.maxEvents)
	case errors.Is(err, ErrAppMemory) || errors.Is(err, ErrTokenMemory) || errors.Is(err, ErrOrgMemory) || errors.Is(err, ErrBodyMemory):
		status, msg = h.refuse(w, r, target, err)
		return 0, status, "", msg
	case isTimeout(wire.err):
		// Too slow for the minimum rate or the server's read timeout.
		status, msg = h.refuse(w, r, target, wire.err)
		return 0, status, "", msg
	case wire.n > h.cfg.MaxBodyBytes:
		return 0, http.StatusRequestEntityTooLarge, "", tooLarge
	case gz && int64(buf.Len()) > h.cfg.MaxDecompressedBytes:
		return 0, http.StatusRequestEntityTooLarge, "", fmt.Sprintf("decompressed body exceeds %d bytes", h.cfg.MaxDecompressedBytes)
	case err == nil:
		return events, 0, "", ""
	case gz && (wire.err == nil || errors.Is(wire.err, io.EOF)):
		// The wire was read cleanly, so the fault is in the gzip stream.
		return 0, http.StatusBadRequest, "", "body is not valid gzip: " + err.Error()
	default:
		return 0, http.StatusBadRequest, "", "body could not be read: " + err.Error()
	}
}

// takeEvents takes a batch's events from the event rate limits of its
// token, app and organization, from all three or from none, before they
// are validated and published. It answers a batch refused, with 429,
// Retry-After and the limit that refused it.
func (h *Handler) takeEvents(w http.ResponseWriter, r *http.Request, target auth.Target, events int) bool {
	n := float64(events)
	keys := eventKeys(target)
	for i, l := range h.events {
		ok, wait := l.AllowN(keys[i], n)
		if ok {
			continue
		}
		for j := range i {
			h.events[j].RefundN(keys[j], n)
		}
		h.refuseEvents(w, r, target, i, events, wait)
		return false
	}
	return true
}

// refundEvents gives back what takeEvents took for a batch not stored.
func (h *Handler) refundEvents(target auth.Target, events int) {
	keys := eventKeys(target)
	for i, l := range h.events {
		l.RefundN(keys[i], float64(events))
	}
}

// eventKeys are the keys of target in h.events.
func eventKeys(target auth.Target) [3]string {
	return [...]string{target.TokenID, target.AppID, target.OrganizationID}
}

// refuseEvents answers a batch the event rate limit i (token, app or
// organization) refused.
func (h *Handler) refuseEvents(w http.ResponseWriter, r *http.Request, target auth.Target, i, events int, wait time.Duration) {
	c := &h.cfg
	r0 := c.eventRates()[i]
	who := [...]string{"this token", fmt.Sprintf("app %q", target.AppID), fmt.Sprintf("organization %q", target.OrganizationID)}[i]
	budget := [...]string{budgetTokenEvents, budgetAppEvents, budgetOrgEvents}[i]
	h.metrics.refusals.WithLabelValues(budget).Inc()
	h.log.LogAttrs(r.Context(), slog.LevelDebug, "request refused", slog.String("organization", target.OrganizationID),
		slog.String("app", target.AppID), slog.String("token", target.TokenID), slog.String("budget", budget), slog.Int("events", events))
	httpserve.RetryAfter(w, wait.Seconds())
	httpserve.Error(w, http.StatusTooManyRequests, "",
		fmt.Sprintf("the batch's %d events would take %s past its event rate limit of %g events a second with bursts of %d (%s, %s); nothing of it was stored: retry after the time in Retry-After, or send fewer events",
			events, who, *r0.rate, *r0.burst, r0.rateEnv, r0.burstEnv))
}

// refuse answers a request refused for lack of a budget (an Admission
// error, a *httpserve.SlowBodyError or a read timeout): the status and the
// message that say which budget, Retry-After where a retry may pass, and
// a count by budget. The client's own shares get 429: the app or token is
// sending more at once than it may, which is its doing; the server's
// budgets get 503: it is full. The organization named is the token's
// own, never one the request chose. The connection is closed after the answer,
// so that the server neither waits for the rest of a body it will not
// read (net/http would, up to 256 KiB, before answering) nor reads it as
// the next request.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, target auth.Target, err error) (status int, msg string) {
	w.Header().Set("Connection", "close")
	s := h.admission.Shares()
	var budget string
	var slow *httpserve.SlowBodyError
	app, org := target.AppID, target.OrganizationID
	switch {
	case errors.Is(err, ErrAppBusy):
		status, budget = http.StatusTooManyRequests, budgetAppSlots
		msg = fmt.Sprintf("app %q already has %d requests in flight, its share of the request slots; retry later", app, s.SlotsPerApp)
	case errors.Is(err, ErrTokenBusy):
		status, budget = http.StatusTooManyRequests, budgetTokenSlots
		msg = fmt.Sprintf("this token already has %d requests in flight, its share of the request slots; retry later", s.SlotsPerToken)
	case errors.Is(err, ErrOrgBusy):
		status, budget = http.StatusTooManyRequests, budgetOrgSlots
		msg = fmt.Sprintf("organization %q already has %d requests in flight, its share of the request slots; retry later", org, s.SlotsPerOrg)
	case errors.Is(err, ErrAtCapacity):
		status, budget = http.StatusServiceUnavailable, budgetSlots
		msg = fmt.Sprintf("the server is at capacity: all %d request slots are taken; retry later", s.Slots)
	case errors.Is(err, ErrAppMemory):
		status, budget = http.StatusTooManyRequests, budgetAppMemory
		msg = fmt.Sprintf("the bodies of app %q in flight hold its share of the memory for request bodies (%d bytes); retry later", app, s.MemoryPerApp)
	case errors.Is(err, ErrTokenMemory):
		status, budget = http.StatusTooManyRequests, budgetTokenMemory
		msg = fmt.Sprintf("the bodies of this token in flight hold its share of the memory for request bodies (%d bytes); retry later", s.MemoryPerToken)
	case errors.Is(err, ErrOrgMemory):
		status, budget = http.StatusTooManyRequests, budgetOrgMemory
		msg = fmt.Sprintf("the bodies of organization %q in flight hold its share of the memory for request bodies (%d bytes); retry later", org, s.MemoryPerOrg)
	case errors.Is(err, ErrBodyMemory):
		status, budget = http.StatusServiceUnavailable, budgetMemory
		msg = "the server is at capacity (memory for request bodies); retry later"
	case errors.As(err, &slow):
		status, budget, msg = http.StatusRequestTimeout, budgetUploadRate, slow.Error()
	default:
		status, budget = http.StatusRequestTimeout, budgetReadTimeout
		msg = "the body did not arrive within the server's read timeout"
	}
	if status != http.StatusRequestTimeout {
		httpserve.RetryAfter(w, 1)
	}
	h.metrics.refusals.WithLabelValues(budget).Inc()
	h.log.LogAttrs(r.Context(), slog.LevelDebug, "request refused", slog.String("organization", org), slog.String("app", app),
		slog.String("token", target.TokenID), slog.String("budget", budget))
	return status, msg
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
