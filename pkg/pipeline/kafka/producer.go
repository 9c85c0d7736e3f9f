// Package kafka is the Kafka-facing plumbing: the producer the ingest
// service publishes through, topic creation at start-up and broker checks.
package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/assistantcms/cms/pkg/pipeline/event"
)

// ProducerConfig configures the Kafka writers. Zero fields take defaults
// chosen for a request path: a request waits for its batch, so batches
// must close after milliseconds, not kafka-go's default second.
type ProducerConfig struct {
	Brokers []string
	// BatchTimeout is how long a partial batch waits for more records.
	BatchTimeout time.Duration
	// BatchSize is the most records one produce request carries per partition.
	BatchSize int
	// BatchBytes caps one produce request per partition.
	BatchBytes int64
	// Compression is none, gzip, snappy, lz4 or zstd.
	Compression string
	Logger      *slog.Logger
}

// Defaults for ProducerConfig.
const (
	DefaultBatchTimeout = 2 * time.Millisecond
	// DefaultBatchSize is kafka-go's own default. kafka-go allocates room
	// for this many records with every batch, so a large value costs an
	// allocation of that size every few milliseconds per partition.
	DefaultBatchSize = 100
	// DefaultMaxMessageBytes is the max.message.bytes the services give
	// the topics they create: room for the reference client's largest
	// events and for quarantined events kept whole. Managed Kafka services
	// cap this setting; KAFKA_MAX_MESSAGE_BYTES sets it to what a cluster
	// allows.
	DefaultMaxMessageBytes = 8 << 20
	// RecordFraming is the room a topic's max.message.bytes must leave
	// beside a record's value: the record batch's header, the record's key
	// (app and session IDs) and its own fields.
	RecordFraming = 64 << 10
	// DefaultBatchBytes keeps one produce request per partition within
	// the topics' max.message.bytes: the broker refuses a larger batch
	// whole, which would fail every record in it.
	DefaultBatchBytes  = DefaultMaxMessageBytes
	DefaultCompression = "lz4"
)

func (c ProducerConfig) withDefaults() ProducerConfig {
	if c.BatchTimeout <= 0 {
		c.BatchTimeout = DefaultBatchTimeout
	}
	if c.BatchSize <= 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.BatchBytes <= 0 {
		c.BatchBytes = DefaultBatchBytes
	}
	if c.Compression == "" {
		c.Compression = DefaultCompression
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// ParseCompression maps a codec name to kafka-go's codec.
func ParseCompression(name string) (kafkago.Compression, error) {
	switch strings.ToLower(name) {
	case "none", "":
		return 0, nil
	case "gzip":
		return kafkago.Gzip, nil
	case "snappy":
		return kafkago.Snappy, nil
	case "lz4":
		return kafkago.Lz4, nil
	case "zstd":
		return kafkago.Zstd, nil
	}
	return 0, fmt.Errorf("unknown compression %q: want none, gzip, snappy, lz4 or zstd", name)
}

// NewWriter returns a synchronous writer for topic with acks from all
// in-sync replicas and the Java client's murmur2 partitioner, so that a
// key lands on the same partition whichever client wrote it. The ingest
// service and its benchmark ceiling both use it.
func NewWriter(c ProducerConfig, topic string) (*kafkago.Writer, error) {
	c = c.withDefaults()
	codec, err := ParseCompression(c.Compression)
	if err != nil {
		return nil, err
	}
	if len(c.Brokers) == 0 {
		return nil, errors.New("no Kafka brokers configured")
	}
	logger := c.Logger.With("topic", topic)
	return &kafkago.Writer{
		Addr:         kafkago.TCP(c.Brokers...),
		Topic:        topic,
		Balancer:     &kafkago.Murmur2Balancer{},
		RequiredAcks: kafkago.RequireAll,
		BatchTimeout: c.BatchTimeout,
		BatchSize:    c.BatchSize,
		BatchBytes:   c.BatchBytes,
		Compression:  codec,
		// The caller's context bounds the whole write; retries inside it
		// ride out a leader change without failing the request.
		MaxAttempts:     5,
		WriteBackoffMin: 20 * time.Millisecond,
		WriteBackoffMax: 250 * time.Millisecond,
		ErrorLogger: kafkago.LoggerFunc(func(msg string, args ...any) {
			logger.Warn("kafka writer: " + fmt.Sprintf(msg, args...))
		}),
	}, nil
}

// Producer publishes accepted events and quarantine records.
type Producer struct {
	events     *kafkago.Writer
	quarantine *kafkago.Writer
}

// NewProducer returns a producer writing to the two topics.
func NewProducer(c ProducerConfig, eventsTopic, quarantineTopic string) (*Producer, error) {
	ev, err := NewWriter(c, eventsTopic)
	if err != nil {
		return nil, fmt.Errorf("events writer: %w", err)
	}
	q, err := NewWriter(c, quarantineTopic)
	if err != nil {
		return nil, fmt.Errorf("quarantine writer: %w", err)
	}
	return &Producer{events: ev, quarantine: q}, nil
}

// Publish writes both record sets and returns once the broker has
// acknowledged every record, or with an error. After an error some records
// may still have been stored: callers treat the batch as not written and
// the client's retry produces duplicates that collapse by event ID.
func (p *Producer) Publish(ctx context.Context, accepted, quarantined []event.Message) error {
	var qErr chan error
	if len(quarantined) > 0 && len(accepted) > 0 {
		qErr = make(chan error, 1)
		go func() { qErr <- write(ctx, p.quarantine, quarantined) }()
	} else if len(quarantined) > 0 {
		return write(ctx, p.quarantine, quarantined)
	}
	err := write(ctx, p.events, accepted)
	if qErr != nil {
		err = errors.Join(err, <-qErr)
	}
	return err
}

func write(ctx context.Context, w *kafkago.Writer, msgs []event.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	km := make([]kafkago.Message, len(msgs))
	for i, m := range msgs {
		km[i] = kafkago.Message{Key: m.Key, Value: m.Value}
	}
	if err := w.WriteMessages(ctx, km...); err != nil {
		return fmt.Errorf("write %d records to %s: %w", len(msgs), w.Topic, firstError(err))
	}
	return nil
}

// firstError shortens kafka-go's per-message error list to one cause.
func firstError(err error) error {
	var we kafkago.WriteErrors
	if errors.As(err, &we) {
		for _, e := range we {
			if e != nil {
				return fmt.Errorf("%d of %d failed, first: %w", we.Count(), len(we), e)
			}
		}
	}
	return err
}

// Close flushes and closes the writers.
func (p *Producer) Close() error {
	return errors.Join(p.events.Close(), p.quarantine.Close())
}
