package kafka

import (
	"bytes"
	"context"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

func TestDurabilityRisksJudged(t *testing.T) {
	cases := []struct {
		name        string
		configured  int
		replication int
		configs     map[string]string
		want        []string // reason=value
	}{
		{"three replicas, two in sync", 3, 3, map[string]string{minInsyncReplicas: "2", uncleanLeaderElection: "false"}, nil},
		{"one replica as configured", 1, 1, map[string]string{minInsyncReplicas: "1"}, nil},
		{"two replicas, one in sync", 2, 2, map[string]string{minInsyncReplicas: "1"}, nil},
		{"three replicas, one in sync", 3, 3, map[string]string{minInsyncReplicas: "1"}, []string{"min_insync_replicas_one=1"}},
		{"five replicas, one in sync", 3, 5, map[string]string{minInsyncReplicas: "1"}, []string{"min_insync_replicas_one=1"}},
		{"more in sync than replicas", 1, 1, map[string]string{minInsyncReplicas: "2"}, []string{"min_insync_above_replication=2"}},
		{"fewer replicas than configured", 3, 1, map[string]string{minInsyncReplicas: "1"}, []string{"replication_below_configured=1"}},
		{"fewer replicas than configured and too many in sync", 3, 2, map[string]string{minInsyncReplicas: "3"},
			[]string{"replication_below_configured=2", "min_insync_above_replication=3"}},
		{"unclean leader election", 3, 3, map[string]string{minInsyncReplicas: "2", uncleanLeaderElection: "true"}, []string{"unclean_leader_election=true"}},
		{"settings the brokers did not report", 1, 1, nil, nil},
		{"a setting that is no number", 1, 1, map[string]string{minInsyncReplicas: "two"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, r := range durabilityRisks(TopicSpec{Name: "t", ReplicationFactor: tc.configured}, tc.replication, tc.configs) {
				if r.Topic != "t" || r.Why == "" || r.Setting == "" {
					t.Errorf("incomplete risk %+v", r)
				}
				got = append(got, r.Reason+"="+r.Value)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("risks %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTopicSpecCheck(t *testing.T) {
	cases := []struct {
		spec    TopicSpec
		wantErr string
	}{
		{TopicSpec{Name: "t", ReplicationFactor: 3}, ""},
		{TopicSpec{Name: "t", ReplicationFactor: 3, MinInsyncReplicas: 3, Retention: time.Hour}, ""},
		{TopicSpec{Name: "t", ReplicationFactor: 2, MinInsyncReplicas: 3},
			`topic "t": min.insync.replicas 3 (TOPIC_MIN_INSYNC_REPLICAS) exceeds its replication factor 2 (TOPIC_REPLICATION): no acks=all write could ever succeed`},
		{TopicSpec{Name: "t", ReplicationFactor: 1, MinInsyncReplicas: -1}, `topic "t": min.insync.replicas -1 must not be negative`},
		{TopicSpec{Name: "t", ReplicationFactor: 1, Retention: -time.Hour}, `topic "t": retention -1h0m0s must not be negative`},
		{TopicSpec{Name: "t", ReplicationFactor: 1, Retention: time.Microsecond}, `topic "t": retention 1µs is under the 1ms Kafka counts in`},
	}
	for _, tc := range cases {
		err := tc.spec.check()
		if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%+v: %v, want %q", tc.spec, err, tc.wantErr)
		}
	}
}

// TestTopicsCreatedDurable creates topics on a three-broker cluster and
// reads back the settings they were given.
func TestTopicsCreatedDurable(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl := Cluster{Brokers: c.ListenAddrs()}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	specs := []TopicSpec{
		{Name: "three", Partitions: 2, ReplicationFactor: 3, MaxMessageBytes: 2 << 20, Retention: 48 * time.Hour},
		{Name: "one", Partitions: 1, ReplicationFactor: 1},
		{Name: "strict", Partitions: 1, ReplicationFactor: 3, MinInsyncReplicas: 3},
	}
	if err := cl.EnsureTopics(ctx, specs); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"three":  {minInsyncReplicas: "2", maxMessageBytes: "2097152", retentionMs: "172800000"},
		"one":    {minInsyncReplicas: "1"},
		"strict": {minInsyncReplicas: "3"},
	}
	for topic, settings := range want {
		got := describe(t, cl, topic)
		for k, v := range settings {
			if got[k] != v {
				t.Errorf("topic %s: %s %q, want %q", topic, k, got[k], v)
			}
		}
	}
	if risks, err := cl.DurabilityRisks(ctx, specs); err != nil || len(risks) != 0 {
		t.Errorf("topics created here are at risk: %+v, %v", risks, err)
	}
}

func describe(t *testing.T, cl Cluster, topic string) map[string]string {
	t.Helper()
	admin, done, err := cl.admin()
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	resp, err := admin.DescribeConfigs(t.Context(), &kafkago.DescribeConfigsRequest{Resources: []kafkago.DescribeConfigRequestResource{{
		ResourceType: kafkago.ResourceTypeTopic, ResourceName: topic}}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range resp.Resources {
		for _, e := range r.ConfigEntries {
			got[e.ConfigName] = e.ConfigValue
		}
	}
	return got
}

// TestReportDurability makes existing topics whose settings undermine
// acks=all on a real cluster and checks the warnings and the gauge.
func TestReportDurability(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl := Cluster{Brokers: c.ListenAddrs()}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	admin, done, err := cl.admin()
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	// Made by hand, as an operator or another tool might have.
	resp, err := admin.CreateTopics(ctx, &kafkago.CreateTopicsRequest{Topics: []kafkago.TopicConfig{
		{Topic: "leader-only", NumPartitions: 1, ReplicationFactor: 3, ConfigEntries: []kafkago.ConfigEntry{{ConfigName: minInsyncReplicas, ConfigValue: "1"}}},
		{Topic: "never-writable", NumPartitions: 1, ReplicationFactor: 1, ConfigEntries: []kafkago.ConfigEntry{{ConfigName: minInsyncReplicas, ConfigValue: "2"}}},
		{Topic: "single-copy", NumPartitions: 1, ReplicationFactor: 1},
		{Topic: "fine", NumPartitions: 1, ReplicationFactor: 3, ConfigEntries: []kafkago.ConfigEntry{{ConfigName: minInsyncReplicas, ConfigValue: "2"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for topic, err := range resp.Errors {
		if err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
	}
	specs := []TopicSpec{
		{Name: "leader-only", Partitions: 1, ReplicationFactor: 3},
		{Name: "never-writable", Partitions: 1, ReplicationFactor: 1},
		{Name: "single-copy", Partitions: 1, ReplicationFactor: 3},
		{Name: "fine", Partitions: 1, ReplicationFactor: 3},
		{Name: "not-yet-made", Partitions: 1, ReplicationFactor: 3},
	}
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	gauge := NewDurabilityGauge(reg)
	risks := cl.ReportDurability(ctx, specs, gauge, slog.New(slog.NewTextHandler(&logs, nil)))
	if len(risks) != 3 {
		t.Errorf("%d risks, want 3: %+v", len(risks), risks)
	}
	for _, want := range []string{
		`level=WARN msg="Kafka topic setting undermines durability: with 3 replicas, acks=all is satisfied by the leader alone`,
		`topic=leader-only setting=min.insync.replicas value=1 reason=min_insync_replicas_one`,
		`topic=never-writable setting=min.insync.replicas value=2 reason=min_insync_above_replication`,
		`topic=single-copy setting=replication.factor value=1 reason=replication_below_configured`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "topic=fine") {
		t.Errorf("a durable topic was reported:\n%s", logs.String())
	}
	wantMetrics := `
# HELP cms_kafka_topic_durability_risk 1 while a topic's settings undermine acks=all, by topic and reason (replication_below_configured, min_insync_above_replication, min_insync_replicas_one, unclean_leader_election), as found at start.
# TYPE cms_kafka_topic_durability_risk gauge
cms_kafka_topic_durability_risk{reason="min_insync_above_replication",topic="never-writable"} 1
cms_kafka_topic_durability_risk{reason="min_insync_replicas_one",topic="leader-only"} 1
cms_kafka_topic_durability_risk{reason="replication_below_configured",topic="single-copy"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantMetrics), "cms_kafka_topic_durability_risk"); err != nil {
		t.Error(err)
	}

	// Once fixed, the next check clears the risk.
	if _, err := admin.IncrementalAlterConfigs(ctx, &kafkago.IncrementalAlterConfigsRequest{Resources: []kafkago.IncrementalAlterConfigsRequestResource{{
		ResourceType: kafkago.ResourceTypeTopic, ResourceName: "leader-only",
		Configs: []kafkago.IncrementalAlterConfigsRequestConfig{{Name: minInsyncReplicas, Value: "2", ConfigOperation: kafkago.ConfigOperationSet}},
	}}}); err != nil {
		t.Fatal(err)
	}
	cl.ReportDurability(ctx, specs, gauge, slog.New(slog.DiscardHandler))
	if n := testutil.CollectAndCount(gauge.g); n != 2 {
		t.Errorf("%d risks on the gauge after the fix, want 2", n)
	}
}
