package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// Message is a record read from a topic, with where it was read.
type Message struct {
	Topic     string
	Partition int
	Offset    int64
	// HighWaterMark is the partition's end offset when the message was
	// fetched: the partition's lag after it is HighWaterMark-Offset-1.
	HighWaterMark int64
	Key, Value    []byte
	Headers       []Header
}

// Header is a record header.
type Header struct {
	Key   string
	Value []byte
}

// Position names a message of a partition.
type Position struct {
	Topic     string
	Partition int
	Offset    int64
}

// ReaderConfig configures a consumer-group reader. Zero durations take the
// defaults below.
type ReaderConfig struct {
	GroupID string
	Topics  []string
	// MaxMessageBytes is the largest record the topics take; every fetch
	// has room for at least one of them. Zero means DefaultMaxMessageBytes.
	MaxMessageBytes int
	// SessionTimeout is how long the group waits for a silent member
	// before giving its partitions to others.
	SessionTimeout time.Duration
	// MinBytes is how many bytes of records a fetch waits for, up to
	// MaxWait, before the broker answers it. Zero means DefaultMinBytes;
	// 1 answers as soon as there is one record.
	MinBytes int
	// MaxWait bounds how long one fetch waits for MinBytes of records:
	// under a steady trickle it is how late a record can be handed out.
	MaxWait time.Duration
	Logger  *slog.Logger
}

// Defaults for ReaderConfig. A fetch of a partition waits for 1 MiB of
// records or 100 ms (the broker answers after three quarters of MaxWait,
// the rest being left for the round trip): at a low rate each fetch then
// carries a tenth of a second's records instead of the one or few of a
// producer's batch, each handed to the consumer as it is read, and a
// record reaches the consumer at most 75 ms later than it could. A full
// fetch answers at once, so draining a backlog is not slowed.
const (
	DefaultSessionTimeout = 10 * time.Second
	DefaultMinBytes       = 1 << 20
	DefaultMaxWait        = 100 * time.Millisecond
)

// GroupReader reads topics as a member of a consumer group. Offsets are
// committed only when Commit is called.
type GroupReader struct {
	r *kafkago.Reader
}

// NewGroupReader joins the consumer group; the first fetch waits for the
// partitions to be assigned. Partitions the group has no offset for are
// read from the start.
func (c Cluster) NewGroupReader(rc ReaderConfig) (*GroupReader, error) {
	dialer, err := c.dialer()
	if err != nil {
		return nil, err
	}
	if rc.GroupID == "" || len(rc.Topics) == 0 {
		return nil, fmt.Errorf("a group reader needs a group ID and topics (got %q, %v)", rc.GroupID, rc.Topics)
	}
	if rc.MaxMessageBytes <= 0 {
		rc.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if rc.SessionTimeout <= 0 {
		rc.SessionTimeout = DefaultSessionTimeout
	}
	if rc.MaxWait <= 0 {
		rc.MaxWait = DefaultMaxWait
	}
	if rc.MinBytes <= 0 {
		rc.MinBytes = DefaultMinBytes
	}
	logger := rc.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// At least one whole record of the largest size the topics take.
	maxBytes := max(16<<20, rc.MaxMessageBytes+1<<20)
	return &GroupReader{r: kafkago.NewReader(kafkago.ReaderConfig{
		Brokers:           c.Brokers,
		Dialer:            dialer,
		GroupID:           rc.GroupID,
		GroupTopics:       rc.Topics,
		MinBytes:          min(rc.MinBytes, maxBytes),
		MaxBytes:          maxBytes,
		MaxWait:           rc.MaxWait,
		CommitInterval:    0, // commits are explicit
		StartOffset:       kafkago.FirstOffset,
		SessionTimeout:    rc.SessionTimeout,
		HeartbeatInterval: rc.SessionTimeout / 4,
		RebalanceTimeout:  rc.SessionTimeout,
		ErrorLogger: kafkago.LoggerFunc(func(msg string, args ...any) {
			logger.Warn("kafka reader: " + fmt.Sprintf(msg, args...))
		}),
	})}, nil
}

// Fetch returns the next message of the partitions assigned to this
// member; it waits until there is one or ctx ends.
func (g *GroupReader) Fetch(ctx context.Context) (Message, error) {
	m, err := g.r.FetchMessage(ctx)
	if err != nil {
		return Message{}, err
	}
	out := Message{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, HighWaterMark: m.HighWaterMark, Key: m.Key, Value: m.Value}
	if len(m.Headers) > 0 {
		out.Headers = make([]Header, len(m.Headers))
		for i, h := range m.Headers {
			out.Headers[i] = Header{Key: h.Key, Value: h.Value}
		}
	}
	return out, nil
}

// Commit records that the group has processed each partition up to and
// including the position given for it.
func (g *GroupReader) Commit(ctx context.Context, done []Position) error {
	if len(done) == 0 {
		return nil
	}
	msgs := make([]kafkago.Message, len(done))
	for i, p := range done {
		msgs[i] = kafkago.Message{Topic: p.Topic, Partition: p.Partition, Offset: p.Offset}
	}
	if err := g.r.CommitMessages(ctx, msgs...); err != nil {
		return fmt.Errorf("commit offsets of %d partitions: %w", len(done), err)
	}
	return nil
}

// Close leaves the group, so that its partitions move to other members at
// once instead of after a session timeout.
func (g *GroupReader) Close() error {
	if err := g.r.Close(); err != nil {
		return fmt.Errorf("leave the consumer group: %w", err)
	}
	return nil
}
