package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/edge/cors"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/pipeline/event"
	"github.com/assistantcms/cms/pkg/pipeline/kafka"
	"github.com/assistantcms/cms/pkg/ratelimit"
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
	// TopicRetention and TopicMinInsyncReplicas are the retention.ms and
	// min.insync.replicas of topics created at start (see kafka.TopicSpec).
	TopicRetention         time.Duration
	TopicMinInsyncReplicas int
	Producer               kafka.ProducerConfig
	Handler                Config
	// Limits are the event rules; zero fields take event's defaults, and
	// MaxRecordBytes follows from MaxMessageBytes.
	Limits        event.Limits
	TokenCacheTTL time.Duration
	// TokenOutageGrace is how long past TokenCacheTTL a token looked up
	// before is still accepted while the content database cannot answer;
	// zero means auth.DefaultOutageGrace, negative none.
	TokenOutageGrace time.Duration
	// AuthFailureRate and AuthFailureBurst bound the failed
	// authentications of one client network (auth.Options).
	AuthFailureRate  float64
	AuthFailureBurst int
	RateLimitRPS     float64
	RateLimitBurst   int
	ShutdownTimeout  time.Duration
	StartupTimeout   time.Duration
	// HTTP bounds client connections; zero fields take the Default*
	// limits below, and a zero WriteTimeout follows the read and produce
	// timeouts (see HTTPLimits).
	HTTP httpserve.Limits
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
	// DefaultMaxHeaderBytes bounds a request's line and headers.
	DefaultMaxHeaderBytes = 64 << 10
	// writeTimeoutMargin is what the write timeout allows beyond reading
	// a request and waiting for the broker: answering.
	writeTimeoutMargin = 5 * time.Second
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
	checker  *httpserve.Checker
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
		// Ingest's own: what the shares of body memory hold.
		l.MaxEvents = DefaultMaxEvents
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
	limits, err := cfg.EventLimits()
	if err != nil {
		return err
	}
	if w, p := cfg.HTTP.WriteTimeout, cfg.Handler.withDefaults().ProduceTimeout; w > 0 && w <= p {
		// Otherwise an answer the broker acknowledged would be cut off
		// unsent, and the client would send the batch again.
		return fmt.Errorf("write timeout %s must be longer than the produce timeout %s", w, p)
	}
	return cfg.Handler.WithMaxEvents(limits.MaxEvents).check()
}

// HTTPLimits completes cfg.HTTP: the Default* limits for zero fields, and
// for a zero WriteTimeout one that covers reading a request, waiting for
// the broker's acknowledgement and answering: the read timeout plus the
// produce timeout plus 5s.
func (cfg ServiceConfig) HTTPLimits() httpserve.Limits {
	l := cfg.HTTP.Or(httpserve.Limits{ReadHeaderTimeout: DefaultReadHeaderTimeout, ReadTimeout: DefaultReadTimeout,
		IdleTimeout: DefaultIdleTimeout, MaxHeaderBytes: DefaultMaxHeaderBytes})
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = l.ReadTimeout + cfg.Handler.withDefaults().ProduceTimeout + writeTimeoutMargin
	}
	return l
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
	if note := cfg.Handler.WithMaxEvents(limits.MaxEvents).MemoryShareNote(); note != "" {
		log.Warn("each app's share of body memory is more than a quarter", "detail", note)
	}
	startup := cfg.StartupTimeout
	if startup <= 0 {
		startup = 30 * time.Second
	}
	sctx, cancel := context.WithTimeout(ctx, startup)
	defer cancel()
	log.Info("connecting to Kafka", "kafka", cfg.Kafka)
	if err := cfg.Kafka.EnsureTopics(sctx, cfg.Topics()); err != nil {
		return nil, fmt.Errorf("prepare Kafka topics: %w", err)
	}
	reg := httpserve.NewRegistry()
	cfg.Kafka.ReportDurability(sctx, cfg.Topics(), kafka.NewDurabilityGauge(reg), log)

	cfg.Producer.BatchBytes = int64(cfg.MaxMessageBytes)
	cfg.Producer.Logger = log
	producer, err := cfg.Kafka.NewProducer(cfg.Producer, cfg.EventsTopic, cfg.QuarantineTopic)
	if err != nil {
		return nil, fmt.Errorf("create producer: %w", err)
	}
	grace := cfg.TokenOutageGrace
	if grace == 0 {
		grace = auth.DefaultOutageGrace
	}
	authn, err := auth.NewAuthenticator(store, auth.Options{CacheTTL: cfg.TokenCacheTTL, OutageGrace: grace,
		FailureRate: cfg.AuthFailureRate, FailureBurst: cfg.AuthFailureBurst})
	if err != nil {
		return nil, err
	}
	limiter := ratelimit.Optional(cfg.RateLimitRPS, cfg.RateLimitBurst)

	handler := New(cfg.Handler, event.NewValidator(limits), authn, producer, limiter, NewMetrics(reg), log)

	checker := httpserve.NewChecker()
	topicNames := []string{cfg.EventsTopic, cfg.QuarantineTopic}
	checker.Add("kafka", func(ctx context.Context) error { return cfg.Kafka.CheckTopics(ctx, topicNames) })
	checker.Add("content_db", store.Ping)

	mux := http.NewServeMux()
	handler.Register(mux)
	httpserve.Mount(httpserve.GetOn(mux), reg, checker)
	srv := httpserve.NewServer(cfg.CORS.Handler(mux), cfg.HTTPLimits(), log)
	return &Service{cfg: cfg, log: log, server: srv, producer: producer, checker: checker}, nil
}

// Topics are the topics ingest writes, as they must be on the brokers.
func (cfg *ServiceConfig) Topics() []kafka.TopicSpec {
	return []kafka.TopicSpec{
		{Name: cfg.EventsTopic, Partitions: cfg.TopicPartitions, ReplicationFactor: cfg.TopicReplication, MaxMessageBytes: cfg.MaxMessageBytes,
			Retention: cfg.TopicRetention, MinInsyncReplicas: cfg.TopicMinInsyncReplicas},
		{Name: cfg.QuarantineTopic, Partitions: cfg.TopicPartitions, ReplicationFactor: cfg.TopicReplication, MaxMessageBytes: cfg.MaxMessageBytes,
			Retention: cfg.TopicRetention, MinInsyncReplicas: cfg.TopicMinInsyncReplicas},
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
	err := httpserve.Serve(ctx, s.log, "ingest", s.server, ln, s.checker, drain, "brokers", s.cfg.Kafka.Brokers,
		"events_topic", s.cfg.EventsTopic, "quarantine_topic", s.cfg.QuarantineTopic)
	if cerr := s.producer.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("flush producer: %w", cerr))
	}
	if err == nil {
		s.log.Info("ingest stopped")
	}
	return err
}
