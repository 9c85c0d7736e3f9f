package kafka

import (
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/envflag"
)

func TestDefineFlags(t *testing.T) {
	cases := []struct {
		name string
		role Role
		env  map[string]string
		args []string
		want Settings
	}{
		{"defaults", Producing, nil, nil, Settings{Cluster: Cluster{Brokers: []string{"127.0.0.1:9092"}}, EventsTopic: "cms.events",
			QuarantineTopic: "cms.events.quarantine", TopicPartitions: 6, TopicReplication: 1, MaxMessageBytes: DefaultMaxMessageBytes,
			TopicRetention: DefaultTopicRetention}},
		{"environment", Consuming, map[string]string{"KAFKA_BROKERS": "a:1, b:2", "EVENTS_TOPIC": "e", "QUARANTINE_TOPIC": "q",
			"TOPIC_PARTITIONS": "3", "TOPIC_REPLICATION": "2", "KAFKA_MAX_MESSAGE_BYTES": "1048576"}, nil,
			Settings{Cluster: Cluster{Brokers: []string{"a:1", "b:2"}}, EventsTopic: "e", QuarantineTopic: "q", TopicPartitions: 3, TopicReplication: 2, MaxMessageBytes: 1 << 20,
				TopicRetention: DefaultTopicRetention}},
		{"flags win", Consuming, map[string]string{"KAFKA_BROKERS": "a:1"}, []string{"-brokers", "c:3", "-topic-partitions", "12"},
			Settings{Cluster: Cluster{Brokers: []string{"c:3"}}, EventsTopic: "cms.events", QuarantineTopic: "cms.events.quarantine",
				TopicPartitions: 12, TopicReplication: 1, MaxMessageBytes: DefaultMaxMessageBytes, TopicRetention: DefaultTopicRetention}},
		{"topic durability", Producing, map[string]string{"TOPIC_REPLICATION": "3", "TOPIC_RETENTION": "72h", "TOPIC_MIN_INSYNC_REPLICAS": "2"}, nil,
			Settings{Cluster: Cluster{Brokers: []string{"127.0.0.1:9092"}}, EventsTopic: "cms.events", QuarantineTopic: "cms.events.quarantine",
				TopicPartitions: 6, TopicReplication: 3, MaxMessageBytes: DefaultMaxMessageBytes, TopicRetention: 72 * time.Hour, TopicMinInsyncReplicas: 2}},
		{"security from the environment", Consuming, map[string]string{"KAFKA_TLS_CA_FILE": "/ca.pem", "KAFKA_TLS_SERVER_NAME": "kafka.internal",
			"KAFKA_TLS_CERT_FILE": "/c.pem", "KAFKA_TLS_KEY_FILE": "/k.pem",
			"KAFKA_SASL_MECHANISM": "scram-sha-512", "KAFKA_SASL_USERNAME": "cms", "KAFKA_SASL_PASSWORD": "s3cret"}, nil,
			Settings{Cluster: Cluster{Brokers: []string{"127.0.0.1:9092"},
				TLS:  TLS{CAFile: "/ca.pem", CertFile: "/c.pem", KeyFile: "/k.pem", ServerName: "kafka.internal"},
				SASL: SASL{Mechanism: "scram-sha-512", Username: "cms", Password: "s3cret"}},
				EventsTopic: "cms.events", QuarantineTopic: "cms.events.quarantine",
				TopicPartitions: 6, TopicReplication: 1, MaxMessageBytes: DefaultMaxMessageBytes, TopicRetention: DefaultTopicRetention}},
		{"security from flags", Producing, nil, []string{"-kafka-tls", "-kafka-sasl-mechanism", "PLAIN", "-kafka-sasl-username", "u", "-kafka-sasl-password", "p"},
			Settings{Cluster: Cluster{Brokers: []string{"127.0.0.1:9092"}, TLS: TLS{Enabled: true}, SASL: SASL{Mechanism: "PLAIN", Username: "u", Password: "p"}},
				EventsTopic: "cms.events", QuarantineTopic: "cms.events.quarantine",
				TopicPartitions: 6, TopicReplication: 1, MaxMessageBytes: DefaultMaxMessageBytes, TopicRetention: DefaultTopicRetention}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := envflag.New(flag.NewFlagSet("t", flag.ContinueOnError), func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			settings := DefineFlags(fs, tc.role)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if got := settings(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestFlagHelpByRole checks that each command's help says what the
// settings mean to it.
func TestFlagHelpByRole(t *testing.T) {
	for role, want := range map[Role]string{Producing: "topic for accepted events", Consuming: "topic of accepted events, written to the events table"} {
		fs := envflag.New(flag.NewFlagSet("t", flag.ContinueOnError), func(string) (string, bool) { return "", false })
		fs.SetOutput(io.Discard)
		DefineFlags(fs, role)
		if got := fs.Lookup("events-topic").Usage; !strings.HasPrefix(got, want) {
			t.Errorf("role %d: events-topic help %q, want it to start with %q", role, got, want)
		}
	}
}
