package contentapi

import (
	"encoding/binary"
	"encoding/hex"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/edge/clientnet"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
)

const (
	requestIDKey = "cms.request_id"
	logAppKey    = "cms.app_id"
)

// Metrics are the API's request metrics.
type Metrics struct {
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	retrieval *prometheus.CounterVec
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "cms", Subsystem: "api", Name: "requests_total",
			Help: "HTTP requests by route, method and status code.",
		}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "cms", Subsystem: "api", Name: "request_duration_seconds",
			Help:    "Time to answer HTTP requests, by route and method.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route", "method"}),
		retrieval: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "cms", Subsystem: "api", Name: "retrieval_total",
			Help: "Search and FAQ answers with semantic retrieval configured, by how they were ranked: hybrid, or lexical_fallback when the embeddings endpoint failed or the content was still being embedded.",
		}, []string{"mode"}),
	}
	reg.MustRegister(m.requests, m.latency, m.retrieval)
	return m
}

// methodLabel is the value of a method label: the methods HTTP defines,
// and "other" for any other, since a client may send any token as a
// method and each new label value would be a new series for good.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}

// validRequestID accepts a caller's request ID only when it is short and
// plain, so that it cannot forge log lines or headers.
func validRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// newRequestID makes a request ID of 96 random bits in hex. Not a
// counter: IDs are answered to every client, and consecutive ones would
// tell one tenant how many requests the others make. math/rand/v2's
// generator is seeded from the system and unpredictable (ChaCha8), and
// costs no system call.
func newRequestID() string {
	var b [12]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint32(b[8:], rand.Uint32())
	return hex.EncodeToString(b[:])
}

// observe assigns the request ID, then records and logs the request.
func observe(m *Metrics, log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		id := c.GetHeader("X-Request-Id")
		if !validRequestID(id) {
			id = newRequestID()
		}
		c.Set(requestIDKey, id)
		c.Writer.Header().Set("X-Request-Id", id)
		c.Next()
		route := c.FullPath()
		if route == "" {
			route = "unmatched"
		}
		status := c.Writer.Status()
		elapsed := time.Since(start)
		method := methodLabel(c.Request.Method)
		m.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
		m.latency.WithLabelValues(route, method).Observe(elapsed.Seconds())
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelWarn
		}
		if log.Enabled(c.Request.Context(), level) {
			log.LogAttrs(c.Request.Context(), level, "request",
				slog.String("request_id", id), slog.String("method", method), slog.String("route", route),
				slog.Int("status", status), slog.Duration("elapsed", elapsed), slog.String("app_id", c.GetString(logAppKey)))
		}
	}
}

// origin tells authentication which network each request came from,
// whose failures it counts, and keeps where the request came from for
// the audit log of what it changes.
func origin(trusted []netip.Prefix) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Request = c.Request.WithContext(auth.Origin(c.Request.Context(), clientnet.Of(c.Request, trusted),
			c.Request.UserAgent(), c.GetString(requestIDKey)))
	}
}

// recovery answers 500 with the error body instead of a bare response when
// a handler panics.
func recovery(log *slog.Logger) gin.HandlerFunc {
	return gin.CustomRecoveryWithWriter(io.Discard, func(c *gin.Context, err any) {
		log.Error("handler panicked", "panic", err, "request_id", c.GetString(requestIDKey), "path", c.Request.URL.Path)
		abort(c, http.StatusInternalServerError, "", "Internal error.")
	})
}

// notFound and notAllowed keep errors in the JSON shape for unknown routes.
func notFound(c *gin.Context) { httpserve.Error(c.Writer, http.StatusNotFound, "", "Not found.") }

func notAllowed(c *gin.Context) {
	httpserve.Error(c.Writer, http.StatusMethodNotAllowed, "", "Method not allowed.")
}
