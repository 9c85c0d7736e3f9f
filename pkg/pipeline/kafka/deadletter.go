package kafka

import (
	"context"
	"fmt"
	"strconv"

	kafkago "github.com/segmentio/kafka-go"
)

// DeadLetter is a message that can never be processed, with the reason.
type DeadLetter struct {
	Message Message
	Reason  string
}

// The headers a dead letter carries besides the original message's own.
const (
	HeaderReason            = "dlq-reason"
	HeaderOriginalTopic     = "dlq-original-topic"
	HeaderOriginalPartition = "dlq-original-partition"
	HeaderOriginalOffset    = "dlq-original-offset"
)

// DeadLetterWriter writes dead letters to their topic.
type DeadLetterWriter struct {
	w *Writer
}

// NewDeadLetterWriter returns a writer of dead letters to topic.
func (c Cluster) NewDeadLetterWriter(p ProducerConfig, topic string) (*DeadLetterWriter, error) {
	w, err := c.NewWriter(p, topic)
	if err != nil {
		return nil, fmt.Errorf("dead-letter writer: %w", err)
	}
	return &DeadLetterWriter{w: w}, nil
}

// Write stores each dead letter as its original key, value and headers,
// with headers saying where it came from and why it was set aside.
func (d *DeadLetterWriter) Write(ctx context.Context, letters []DeadLetter) error {
	if len(letters) == 0 {
		return nil
	}
	km := make([]kafkago.Message, len(letters))
	for i, l := range letters {
		km[i] = deadLetterMessage(l)
	}
	return d.w.write(ctx, km)
}

func deadLetterMessage(l DeadLetter) kafkago.Message {
	m := l.Message
	h := make([]kafkago.Header, 0, len(m.Headers)+4)
	for _, x := range m.Headers {
		h = append(h, kafkago.Header{Key: x.Key, Value: x.Value})
	}
	h = append(h,
		kafkago.Header{Key: HeaderReason, Value: []byte(l.Reason)},
		kafkago.Header{Key: HeaderOriginalTopic, Value: []byte(m.Topic)},
		kafkago.Header{Key: HeaderOriginalPartition, Value: []byte(strconv.Itoa(m.Partition))},
		kafkago.Header{Key: HeaderOriginalOffset, Value: []byte(strconv.FormatInt(m.Offset, 10))},
	)
	return kafkago.Message{Key: m.Key, Value: m.Value, Headers: h}
}

// Close flushes and closes the writer.
func (d *DeadLetterWriter) Close() error { return d.w.Close() }
