package kafka

import (
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"

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
			QuarantineTopic: "cms.events.quarantine", TopicPartitions: 6, TopicReplication: 1, MaxMessageBytes: DefaultMaxMessageBytes}},
		{"environment", Consuming, map[string]string{"KAFKA_BROKERS": "a:1, b:2", "EVENTS_TOPIC": "e", "QUARANTINE_TOPIC": "q",
			"TOPIC_PARTITIONS": "3", "TOPIC_REPLICATION": "2", "KAFKA_MAX_MESSAGE_BYTES": "1048576"}, nil,
			Settings{Cluster: Cluster{Brokers: []string{"a:1", "b:2"}}, EventsTopic: "e", QuarantineTopic: "q", TopicPartitions: 3, TopicReplication: 2, MaxMessageBytes: 1 << 20}},
		{"flags win", Consuming, map[string]string{"KAFKA_BROKERS": "a:1"}, []string{"-brokers", "c:3", "-topic-partitions", "12"},
			Settings{Cluster: Cluster{Brokers: []string{"c:3"}}, EventsTopic: "cms.events", QuarantineTopic: "cms.events.quarantine",
				TopicPartitions: 12, TopicReplication: 1, MaxMessageBytes: DefaultMaxMessageBytes}},
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
