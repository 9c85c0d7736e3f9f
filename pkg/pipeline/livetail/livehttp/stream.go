// Package livehttp serves the live view of an app's events over HTTP:
// GET /cms/app/events/live as Server-Sent Events for clients (curl, the
// page, a runtime builder's own tool), and the page that shows them in a
// browser. The hub it reads (livetail) decides what each watcher is sent;
// this package writes it, with heartbeats, periodic summaries and an end
// message that says why a stream ended.
//
// Who may watch is decided before a request reaches it: the process
// authenticates the token, requires the events:read scope and resolves
// the app (cmd/api mounts Stream behind the content API's
// authentication), so that refusals are the other routes' refusals.
package livehttp

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/pipeline/livetail"
)

// Path is the stream's route, and the page's when asked for as HTML.
const Path = "/cms/app/events/live"

// Config tunes the stream. Zero fields take the defaults.
type Config struct {
	// Heartbeat is how long a stream may stay silent before a comment
	// line is written, so that proxies keep the connection.
	Heartbeat time.Duration
	// Summary is how often a watcher is told what it was and was not
	// shown.
	Summary time.Duration
	// WriteTimeout bounds one write to the client: a client that reads
	// nothing for that long is dropped.
	WriteTimeout time.Duration
	// Recheck is how often the stream's token is checked again, so that a
	// revoked token stops watching. The check reads the token cache, as
	// every request does, so it is cheap; often, it ends a stream within
	// a second of the time a request with the token is refused.
	Recheck time.Duration
}

// Defaults of Config.
const (
	DefaultHeartbeat    = 15 * time.Second
	DefaultSummary      = 5 * time.Second
	DefaultWriteTimeout = 10 * time.Second
	DefaultRecheck      = time.Second
	// MaxLimit bounds the limit parameter.
	MaxLimit = 100_000
	// maxFilterBytes bounds each filter's value: no field it compares
	// with is longer.
	maxFilterBytes = 256
	// drainAtEnd bounds the items still written when the process shuts
	// down, so that the drain ends in time.
	drainAtEnd = 64
)

func (c Config) withDefaults() Config {
	if c.Heartbeat <= 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.Summary <= 0 {
		c.Summary = DefaultSummary
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.Recheck <= 0 {
		c.Recheck = DefaultRecheck
	}
	return c
}

// Handler serves the stream and the page.
type Handler struct {
	hub   *livetail.Hub
	cfg   Config
	log   *slog.Logger
	ended *prometheus.CounterVec
}

// Reasons a stream ends, as the end message and the metric say them.
const (
	EndLimit    = "limit"    // the client's limit of events was reached
	EndSlow     = "slow"     // the client did not read fast enough
	EndShutdown = "shutdown" // the process is shutting down
	EndToken    = "token"    // the token may no longer watch the app
	EndClient   = "client"   // the client went away
)

// New returns the handler of hub, which is nil when the process has no
// Kafka to read (the stream then answers 503).
func New(hub *livetail.Hub, cfg Config, reg prometheus.Registerer, log *slog.Logger) *Handler {
	h := &Handler{hub: hub, cfg: cfg.withDefaults(), log: log,
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "cms", Subsystem: "live", Name: "streams_ended_total",
			Help: "Live event streams ended, by why: limit, slow, shutdown, token, client."}, []string{"reason"})}
	for _, r := range []string{EndLimit, EndSlow, EndShutdown, EndToken, EndClient} {
		h.ended.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(h.ended)
	}
	return h
}

// options are what a request asks of its stream.
type options struct {
	filter livetail.Filter
	limit  int
}

// parseOptions reads the query string; an error names the parameter.
func parseOptions(r *http.Request) (options, string, error) {
	q := r.URL.Query()
	var o options
	for _, p := range []struct {
		name string
		dst  *string
	}{{"type", &o.filter.Type}, {"name", &o.filter.Name}, {"sessionId", &o.filter.SessionID}, {"userId", &o.filter.UserID}} {
		v := q.Get(p.name)
		if len(v) > maxFilterBytes || !utf8.ValidString(v) {
			return o, p.name, errors.New(p.name + " must be UTF-8 text of at most " + strconv.Itoa(maxFilterBytes) + " bytes")
		}
		*p.dst = v
	}
	switch v := q.Get("quarantined"); v {
	case "", "false":
	case "true":
		o.filter.Quarantined = true
	default:
		return o, "quarantined", errors.New("quarantined must be true or false")
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxLimit {
			return o, "limit", errors.New("limit must be a whole number from 1 to " + strconv.Itoa(MaxLimit))
		}
		o.limit = n
	}
	return o, "", nil
}

// start is the first message of a stream: what it shows and how.
type start struct {
	AppID            string     `json:"appId"`
	Filter           filterJSON `json:"filter"`
	Limit            int        `json:"limit,omitempty"`
	EventsPerSecond  float64    `json:"eventsPerSecond"`
	PayloadBytes     int        `json:"payloadBytes"`
	SummarySeconds   float64    `json:"summarySeconds"`
	HeartbeatSeconds float64    `json:"heartbeatSeconds"`
}

type filterJSON struct {
	Type        string `json:"type,omitempty"`
	Name        string `json:"name,omitempty"`
	SessionID   string `json:"sessionId,omitempty"`
	UserID      string `json:"userId,omitempty"`
	Quarantined bool   `json:"quarantined,omitempty"`
}

// summary is the periodic message: the counts of the period and since the
// stream began.
type summary struct {
	Seconds float64 `json:"seconds"`
	livetail.Counts
	Total livetail.Counts `json:"total"`
}

// end is the last message of a stream.
type end struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Stream answers GET Path for the app of t, whose token the caller has
// checked; recheck checks it again (an *auth.Error says it may no longer
// watch). The stream lasts until the client leaves, its limit is reached,
// it is too slow, its token stops being valid, or the process shuts down;
// the last message says which.
func (h *Handler) Stream(w http.ResponseWriter, r *http.Request, t auth.Target, recheck func(context.Context) error) {
	o, field, err := parseOptions(r)
	if err != nil {
		httpserve.Error(w, http.StatusBadRequest, field, err.Error())
		return
	}
	if h.hub == nil {
		httpserve.Error(w, http.StatusServiceUnavailable, "", "The live view of events is not configured on this server: it reads Kafka, and no brokers are set (KAFKA_BROKERS).")
		return
	}
	watcher, err := h.hub.Watch(t.OrganizationID, t.AppID, o.filter)
	if err != nil {
		var le *livetail.LimitError
		switch {
		case errors.As(err, &le) && le.Scope != "process":
			httpserve.RetryAfter(w, h.cfg.Summary.Seconds())
			httpserve.Error(w, http.StatusTooManyRequests, "", le.Error()+"; retry later.")
		case errors.As(err, &le):
			httpserve.RetryAfter(w, h.cfg.Summary.Seconds())
			httpserve.Error(w, http.StatusServiceUnavailable, "", le.Error()+"; retry later.")
		default:
			httpserve.RetryAfter(w, 1)
			httpserve.Error(w, http.StatusServiceUnavailable, "", "This server is shutting down; connect again to reach another.")
		}
		return
	}
	defer watcher.Close()
	reason := h.serve(w, r, watcher, t, o, recheck)
	h.ended.WithLabelValues(reason).Inc()
}

// serve writes the stream until it ends and returns why it did.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, watcher *livetail.Watcher, t auth.Target, o options, recheck func(context.Context) error) string {
	rc := http.NewResponseController(w)
	// The server's read timeout would otherwise end the request's context
	// (net/http reads on in the background for a client going away), and
	// its write timeout the stream: each write gets its own deadline.
	_ = rc.SetReadDeadline(time.Time{})
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no") // nginx and its ingress controller pass it on at once
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, rc: rc, timeout: h.cfg.WriteTimeout}
	cfg := h.hub.Config()
	s.comment("live events of app " + strconv.Quote(t.AppID))
	s.retry(5 * time.Second)
	s.send("start", start{AppID: t.AppID, Limit: o.limit, EventsPerSecond: cfg.EventsPerSecond, PayloadBytes: cfg.PayloadBytes,
		SummarySeconds: h.cfg.Summary.Seconds(), HeartbeatSeconds: h.cfg.Heartbeat.Seconds(),
		Filter: filterJSON{Type: o.filter.Type, Name: o.filter.Name, SessionID: o.filter.SessionID, UserID: o.filter.UserID, Quarantined: o.filter.Quarantined}})
	if s.flush() != nil {
		return EndClient
	}

	heartbeat := time.NewTicker(h.cfg.Heartbeat)
	defer heartbeat.Stop()
	summaries := time.NewTicker(h.cfg.Summary)
	defer summaries.Stop()
	rechecks := time.NewTicker(h.cfg.Recheck)
	defer rechecks.Stop()
	var total livetail.Counts
	shown := 0
	for {
		var err error
		select {
		case it := <-watcher.Items():
			shown += s.item(it)
			// What else is queued goes out in the same write.
			for (o.limit == 0 || shown < o.limit) && s.next(watcher) {
				if s.lastEvent {
					shown++
				}
			}
			if o.limit > 0 && shown >= o.limit {
				s.send("end", end{Reason: EndLimit, Message: "The stream's limit of " + strconv.Itoa(o.limit) + " events is reached."})
				_ = s.flush()
				return EndLimit
			}
			err = s.flush()
		case <-summaries.C:
			c := watcher.TakeCounts()
			if c.Seen == 0 && c.Unread == 0 {
				continue
			}
			total.Seen, total.Shown, total.Skipped, total.Unread = total.Seen+c.Seen, total.Shown+c.Shown, total.Skipped+c.Skipped, total.Unread+c.Unread
			s.send("summary", summary{Seconds: h.cfg.Summary.Seconds(), Counts: c, Total: total})
			err = s.flush()
		case <-heartbeat.C:
			if time.Since(s.last) >= h.cfg.Heartbeat/2 {
				s.comment("keep-alive")
				err = s.flush()
			}
		case <-rechecks.C:
			var ae *auth.Error
			if rerr := recheck(r.Context()); errors.As(rerr, &ae) {
				s.send("end", end{Reason: EndToken, Message: "This token may no longer watch the app: " + ae.Message})
				_ = s.flush()
				return EndToken
			}
			// The token store unreachable is no reason to stop: the other
			// routes serve within their grace too.
			continue
		case <-watcher.Done():
			return h.ended1(s, watcher)
		case <-r.Context().Done():
			return EndClient
		}
		if err != nil {
			// The client stopped reading or went away.
			if r.Context().Err() != nil {
				return EndClient
			}
			return EndSlow
		}
	}
}

// ended1 writes the end message of a watcher the hub ended.
func (h *Handler) ended1(s *sse, watcher *livetail.Watcher) string {
	switch watcher.Ending() {
	case livetail.EndShutdown:
		// What was queued still goes out, within bounds.
		for range drainAtEnd {
			if !s.next(watcher) {
				break
			}
		}
		s.send("end", end{Reason: EndShutdown, Message: "This server is shutting down; connect again to go on watching (events published meanwhile are not shown)."})
		_ = s.flush()
		return EndShutdown
	case livetail.EndSlow:
		s.timeout = time.Second
		s.send("end", end{Reason: EndSlow, Message: "This stream was dropped: its client did not read its events as fast as they came. Connect again, perhaps with filters."})
		_ = s.flush()
		return EndSlow
	}
	return EndClient
}

// sse writes Server-Sent Events into a buffer, flushed in one write.
type sse struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	buf     []byte
	// last is when the client was last written to.
	last time.Time
	// lastEvent: the last item added was an event.
	lastEvent bool
}

// item adds an item of the hub; it returns 1 for an event, else 0.
func (s *sse) item(it livetail.Item) int {
	s.raw(string(it.Kind), it.Data)
	s.lastEvent = it.Kind == livetail.KindEvent
	if s.lastEvent {
		return 1
	}
	return 0
}

// next adds the watcher's next item if one is queued, and reports
// whether one was.
func (s *sse) next(watcher *livetail.Watcher) bool {
	select {
	case it := <-watcher.Items():
		s.item(it)
		return true
	default:
		return false
	}
}

func (s *sse) send(kind string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		return
	}
	s.raw(kind, data)
}

// raw adds a message of kind whose data is one line of JSON.
func (s *sse) raw(kind string, data []byte) {
	s.buf = append(s.buf, "event: "...)
	s.buf = append(s.buf, kind...)
	s.buf = append(s.buf, "\ndata: "...)
	s.buf = append(s.buf, data...)
	s.buf = append(s.buf, "\n\n"...)
}

func (s *sse) comment(text string) {
	s.buf = append(s.buf, ": "...)
	s.buf = append(s.buf, text...)
	s.buf = append(s.buf, '\n', '\n')
}

func (s *sse) retry(d time.Duration) {
	s.buf = strconv.AppendInt(append(s.buf, "retry: "...), d.Milliseconds(), 10)
	s.buf = append(s.buf, '\n', '\n')
}

// flush writes the buffer within the write timeout and flushes it to the
// client.
func (s *sse) flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	_, err := s.w.Write(s.buf)
	s.last = time.Now()
	s.buf = s.buf[:0]
	if err != nil {
		return err
	}
	return s.rc.Flush()
}
