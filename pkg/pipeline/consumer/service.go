package consumer

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

	"github.com/assistantcms/cms/pkg/health"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	"github.com/assistantcms/cms/pkg/pipeline/kafka"
)

// ServiceConfig is everything the consumer process is configured with.
type ServiceConfig struct {
	Kafka kafka.Cluster
	Topic string
	// QuarantineTopic holds the events ingest refused; the group reads it
	// too, into the quarantine table.
	QuarantineTopic  string
	GroupID          string
	DeadLetterTopic  string
	TopicPartitions  int
	TopicReplication int
	// MaxMessageBytes is the max.message.bytes of topics created here
	// (raised on existing ones that have less) and bounds the records the
	// consumer reads and dead-letters; zero means the kafka package's default.
	MaxMessageBytes int
	// SessionTimeout is how long the group waits for a silent member
	// before giving its partitions to others; zero means the kafka
	// package's default.
	SessionTimeout time.Duration
	// MaxWait bounds how long one fetch waits for new messages; zero means
	// the kafka package's default.
	MaxWait    time.Duration
	ClickHouse chstore.Config
	Consumer   Config
	Producer   kafka.ProducerConfig
}

// Service is a running consumer with its HTTP endpoints.
type Service struct {
	cfg      ServiceConfig
	log      *slog.Logger
	store    *chstore.Store
	reader   *kafka.GroupReader
	dlq      *kafka.DeadLetterWriter
	consumer *Consumer
	checker  *health.Checker
	server   *http.Server
}

// NewService connects to ClickHouse, applies the schema, makes sure the
// topics exist and joins the consumer group.
func NewService(ctx context.Context, cfg ServiceConfig, log *slog.Logger) (*Service, error) {
	if cfg.Topic == "" || cfg.QuarantineTopic == "" || cfg.DeadLetterTopic == "" {
		return nil, fmt.Errorf("the events, quarantine and dead-letter topics must all be named (got %q, %q, %q)",
			cfg.Topic, cfg.QuarantineTopic, cfg.DeadLetterTopic)
	}
	store, err := chstore.Open(ctx, cfg.ClickHouse)
	if err != nil {
		return nil, err
	}
	if _, err := store.Migrate(ctx); err != nil {
		store.Close()
		return nil, fmt.Errorf("migrate ClickHouse schema: %w", err)
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = kafka.DefaultMaxMessageBytes
	}
	topics := []kafka.TopicSpec{
		{Name: cfg.Topic, Partitions: cfg.TopicPartitions, ReplicationFactor: cfg.TopicReplication, MaxMessageBytes: cfg.MaxMessageBytes},
		{Name: cfg.QuarantineTopic, Partitions: cfg.TopicPartitions, ReplicationFactor: cfg.TopicReplication, MaxMessageBytes: cfg.MaxMessageBytes},
		{Name: cfg.DeadLetterTopic, Partitions: 1, ReplicationFactor: cfg.TopicReplication, MaxMessageBytes: cfg.MaxMessageBytes},
	}
	if err := cfg.Kafka.EnsureTopics(ctx, topics); err != nil {
		store.Close()
		return nil, fmt.Errorf("prepare Kafka topics: %w", err)
	}
	reader, err := cfg.Kafka.NewGroupReader(kafka.ReaderConfig{
		GroupID: cfg.GroupID, Topics: []string{cfg.Topic, cfg.QuarantineTopic}, MaxMessageBytes: cfg.MaxMessageBytes,
		SessionTimeout: cfg.SessionTimeout, MaxWait: cfg.MaxWait, Logger: log,
	})
	if err != nil {
		store.Close()
		return nil, err
	}
	cfg.Producer.Logger = log
	if cfg.Producer.BatchBytes <= 0 {
		cfg.Producer.BatchBytes = int64(cfg.MaxMessageBytes)
	}
	cfg.Consumer.QuarantineTopic = cfg.QuarantineTopic
	dlq, err := cfg.Kafka.NewDeadLetterWriter(cfg.Producer, cfg.DeadLetterTopic)
	if err != nil {
		reader.Close()
		store.Close()
		return nil, err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	c := New(cfg.Consumer, reader, store, dlq, NewMetrics(reg), log)

	checker := health.New()
	checker.Add("clickhouse", store.Ping)
	checker.Add("inserts", func(context.Context) error {
		if !c.Healthy() {
			return errors.New("the last insert failed; retrying")
		}
		return nil
	})
	checker.Add("kafka", func(ctx context.Context) error {
		return cfg.Kafka.CheckTopics(ctx, []string{cfg.Topic, cfg.QuarantineTopic, cfg.DeadLetterTopic})
	})
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("GET /healthz", health.LiveHandler())
	mux.Handle("GET /readyz", checker.ReadyHandler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	return &Service{cfg: cfg, log: log, store: store, reader: reader, dlq: dlq, consumer: c, checker: checker, server: srv}, nil
}

// Run serves the HTTP endpoints on ln and consumes until ctx ends; then it
// flushes and commits the current batch, leaves the group and returns.
func (s *Service) Run(ctx context.Context, ln net.Listener) error {
	go func() {
		if err := s.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("serve HTTP", "err", err)
		}
	}()
	s.log.Info("consumer running", "addr", ln.Addr().String(), "topic", s.cfg.Topic, "quarantine_topic", s.cfg.QuarantineTopic, "group", s.cfg.GroupID,
		"clickhouse", s.cfg.ClickHouse.Addrs, "server_version", fmt.Sprintf("%d.%d", s.store.Version().Major, s.store.Version().Minor))
	err := s.consumer.Run(ctx)
	s.checker.SetStopping()
	// Closing the reader leaves the group, so partitions move at once
	// instead of after a session timeout.
	err = errors.Join(err, s.reader.Close(), s.dlq.Close(), s.store.Close())
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err = errors.Join(err, s.server.Shutdown(sctx))
	if err == nil {
		s.log.Info("consumer stopped")
	}
	return err
}
