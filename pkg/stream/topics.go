package stream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// TopicSpec describes a topic to create when it is missing.
type TopicSpec struct {
	Name              string
	Partitions        int
	ReplicationFactor int
}

func client(brokers []string) *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
}

// EnsureTopics creates the topics that do not exist yet. An existing topic
// is left as it is.
func EnsureTopics(ctx context.Context, brokers []string, specs []TopicSpec) error {
	req := &kafka.CreateTopicsRequest{}
	for _, s := range specs {
		req.Topics = append(req.Topics, kafka.TopicConfig{
			Topic:             s.Name,
			NumPartitions:     s.Partitions,
			ReplicationFactor: s.ReplicationFactor,
		})
	}
	resp, err := client(brokers).CreateTopics(ctx, req)
	if err != nil {
		return fmt.Errorf("create topics on %v: %w", brokers, err)
	}
	var errs []error
	for _, s := range specs {
		if err := resp.Errors[s.Name]; err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
			errs = append(errs, fmt.Errorf("create topic %q (%d partitions, replication %d): %w",
				s.Name, s.Partitions, s.ReplicationFactor, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	return CheckTopics(ctx, brokers, names)
}

// CheckTopics asks the brokers for the topics' metadata: it fails when no
// broker answers or a topic is missing. Readiness probes use it.
func CheckTopics(ctx context.Context, brokers []string, topics []string) error {
	md, err := client(brokers).Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		return fmt.Errorf("read metadata from %v: %w", brokers, err)
	}
	for _, t := range md.Topics {
		if t.Error != nil {
			return fmt.Errorf("topic %q: %w", t.Name, t.Error)
		}
		if len(t.Partitions) == 0 {
			return fmt.Errorf("topic %q has no partitions", t.Name)
		}
	}
	if len(md.Topics) != len(topics) {
		return fmt.Errorf("brokers %v know %d of the topics %v", brokers, len(md.Topics), topics)
	}
	return nil
}
