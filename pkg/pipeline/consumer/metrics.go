package consumer

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/assistantcms/cms/pkg/pipeline/event"
)

// Metrics are the consumer's Prometheus collectors.
type Metrics struct {
	lag           *prometheus.GaugeVec
	rows          prometheus.Counter
	batchSize     prometheus.Histogram
	insertLatency prometheus.Histogram
	freshness     prometheus.Histogram
	retries       *prometheus.CounterVec
	deadLetters   prometheus.Counter
	commitErrors  prometheus.Counter
	quarantined   *prometheus.CounterVec
}

// NewMetrics creates the collectors and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "cms", Subsystem: "consumer", Name: "lag_messages",
			Help: "Messages behind the end of each partition of the events and quarantine topics, as of the last fetch.",
		}, []string{"topic", "partition"}),
		rows: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "cms", Subsystem: "consumer", Name: "rows_inserted_total",
			Help: "Event rows ClickHouse accepted.",
		}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "cms", Subsystem: "consumer", Name: "batch_size_rows",
			Help:    "Rows per insert.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 10),
		}),
		insertLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "cms", Subsystem: "consumer", Name: "insert_duration_seconds",
			Help:    "Time of each insert attempt.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}),
		freshness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "cms", Subsystem: "consumer", Name: "freshness_seconds",
			Help:    "Time from ingest accepting an event to its row being written to ClickHouse.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 12),
		}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "cms", Subsystem: "consumer", Name: "retries_total",
			Help: "Failed attempts that were retried, by operation.",
		}, []string{"operation"}),
		deadLetters: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "cms", Subsystem: "consumer", Name: "dead_letters_total",
			Help: "Messages sent to the dead-letter topic.",
		}),
		commitErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "cms", Subsystem: "consumer", Name: "commit_errors_total",
			Help: "Offset commits that failed after the rows were written.",
		}),
		quarantined: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "cms", Subsystem: "consumer", Name: "quarantine_rows_inserted_total",
			Help: "Quarantined events written to the quarantine table, by the reason of their first error.",
		}, []string{"reason"}),
	}
	reg.MustRegister(m.lag, m.rows, m.batchSize, m.insertLatency, m.freshness, m.retries, m.deadLetters, m.commitErrors, m.quarantined)
	// Retry series exist from the start, at zero, so that rates and
	// alerts over them work before the first failure.
	for _, op := range []string{opInsert, opQuarantine, opDeadLetter} {
		m.retries.WithLabelValues(op)
	}
	for _, r := range event.Reasons() {
		m.quarantined.WithLabelValues(r)
	}
	return m
}
