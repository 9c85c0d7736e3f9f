package kafka

import (
	"errors"

	"github.com/assistantcms/cms/pkg/envflag"
)

// TailSettings are the Kafka settings of a process that tails the topics
// ingest writes (the api's live view of events): the connection and the
// topics, nothing that creates or changes a topic.
type TailSettings struct {
	Cluster         Cluster
	EventsTopic     string
	QuarantineTopic string
	// MaxMessageBytes is the largest record the topics take.
	MaxMessageBytes int
}

// Enabled reports whether brokers are configured.
func (s TailSettings) Enabled() bool { return len(s.Cluster.Brokers) > 0 }

// Check refuses settings that cannot work, before anything connects.
func (s TailSettings) Check() error {
	if s.EventsTopic == "" || s.QuarantineTopic == "" {
		return errors.New("the events and quarantine topics must be named (EVENTS_TOPIC, QUARANTINE_TOPIC)")
	}
	return s.Cluster.Check()
}

// DefineTailFlags defines the flags of TailSettings on fs, each with its
// environment variable, named as ingest's and the consumer's are. The
// brokers default to none: a process that only reads the topics for a
// person watching needs no Kafka to serve its other routes. The function
// it returns reads them once fs has been parsed.
func DefineTailFlags(fs *envflag.Set) func() TailSettings {
	cluster := defineClusterFlags(fs, "", "comma-separated Kafka bootstrap brokers whose events and quarantine topics the live view of events reads (empty: no live view)")
	events := fs.String("events-topic", "EVENTS_TOPIC", "cms.events", "topic of accepted events, as ingest names it")
	quarantine := fs.String("quarantine-topic", "QUARANTINE_TOPIC", "cms.events.quarantine", "topic of refused events and their reasons, as ingest names it")
	maxMessage := fs.Int("kafka-max-message-bytes", "KAFKA_MAX_MESSAGE_BYTES", DefaultMaxMessageBytes, "largest record on the topics, as ingest sets it")
	return func() TailSettings {
		return TailSettings{Cluster: cluster(), EventsTopic: *events, QuarantineTopic: *quarantine, MaxMessageBytes: *maxMessage}
	}
}
