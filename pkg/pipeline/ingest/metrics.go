package ingest

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/assistantcms/cms/pkg/pipeline/event"
)

// Metrics are the ingest service's Prometheus collectors.
type Metrics struct {
	requests       *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	events         *prometheus.CounterVec
	rejected       *prometheus.CounterVec
	batchSize      prometheus.Histogram
	produceLatency *prometheus.HistogramVec
	inFlight       prometheus.Gauge
	refusals       *prometheus.CounterVec
}

// Budgets a request can be refused for, the values of the budget label
// of cms_ingest_admission_refusals_total.
const (
	budgetAppSlots    = "app_slots"         // 429: the app's share of the request slots
	budgetTokenSlots  = "token_slots"       // 429: the token's share of the request slots
	budgetOrgSlots    = "org_slots"         // 429: the organization's share of the request slots
	budgetSlots       = "slots"             // 503: every request slot
	budgetAppMemory   = "app_body_memory"   // 429: the app's share of the body memory
	budgetTokenMemory = "token_body_memory" // 429: the token's share of the body memory
	budgetOrgMemory   = "org_body_memory"   // 429: the organization's share of the body memory
	budgetMemory      = "body_memory"       // 503: the body memory
	budgetUploadRate  = "upload_rate"       // 408: the minimum upload rate
	budgetReadTimeout = "read_timeout"      // 408: the server's read timeout
	budgetTokenEvents = "token_event_rate"  // 429: the token's event rate limit
	budgetAppEvents   = "app_event_rate"    // 429: the app's event rate limit
	budgetOrgEvents   = "org_event_rate"    // 429: the organization's event rate limit
)

// budgets are every value of the refusals' budget label.
func budgets() []string {
	return []string{budgetAppSlots, budgetTokenSlots, budgetOrgSlots, budgetSlots,
		budgetAppMemory, budgetTokenMemory, budgetOrgMemory, budgetMemory, budgetUploadRate, budgetReadTimeout,
		budgetTokenEvents, budgetAppEvents, budgetOrgEvents}
}

// NewMetrics creates the collectors and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "cms", Subsystem: "ingest", Name: "http_requests_total",
			Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "cms", Subsystem: "ingest", Name: "http_request_duration_seconds",
			Help:    "Time from request start to response, by route.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "cms", Subsystem: "ingest", Name: "events_total",
			Help: "Events by outcome: accepted (published to the events topic) or rejected (quarantined).",
		}, []string{"outcome"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "cms", Subsystem: "ingest", Name: "events_rejected_total",
			Help: "Rejected (quarantined) events by the reason and field of their first error, array indexes removed from the field.",
		}, []string{"reason", "field"}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "cms", Subsystem: "ingest", Name: "batch_size_events",
			Help:    "Events per accepted request body.",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 10000},
		}),
		produceLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "cms", Subsystem: "ingest", Name: "produce_duration_seconds",
			Help:    "Time until the broker acknowledged a request's records, by result.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"result"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "cms", Subsystem: "ingest", Name: "in_flight_requests",
			Help: "Requests being handled now.",
		}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "cms", Subsystem: "ingest", Name: "admission_refusals_total",
			Help: "Requests refused for want of a budget: app_slots, token_slots, org_slots, app_body_memory, token_body_memory, " +
				"org_body_memory, token_event_rate, app_event_rate, org_event_rate (429, the client's share), slots, body_memory (503, the server's), " +
				"upload_rate, read_timeout (408, the body too slow).",
		}, []string{"budget"}),
	}
	reg.MustRegister(m.requests, m.duration, m.events, m.rejected, m.batchSize, m.produceLatency, m.inFlight, m.refusals)
	// Series of known label values exist from the start, at zero, so that
	// rates and alerts over them work before the first event of each kind.
	for _, outcome := range []string{"accepted", "rejected"} {
		m.events.WithLabelValues(outcome)
	}
	for _, result := range []string{"ok", "error"} {
		m.produceLatency.WithLabelValues(result)
	}
	for _, r := range event.Reasons() {
		m.rejected.WithLabelValues(r, "")
	}
	for _, b := range budgets() {
		m.refusals.WithLabelValues(b)
	}
	return m
}

// fieldLabel turns an error's field path into a bounded label value:
// "payload.response.displays[3].title" becomes "payload.response.displays[].title".
func fieldLabel(field string) string {
	if !strings.Contains(field, "[") {
		return field
	}
	var b strings.Builder
	skip := false
	for _, r := range field {
		switch {
		case r == '[':
			skip = true
			b.WriteRune(r)
		case r == ']':
			skip = false
			b.WriteRune(r)
		case !skip:
			b.WriteRune(r)
		}
	}
	return b.String()
}
