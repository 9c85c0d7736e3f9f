package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/assistantcms/cms/pkg/edge/httpserve"
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
	// TopicRetention and TopicMinInsyncReplicas are the retention.ms and
	// min.insync.replicas of topics created at start (see kafka.TopicSpec).
	TopicRetention         time.Duration
	TopicMinInsyncReplicas int
	// SessionTimeout is how long the group waits for a silent member
	// before giving its partitions to others; zero means the kafka
	// package's default.
	SessionTimeout time.Duration
	// FetchMinBytes and FetchMaxWait are how many bytes of records a
	// fetch waits for, and how long at most; zero means the kafka
	// package's defaults.
	FetchMinBytes int
	FetchMaxWait  time.Duration
	ClickHouse    chstore.Config
	// Schema says whether the service applies the ClickHouse migrations
	// at start or waits for another step to apply them.
	Schema   Schema
	Consumer Config
	Producer kafka.ProducerConfig
	// HTTP bounds the connections of the metrics and health endpoints;
	// zero fields take httpserve's defaults.
	HTTP httpserve.Limits
}

// Schema is how a starting consumer gets the ClickHouse schema it needs.
type Schema int

// The ways.
const (
	// SchemaApply applies missing migrations itself (safe with several
	// consumers starting at once).
	SchemaApply Schema = iota
	// SchemaWait waits until "consumer migrate" (for example a Kubernetes
	// Job run with each release) has applied every migration this build
	// has, so consumers never write to a schema older than their own and
	// need no DDL rights.
	SchemaWait
)

// ParseSchema reads "apply" or "wait".
func ParseSchema(s string) (Schema, error) {
	switch s {
	case "apply":
		return SchemaApply, nil
	case "wait":
		return SchemaWait, nil
	}
	return 0, fmt.Errorf("ClickHouse schema mode %q: want apply or wait", s)
}

// schemaPoll is how often a waiting consumer looks at the schema again.
const schemaPoll = 2 * time.Second

func (m Schema) prepare(ctx context.Context, store *chstore.Store, log *slog.Logger) error {
	if m == SchemaApply {
		if _, err := store.Migrate(ctx); err != nil {
			return fmt.Errorf("migrate ClickHouse schema: %w", err)
		}
		return nil
	}
	logged := false
	err := store.WaitMigrated(ctx, schemaPoll, func(pending []int) {
		if !logged {
			log.Warn("waiting for the ClickHouse schema: run \"consumer migrate\" to apply the pending migrations", "pending", pending)
			logged = true
		}
	})
	if err == nil && logged {
		log.Info("ClickHouse schema migrated; starting")
	}
	return err
}

// httpDrain bounds the wait for scrapes and probes in flight on shutdown,
// before the final flush.
const httpDrain = 2 * time.Second

// Service is a running consumer with its HTTP endpoints.
type Service struct {
	cfg      ServiceConfig
	log      *slog.Logger
	store    *chstore.Store
	reader   *kafka.GroupReader
	dlq      *kafka.DeadLetterWriter
	consumer *Consumer
	checker  *httpserve.Checker
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
	if err := cfg.Schema.prepare(ctx, store, log); err != nil {
		store.Close()
		return nil, err
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = kafka.DefaultMaxMessageBytes
	}
	topic := func(name string, partitions int) kafka.TopicSpec {
		return kafka.TopicSpec{Name: name, Partitions: partitions, ReplicationFactor: cfg.TopicReplication, MaxMessageBytes: cfg.MaxMessageBytes,
			Retention: cfg.TopicRetention, MinInsyncReplicas: cfg.TopicMinInsyncReplicas}
	}
	topics := []kafka.TopicSpec{topic(cfg.Topic, cfg.TopicPartitions), topic(cfg.QuarantineTopic, cfg.TopicPartitions), topic(cfg.DeadLetterTopic, 1)}
	log.Info("connecting to Kafka", "kafka", cfg.Kafka)
	if err := cfg.Kafka.EnsureTopics(ctx, topics); err != nil {
		store.Close()
		return nil, fmt.Errorf("prepare Kafka topics: %w", err)
	}
	reg := httpserve.NewRegistry()
	cfg.Kafka.ReportDurability(ctx, topics, kafka.NewDurabilityGauge(reg), log)
	reader, err := cfg.Kafka.NewGroupReader(kafka.ReaderConfig{
		GroupID: cfg.GroupID, Topics: []string{cfg.Topic, cfg.QuarantineTopic}, MaxMessageBytes: cfg.MaxMessageBytes,
		SessionTimeout: cfg.SessionTimeout, MinBytes: cfg.FetchMinBytes, MaxWait: cfg.FetchMaxWait, Logger: log,
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

	c := New(cfg.Consumer, reader, store, dlq, NewMetrics(reg), log)

	checker := httpserve.NewChecker()
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
	httpserve.Mount(httpserve.GetOn(mux), reg, checker)
	srv := httpserve.NewServer(mux, cfg.HTTP.Or(httpserve.DefaultLimits()), log)
	return &Service{cfg: cfg, log: log, store: store, reader: reader, dlq: dlq, consumer: c, checker: checker, server: srv}, nil
}

// Run serves the HTTP endpoints on ln and consumes until ctx ends. Then
// readiness fails, the listener closes and requests in flight finish;
// after them the consumer flushes and commits its current batch, leaves
// the group and Run returns.
func (s *Service) Run(ctx context.Context, ln net.Listener) error {
	// The consumer stops when serving has ended, not with ctx, so that
	// its final flush comes last.
	cctx, stopConsuming := context.WithCancel(context.WithoutCancel(ctx))
	defer stopConsuming()
	consumed := make(chan error, 1)
	go func() { consumed <- s.consumer.Run(cctx) }()
	v := s.store.Version()
	err := httpserve.Serve(ctx, s.log, "consumer", s.server, ln, s.checker, httpDrain,
		"topic", s.cfg.Topic, "quarantine_topic", s.cfg.QuarantineTopic, "group", s.cfg.GroupID,
		"clickhouse", s.cfg.ClickHouse.Addrs, "server_version", fmt.Sprintf("%d.%d", v.Major, v.Minor))
	stopConsuming()
	err = errors.Join(err, <-consumed)
	// Closing the reader leaves the group, so partitions move at once
	// instead of after a session timeout.
	err = errors.Join(err, s.reader.Close(), s.dlq.Close(), s.store.Close())
	if err == nil {
		s.log.Info("consumer stopped")
	}
	return err
}
