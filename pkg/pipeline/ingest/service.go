package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/edge/cors"
	"github.com/assistantcms/cms/pkg/edge/ratelimit"
	"github.com/assistantcms/cms/pkg/health"
	"github.com/assistantcms/cms/pkg/pipeline/event"
	"github.com/assistantcms/cms/pkg/pipeline/kafka"
)

// ServiceConfig is everything the ingest process is configured with.
type ServiceConfig struct {
	Kafka            kafka.Cluster
	EventsTopic      string
	QuarantineTopic  string
	TopicPartitions  int
	TopicReplication int
	// MaxMessageBytes is the max.message.bytes of both topics (set when
	// they are created, raised when they allow less) and the producer's
	// largest batch; records' values stay RecordFraming under it. Zero
	// means kafka.DefaultMaxMessageBytes.
	MaxMessageBytes int
	Producer        kafka.ProducerConfig
	Handler         Config
	// Limits are the event rules; zero fields take event's defaults, and
	// MaxRecordBytes follows from MaxMessageBytes.
	Limits        event.Limits
	TokenCacheTTL time.Duration
	// TokenOutageGrace is how long past TokenCacheTTL a token looked up
	// before is still accepted while the content database cannot answer;
	// zero means DefaultTokenOutageGrace, negative none.
	TokenOutageGrace  time.Duration
	RateLimitRPS      float64
	RateLimitBurst    int
	ShutdownTimeout   time.Duration
	StartupTimeout    time.Duration
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	IdleTimeout       time.Duration
	// CORS lets pages on other origins send events from a browser; nil
	// allows none.
	CORS *cors.Policy
}

// Defaults for ServiceConfig.
const (
	// DefaultReadHeaderTimeout cuts off a client that trickles its headers.
	DefaultReadHeaderTimeout = 5 * time.Second
	// DefaultReadTimeout cuts off a client that trickles its body: a whole
	// request, at most MaxBodyBytes, must arrive within it.
	DefaultReadTimeout = 30 * time.Second
	// DefaultIdleTimeout closes keep-alive connections left unused.
	DefaultIdleTimeout = 120 * time.Second
	// DefaultTokenOutageGrace keeps events flowing through a short outage
	// of the content database, as the api keeps answering through one.
	DefaultTokenOutageGrace = 30 * time.Second
)

// Store is what the service needs from the content database.
type Store interface {
	auth.Store
	Ping(ctx context.Context) error
}

// Service is a running ingest service.
type Service struct {
	cfg      ServiceConfig
	log      *slog.Logger
	server   *http.Server
	producer *kafka.Producer
	checker  *health.Checker
}

// EventLimits completes the event rules of cfg: defaults for zero fields
// and records that fit the topics' max.message.bytes. Resubmission checks
// quarantined events by the same rules.
func (cfg *ServiceConfig) EventLimits() (event.Limits, error) {
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = kafka.DefaultMaxMessageBytes
	}
	l, d := cfg.Limits, event.DefaultLimits()
	if l.MaxEvents <= 0 {
		l.MaxEvents = d.MaxEvents
	}
	if l.MaxEventBytes <= 0 {
		l.MaxEventBytes = d.MaxEventBytes
	}
	if l.MaxRecordBytes <= 0 {
		l.MaxRecordBytes = cfg.MaxMessageBytes - kafka.RecordFraming
	}
	if err := l.Check(); err != nil {
		return l, fmt.Errorf("event limits with topics of max.message.bytes %d (KAFKA_MAX_MESSAGE_BYTES): %w", cfg.MaxMessageBytes, err)
	}
	return l, nil
}

// Check refuses settings that cannot work together, before anything is
// opened or connected.
func (cfg ServiceConfig) Check() error {
	if _, err := cfg.EventLimits(); err != nil {
		return err
	}
	return cfg.Handler.check()
}

// NewService connects to the brokers, creates missing topics and builds
// the HTTP server. It fails with a clear message when the brokers cannot
// be reached or the topics cannot be created.
func NewService(ctx context.Context, cfg ServiceConfig, store Store, log *slog.Logger) (*Service, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	limits, err := cfg.EventLimits()
	if err != nil {
		return nil, err
	}
	startup := cfg.StartupTimeout
	if startup <= 0 {
		startup = 30 * time.Second
	}
	sctx, cancel := context.WithTimeout(ctx, startup)
	defer cancel()
	if err := cfg.Kafka.EnsureTopics(sctx, cfg.Topics()); err != nil {
		return nil, fmt.Errorf("prepare Kafka topics: %w", err)
	}

	cfg.Producer.BatchBytes = int64(cfg.MaxMessageBytes)
	cfg.Producer.Logger = log
	producer, err := cfg.Kafka.NewProducer(cfg.Producer, cfg.EventsTopic, cfg.QuarantineTopic)
	if err != nil {
		return nil, fmt.Errorf("create producer: %w", err)
	}
	grace := cfg.TokenOutageGrace
	if grace == 0 {
		grace = DefaultTokenOutageGrace
	}
	authn, err := auth.NewAuthenticator(store, auth.Options{CacheTTL: cfg.TokenCacheTTL, OutageGrace: grace})
	if err != nil {
		return nil, err
	}
	limiter := ratelimit.Optional(cfg.RateLimitRPS, cfg.RateLimitBurst)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	handler := New(cfg.Handler, event.NewValidator(limits), authn, producer, limiter, NewMetrics(reg), log)

	checker := health.New()
	topicNames := []string{cfg.EventsTopic, cfg.QuarantineTopic}
	checker.Add("kafka", func(ctx context.Context) error { return cfg.Kafka.CheckTopics(ctx, topicNames) })
	checker.Add("content_db", store.Ping)

	mux := http.NewServeMux()
	handler.Register(mux)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("GET /healthz", health.LiveHandler())
	mux.Handle("GET /readyz", checker.ReadyHandler())

	srv := &http.Server{
		Handler:           cfg.CORS.Handler(mux),
		ReadHeaderTimeout: orDefault(cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		ReadTimeout:       orDefault(cfg.ReadTimeout, DefaultReadTimeout),
		// A response waits for the broker, bounded by the produce timeout.
		WriteTimeout:   orDefault(cfg.ReadTimeout, DefaultReadTimeout) + cfg.Handler.ProduceTimeout + 5*time.Second,
		IdleTimeout:    orDefault(cfg.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return &Service{cfg: cfg, log: log, server: srv, producer: producer, checker: checker}, nil
}

// Topics are the topics ingest writes, as they must be on the brokers.
func (cfg *ServiceConfig) Topics() []kafka.TopicSpec {
	return []kafka.TopicSpec{
		{Name: cfg.EventsTopic, Partitions: cfg.TopicPartitions, ReplicationFactor: cfg.TopicReplication, MaxMessageBytes: cfg.MaxMessageBytes},
		{Name: cfg.QuarantineTopic, Partitions: cfg.TopicPartitions, ReplicationFactor: cfg.TopicReplication, MaxMessageBytes: cfg.MaxMessageBytes},
	}
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Serve answers requests on ln until ctx is cancelled, then shuts down
// gracefully: readiness fails at once, the listener closes, requests in
// flight finish (their records acknowledged) and the producer flushes.
func (s *Service) Serve(ctx context.Context, ln net.Listener) error {
	// A second of the shutdown time is kept for flushing the producer.
	drain := orDefault(s.cfg.ShutdownTimeout, 10*time.Second) - time.Second
	err := health.Serve(ctx, s.log, "ingest", s.server, ln, s.checker, drain, "brokers", s.cfg.Kafka.Brokers,
		"events_topic", s.cfg.EventsTopic, "quarantine_topic", s.cfg.QuarantineTopic)
	if cerr := s.producer.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("flush producer: %w", cerr))
	}
	if err == nil {
		s.log.Info("ingest stopped")
	}
	return err
}
