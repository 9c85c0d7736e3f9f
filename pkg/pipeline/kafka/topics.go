package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// TopicSpec describes a topic to create when it is missing.
type TopicSpec struct {
	Name              string
	Partitions        int
	ReplicationFactor int
	// MaxMessageBytes, when set, is the topic's max.message.bytes: given
	// to a topic created here, and raised on an existing topic that has
	// less, since records that large would otherwise be refused by the
	// brokers for as long as the service runs.
	MaxMessageBytes int
	// Retention, when positive, is the retention.ms of a topic created
	// here; zero leaves the brokers' default.
	Retention time.Duration
	// MinInsyncReplicas is the min.insync.replicas of a topic created
	// here: how many replicas must hold a record before an acks=all write
	// succeeds. Zero means ReplicationFactor-1, at least 1, which rides
	// out the loss of one broker without refusing writes.
	MinInsyncReplicas int
}

// The topic settings set or checked here.
const (
	maxMessageBytes        = "max.message.bytes"
	retentionMs            = "retention.ms"
	minInsyncReplicas      = "min.insync.replicas"
	uncleanLeaderElection  = "unclean.leader.election.enable"
	replicationFactorLabel = "replication.factor"
)

// minInsync is the min.insync.replicas s asks for.
func (s TopicSpec) minInsync() int {
	if s.MinInsyncReplicas > 0 {
		return s.MinInsyncReplicas
	}
	return max(1, s.ReplicationFactor-1)
}

// check refuses a spec whose topic could never take an acks=all write or
// whose settings make no sense.
func (s TopicSpec) check() error {
	switch {
	case s.MinInsyncReplicas < 0:
		return fmt.Errorf("topic %q: %s %d must not be negative (TOPIC_MIN_INSYNC_REPLICAS; 0 means replication-1, at least 1)",
			s.Name, minInsyncReplicas, s.MinInsyncReplicas)
	case s.ReplicationFactor > 0 && s.minInsync() > s.ReplicationFactor:
		return fmt.Errorf("topic %q: %s %d (TOPIC_MIN_INSYNC_REPLICAS) exceeds its replication factor %d (TOPIC_REPLICATION): no acks=all write could ever succeed",
			s.Name, minInsyncReplicas, s.minInsync(), s.ReplicationFactor)
	case s.Retention < 0:
		return fmt.Errorf("topic %q: retention %s must not be negative (TOPIC_RETENTION; 0 keeps the brokers' default)", s.Name, s.Retention)
	case s.Retention > 0 && s.Retention < time.Millisecond:
		return fmt.Errorf("topic %q: retention %s is under the 1ms Kafka counts in (TOPIC_RETENTION)", s.Name, s.Retention)
	}
	return nil
}

// configEntries are the settings a topic created from s is given.
func (s TopicSpec) configEntries() []kafkago.ConfigEntry {
	e := []kafkago.ConfigEntry{{ConfigName: minInsyncReplicas, ConfigValue: strconv.Itoa(s.minInsync())}}
	if s.MaxMessageBytes > 0 {
		e = append(e, kafkago.ConfigEntry{ConfigName: maxMessageBytes, ConfigValue: strconv.Itoa(s.MaxMessageBytes)})
	}
	if s.Retention > 0 {
		e = append(e, kafkago.ConfigEntry{ConfigName: retentionMs, ConfigValue: strconv.FormatInt(s.Retention.Milliseconds(), 10)})
	}
	return e
}

// admin returns a client for admin requests and a function that closes
// its connections.
func (c Cluster) admin() (*kafkago.Client, func(), error) {
	t, err := c.transport()
	if err != nil {
		return nil, nil, err
	}
	return &kafkago.Client{Addr: kafkago.TCP(c.Brokers...), Transport: t, Timeout: 10 * time.Second}, t.CloseIdleConnections, nil
}

// EnsureTopics creates the topics that do not exist yet, with their
// spec's replication, min.insync.replicas, max.message.bytes and
// retention.ms, and raises the max.message.bytes of those that allow less
// than their spec. Other settings of an existing topic are left as they
// are; DurabilityRisks reports those that weaken acks=all.
func (c Cluster) EnsureTopics(ctx context.Context, specs []TopicSpec) error {
	req := &kafkago.CreateTopicsRequest{}
	for _, s := range specs {
		if err := s.check(); err != nil {
			return err
		}
		req.Topics = append(req.Topics, kafkago.TopicConfig{
			Topic:             s.Name,
			NumPartitions:     s.Partitions,
			ReplicationFactor: s.ReplicationFactor,
			ConfigEntries:     s.configEntries(),
		})
	}
	cl, done, err := c.admin()
	if err != nil {
		return err
	}
	defer done()
	resp, err := cl.CreateTopics(ctx, req)
	if err != nil {
		return fmt.Errorf("create topics on %v: %w", c.Brokers, c.explain(ctx, err))
	}
	var errs []error
	var existing []TopicSpec
	for _, s := range specs {
		switch err := resp.Errors[s.Name]; {
		case errors.Is(err, kafkago.TopicAlreadyExists):
			if s.MaxMessageBytes > 0 {
				existing = append(existing, s)
			}
		case err != nil:
			errs = append(errs, fmt.Errorf("create topic %q (%d partitions, replication %d, %s %d, %s %d, retention %s): %w",
				s.Name, s.Partitions, s.ReplicationFactor, minInsyncReplicas, s.minInsync(), maxMessageBytes, s.MaxMessageBytes, s.Retention, c.explain(ctx, err)))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := raiseMessageBytes(ctx, cl, existing); err != nil {
		return c.explain(ctx, err)
	}
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	return c.explain(ctx, checkTopics(ctx, cl, c.Brokers, names))
}

// topicMessageBytes reads a topic's max.message.bytes as the brokers
// apply it (the topic's own setting or the brokers' default).
func (c Cluster) topicMessageBytes(ctx context.Context, topic string) (int, error) {
	cl, done, err := c.admin()
	if err != nil {
		return 0, err
	}
	defer done()
	got, err := describeMessageBytes(ctx, cl, []TopicSpec{{Name: topic}})
	if err != nil {
		return 0, c.explain(ctx, err)
	}
	return got[topic], nil
}

func describeMessageBytes(ctx context.Context, c *kafkago.Client, specs []TopicSpec) (map[string]int, error) {
	req := &kafkago.DescribeConfigsRequest{}
	for _, s := range specs {
		req.Resources = append(req.Resources, kafkago.DescribeConfigRequestResource{
			ResourceType: kafkago.ResourceTypeTopic, ResourceName: s.Name, ConfigNames: []string{maxMessageBytes},
		})
	}
	resp, err := c.DescribeConfigs(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("describe the configuration of topics: %w", err)
	}
	got := map[string]int{}
	for _, r := range resp.Resources {
		if r.Error != nil {
			return nil, fmt.Errorf("describe the configuration of topic %q: %w", r.ResourceName, r.Error)
		}
		for _, e := range r.ConfigEntries {
			if e.ConfigName != maxMessageBytes {
				continue
			}
			n, err := strconv.Atoi(e.ConfigValue)
			if err != nil {
				return nil, fmt.Errorf("topic %q has %s %q, not a number", r.ResourceName, maxMessageBytes, e.ConfigValue)
			}
			got[r.ResourceName] = n
		}
	}
	return got, nil
}

// raiseMessageBytes sets max.message.bytes on the topics that allow less
// than their spec.
func raiseMessageBytes(ctx context.Context, c *kafkago.Client, specs []TopicSpec) error {
	if len(specs) == 0 {
		return nil
	}
	got, err := describeMessageBytes(ctx, c, specs)
	if err != nil {
		return err
	}
	req := &kafkago.IncrementalAlterConfigsRequest{}
	for _, s := range specs {
		if n, ok := got[s.Name]; ok && n >= s.MaxMessageBytes {
			continue
		}
		req.Resources = append(req.Resources, kafkago.IncrementalAlterConfigsRequestResource{
			ResourceType: kafkago.ResourceTypeTopic, ResourceName: s.Name,
			Configs: []kafkago.IncrementalAlterConfigsRequestConfig{{
				Name: maxMessageBytes, Value: strconv.Itoa(s.MaxMessageBytes), ConfigOperation: kafkago.ConfigOperationSet,
			}},
		})
	}
	if len(req.Resources) == 0 {
		return nil
	}
	resp, err := c.IncrementalAlterConfigs(ctx, req)
	if err == nil {
		for _, r := range resp.Resources {
			if r.Error != nil {
				err = errors.Join(err, fmt.Errorf("topic %q: %w", r.ResourceName, r.Error))
			}
		}
	}
	if err != nil {
		var names []string
		for _, r := range req.Resources {
			names = append(names, fmt.Sprintf("%s (has %d, needs %s)", r.ResourceName, got[r.ResourceName], r.Configs[0].Value))
		}
		return fmt.Errorf("raise %s of %s; raise it on the cluster or lower KAFKA_MAX_MESSAGE_BYTES: %w",
			maxMessageBytes, strings.Join(names, ", "), err)
	}
	return nil
}

// CheckTopics asks the brokers for the topics' metadata: it fails when no
// broker answers or a topic is missing. Readiness probes use it.
func (c Cluster) CheckTopics(ctx context.Context, topics []string) error {
	cl, done, err := c.admin()
	if err != nil {
		return err
	}
	defer done()
	return c.explain(ctx, checkTopics(ctx, cl, c.Brokers, topics))
}

func checkTopics(ctx context.Context, cl *kafkago.Client, brokers []string, topics []string) error {
	md, err := cl.Metadata(ctx, &kafkago.MetadataRequest{Topics: topics})
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
