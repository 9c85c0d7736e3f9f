package kafka

import (
	"github.com/assistantcms/cms/pkg/envflag"
)

// Settings are the Kafka settings the ingest and consumer commands share.
type Settings struct {
	Cluster         Cluster
	EventsTopic     string
	QuarantineTopic string
	// TopicPartitions and TopicReplication shape the topics created at
	// start-up.
	TopicPartitions  int
	TopicReplication int
	// MaxMessageBytes is the topics' max.message.bytes.
	MaxMessageBytes int
}

// Role is the side of the topics a command is on; the flags' help says
// what each setting means to it.
type Role int

// The roles.
const (
	// Producing publishes accepted and quarantined events (ingest).
	Producing Role = iota
	// Consuming writes both topics into ClickHouse (the consumer).
	Consuming
)

type flagHelp struct {
	eventsTopic, quarantineTopic, partitions, maxMessageBytes string
}

func (r Role) help() flagHelp {
	if r == Consuming {
		return flagHelp{
			eventsTopic:     "topic of accepted events, written to the events table",
			quarantineTopic: "topic of refused events, written to the quarantine table",
			partitions:      "partitions of the events and quarantine topics if they must be created",
			maxMessageBytes: "max.message.bytes of topics created at start-up (raised on existing topics that have less); the largest record read or dead-lettered",
		}
	}
	return flagHelp{
		eventsTopic:     "topic for accepted events",
		quarantineTopic: "topic for rejected events and their reasons",
		partitions:      "partitions of topics created at start-up",
		maxMessageBytes: "max.message.bytes of the topics (set when created, raised when less) and the producer's largest batch per partition",
	}
}

// DefineFlags defines the flags of the shared Kafka settings on fs, each
// with its environment variable. The function it returns reads them once
// fs has been parsed.
func DefineFlags(fs *envflag.Set, role Role) func() Settings {
	help := role.help()
	brokers := fs.String("brokers", "KAFKA_BROKERS", "127.0.0.1:9092", "comma-separated Kafka bootstrap brokers")
	events := fs.String("events-topic", "EVENTS_TOPIC", "cms.events", help.eventsTopic)
	quarantine := fs.String("quarantine-topic", "QUARANTINE_TOPIC", "cms.events.quarantine", help.quarantineTopic)
	partitions := fs.Int("topic-partitions", "TOPIC_PARTITIONS", 6, help.partitions)
	replication := fs.Int("topic-replication", "TOPIC_REPLICATION", 1, "replication factor of topics created at start-up")
	maxMessage := fs.Int("kafka-max-message-bytes", "KAFKA_MAX_MESSAGE_BYTES", DefaultMaxMessageBytes, help.maxMessageBytes)
	return func() Settings {
		return Settings{
			Cluster:          Cluster{Brokers: envflag.List(*brokers)},
			EventsTopic:      *events,
			QuarantineTopic:  *quarantine,
			TopicPartitions:  *partitions,
			TopicReplication: *replication,
			MaxMessageBytes:  *maxMessage,
		}
	}
}
