package kafka

import (
	"errors"
	"time"

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
	// TopicRetention is the retention.ms of topics created at start-up.
	TopicRetention time.Duration
	// TopicMinInsyncReplicas is the min.insync.replicas of topics
	// created at start-up; zero means replication-1, at least 1.
	TopicMinInsyncReplicas int
}

// DefaultTopicRetention keeps a week of events on the topics, time to
// replay after a long outage of the consumers.
const DefaultTopicRetention = 7 * 24 * time.Hour

// Topic is the spec of a topic of these settings with partitions.
func (s Settings) Topic(name string, partitions int) TopicSpec {
	return TopicSpec{Name: name, Partitions: partitions, ReplicationFactor: s.TopicReplication, MaxMessageBytes: s.MaxMessageBytes,
		Retention: s.TopicRetention, MinInsyncReplicas: s.TopicMinInsyncReplicas}
}

// Check refuses settings that cannot work, before anything connects: the
// connection's (see Cluster.Check) and the topics'.
func (s Settings) Check() error {
	return errors.Join(s.Cluster.Check(), s.Topic(s.EventsTopic, s.TopicPartitions).check())
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
	cluster := defineClusterFlags(fs, "127.0.0.1:9092", "comma-separated Kafka bootstrap brokers")
	events := fs.String("events-topic", "EVENTS_TOPIC", "cms.events", help.eventsTopic)
	quarantine := fs.String("quarantine-topic", "QUARANTINE_TOPIC", "cms.events.quarantine", help.quarantineTopic)
	partitions := fs.Int("topic-partitions", "TOPIC_PARTITIONS", 6, help.partitions)
	replication := fs.Int("topic-replication", "TOPIC_REPLICATION", 1, "replication factor of topics created at start-up")
	maxMessage := fs.Int("kafka-max-message-bytes", "KAFKA_MAX_MESSAGE_BYTES", DefaultMaxMessageBytes, help.maxMessageBytes)
	retention := fs.Duration("topic-retention", "TOPIC_RETENTION", DefaultTopicRetention, "retention.ms of topics created at start-up (0: the brokers' default)")
	minInsync := fs.Int("topic-min-insync-replicas", "TOPIC_MIN_INSYNC_REPLICAS", 0,
		"min.insync.replicas of topics created at start-up: replicas that must hold a record before the broker acknowledges it (0: replication-1, at least 1)")
	return func() Settings {
		return Settings{
			Cluster:                cluster(),
			EventsTopic:            *events,
			QuarantineTopic:        *quarantine,
			TopicPartitions:        *partitions,
			TopicReplication:       *replication,
			MaxMessageBytes:        *maxMessage,
			TopicRetention:         *retention,
			TopicMinInsyncReplicas: *minInsync,
		}
	}
}

// defineClusterFlags defines the flags of the connection to the brokers
// (-brokers, TLS, SASL) on fs; the function it returns reads them once fs
// has been parsed.
func defineClusterFlags(fs *envflag.Set, brokersDefault, brokersHelp string) func() Cluster {
	brokers := fs.String("brokers", "KAFKA_BROKERS", brokersDefault, brokersHelp)
	useTLS := fs.Bool("kafka-tls", "KAFKA_TLS", false, "connect to the brokers over TLS (implied by any -kafka-tls-* setting)")
	caFile := fs.String("kafka-tls-ca-file", "KAFKA_TLS_CA_FILE", "", "PEM file of the authorities that sign the brokers' certificates (empty: the system's)")
	certFile := fs.String("kafka-tls-cert-file", "KAFKA_TLS_CERT_FILE", "", "PEM client certificate, for brokers that authenticate clients by certificate (with -kafka-tls-key-file)")
	keyFile := fs.String("kafka-tls-key-file", "KAFKA_TLS_KEY_FILE", "", "PEM key of the client certificate")
	serverName := fs.String("kafka-tls-server-name", "KAFKA_TLS_SERVER_NAME", "", "name the brokers' certificates must carry (empty: each broker's host)")
	mechanism := fs.String("kafka-sasl-mechanism", "KAFKA_SASL_MECHANISM", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (empty: no SASL)")
	username := fs.String("kafka-sasl-username", "KAFKA_SASL_USERNAME", "", "SASL username")
	password := fs.Secret("kafka-sasl-password", "KAFKA_SASL_PASSWORD", "", "SASL password")
	return func() Cluster {
		return Cluster{
			Brokers: envflag.List(*brokers),
			TLS:     TLS{Enabled: *useTLS, CAFile: *caFile, CertFile: *certFile, KeyFile: *keyFile, ServerName: *serverName},
			SASL:    SASL{Mechanism: *mechanism, Username: *username, Password: *password},
		}
	}
}
