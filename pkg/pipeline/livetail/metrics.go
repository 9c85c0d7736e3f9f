package livetail

import "github.com/prometheus/client_golang/prometheus"

// metrics are the hub's. No label comes from a client: the refusals'
// scope is one of three words.
type metrics struct {
	watchers      prometheus.Gauge
	tailRunning   prometheus.Gauge
	read          prometheus.Counter
	unread        prometheus.Counter
	sent          prometheus.Counter
	skipped       prometheus.Counter
	unreadable    prometheus.Counter
	interruptions prometheus.Counter
	refused       *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		watchers: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "cms", Subsystem: "live", Name: "watchers",
			Help: "People watching an app's events live (GET /cms/app/events/live)."}),
		tailRunning: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "cms", Subsystem: "live", Name: "tail_running",
			Help: "1 while the process reads the events and quarantine topics for its watchers, else 0."}),
		read: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "cms", Subsystem: "live", Name: "records_read_total",
			Help: "Records the live view read from the events and quarantine topics, of every app."}),
		unread: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "cms", Subsystem: "live", Name: "records_unread_total",
			Help: "Records the live view passed over unread, over the records it reads a second (LIVE_READ_PER_SECOND)."}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "cms", Subsystem: "live", Name: "events_sent_total",
			Help: "Events queued for watchers (one per watcher shown it)."}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "cms", Subsystem: "live", Name: "events_skipped_total",
			Help: "Events a watcher was not shown because it had been shown its events a second already (one per watcher)."}),
		unreadable: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "cms", Subsystem: "live", Name: "records_unreadable_total",
			Help: "Records of a watched app that were not an envelope or quarantine record the live view could read."}),
		interruptions: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "cms", Subsystem: "live", Name: "interruptions_total",
			Help: "Times reading Kafka stopped (a broker unreachable, a connection lost) while people watched."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "cms", Subsystem: "live", Name: "watchers_refused_total",
			Help: "Watchers refused over a bound, by the bound: app, org or process."}, []string{"limit"}),
	}
	for _, l := range []string{"app", "org", "process"} {
		m.refused.WithLabelValues(l)
	}
	if reg != nil {
		reg.MustRegister(m.watchers, m.tailRunning, m.read, m.unread, m.sent, m.skipped, m.unreadable, m.interruptions, m.refused)
	}
	return m
}
