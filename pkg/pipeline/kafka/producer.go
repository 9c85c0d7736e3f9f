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
	// BatchTimeout is how long a Writer's partial batch waits for more
	// records.
	BatchTimeout time.Duration
	// BatchSize is the most records one Writer's produce request carries
	// per partition.
	BatchSize int
	// BatchBytes caps one produce request per partition (Writer), or
	// whole (Producer).
	BatchBytes int64
	// Linger is the least time between two of the Producer's produce
	// requests to one broker: records that come sooner wait for the rest
	// of it and go together, and a record that finds the broker idle for
	// longer goes at once. Zero sends at once.
	Linger time.Duration
	// MaxInFlight is how many produce requests the Producer has
	// unanswered per broker at most; records queue meanwhile and go in
	// the next request.
	MaxInFlight int
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
	DefaultMaxInFlight = 1
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
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
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

// Writer writes records to one topic.
type Writer struct {
	w         *kafkago.Writer
	transport *kafkago.Transport
	cluster   Cluster
}

// NewWriter returns a synchronous writer for topic with acks from all
// in-sync replicas and the Java client's murmur2 partitioner, so that a
// key lands on the same partition whichever client wrote it: kafka-go's
// Writer, as it is. Dead letters and the benchmarks' ceiling use it; ingest
// uses the Producer.
func (c Cluster) NewWriter(p ProducerConfig, topic string) (*Writer, error) {
	p = p.withDefaults()
	codec, err := ParseCompression(p.Compression)
	if err != nil {
		return nil, err
	}
	t, err := c.transport()
	if err != nil {
		return nil, err
	}
	logger := p.Logger.With("topic", topic)
	return &Writer{transport: t, cluster: c, w: &kafkago.Writer{
		Addr:         kafkago.TCP(c.Brokers...),
		Topic:        topic,
		Transport:    t,
		Balancer:     &kafkago.Murmur2Balancer{},
		RequiredAcks: kafkago.RequireAll,
		BatchTimeout: p.BatchTimeout,
		BatchSize:    p.BatchSize,
		BatchBytes:   p.BatchBytes,
		Compression:  codec,
		// The caller's context bounds the whole write; retries inside it
		// ride out a leader change without failing the request.
		MaxAttempts:     5,
		WriteBackoffMin: 20 * time.Millisecond,
		WriteBackoffMax: 250 * time.Millisecond,
		ErrorLogger: kafkago.LoggerFunc(func(msg string, args ...any) {
			logger.Warn("kafka writer: " + fmt.Sprintf(msg, args...))
		}),
	}}, nil
}

// Topic is the topic w writes to.
func (w *Writer) Topic() string { return w.w.Topic }

// Write returns once the brokers have acknowledged every record, or with
// an error; after an error some of the records may have been stored. The
// records are event's own, taken as they are: the one copy is into the
// client's messages.
func (w *Writer) Write(ctx context.Context, recs []event.Record) error {
	if len(recs) == 0 {
		return nil
	}
	km := make([]kafkago.Message, len(recs))
	for i, r := range recs {
		km[i] = kafkago.Message{Key: r.Key, Value: r.Value}
	}
	return w.write(ctx, km)
}

func (w *Writer) write(ctx context.Context, km []kafkago.Message) error {
	if err := w.w.WriteMessages(ctx, km...); err != nil {
		err = firstError(err)
		// Only what the error itself shows: this is the hot path, and
		// start-up and readiness checks diagnose the connection.
		if e := w.cluster.explainKnown(err); e != nil {
			err = e
		}
		return fmt.Errorf("write %d records to %s: %w", len(km), w.w.Topic, err)
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

// Close flushes the records not yet written and closes the connections.
func (w *Writer) Close() error {
	err := w.w.Close()
	w.transport.CloseIdleConnections()
	return err
}

// Producer publishes accepted events and quarantine records. The records
// of concurrent calls share produce requests (see coalescer).
type Producer struct {
	c                  *coalescer
	events, quarantine string
}

// NewProducer returns a producer writing to the two topics.
func (c Cluster) NewProducer(p ProducerConfig, eventsTopic, quarantineTopic string) (*Producer, error) {
	p = p.withDefaults()
	co, err := newCoalescer(c, p, eventsTopic, quarantineTopic)
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	return &Producer{c: co, events: eventsTopic, quarantine: quarantineTopic}, nil
}

// Publish writes both record sets and returns once the broker has
// acknowledged every record, or with an error. After an error some records
// may still have been stored, and the records may still be read: callers
// treat the batch as not written and leave its memory to the garbage
// collector, and the client's retry produces duplicates that collapse by
// event ID.
func (p *Producer) Publish(ctx context.Context, accepted, quarantined []event.Record) error {
	return p.c.publish(ctx, topicRecords{p.events, accepted}, topicRecords{p.quarantine, quarantined})
}

// Close sends the records queued and closes the connections.
func (p *Producer) Close() error {
	return p.c.close()
}
