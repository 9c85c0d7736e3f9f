package kafka

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/assistantcms/cms/pkg/pipeline/event"
)

func TestEnsureTopicsAndPublish(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	cl := Cluster{Brokers: brokers}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	specs := []TopicSpec{{Name: "ev", Partitions: 3, ReplicationFactor: 1}, {Name: "q", Partitions: 1, ReplicationFactor: 1}}
	if err := cl.EnsureTopics(ctx, specs); err != nil {
		t.Fatal(err)
	}
	if err := cl.EnsureTopics(ctx, specs); err != nil {
		t.Fatalf("second EnsureTopics must accept existing topics: %v", err)
	}
	if err := cl.CheckTopics(ctx, []string{"ev", "missing"}); err == nil {
		t.Error("CheckTopics passed with a missing topic")
	}

	p, err := cl.NewProducer(ProducerConfig{}, "ev", "q")
	if err != nil {
		t.Fatal(err)
	}
	acc := []event.Record{{Key: []byte("app/s1"), Value: []byte(`{"a":1}`)}, {Key: []byte("app/s1"), Value: []byte(`{"a":2}`)}}
	quar := []event.Record{{Key: []byte("app"), Value: []byte(`{"q":1}`)}}
	if err := p.Publish(ctx, acc, quar); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	// Both records of one key are on one partition, in order.
	var got []string
	for part := range 3 {
		r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: brokers, Topic: "ev", Partition: part, MaxWait: 50 * time.Millisecond})
		conn, err := kafkago.DialLeader(ctx, "tcp", brokers[0], "ev", part)
		if err != nil {
			t.Fatal(err)
		}
		end, _ := conn.ReadLastOffset()
		conn.Close()
		for range end {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(m.Value))
		}
		r.Close()
		if end != 0 && end != 2 {
			t.Errorf("partition %d holds %d records; a key's records must share a partition", part, end)
		}
	}
	if strings.Join(got, "") != `{"a":1}{"a":2}` {
		t.Errorf("records %q", got)
	}
}

func TestPublishFailsWhenBrokerIsGone(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "ev", "q"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Cluster{Brokers: c.ListenAddrs()}.NewProducer(ProducerConfig{}, "ev", "q")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := p.Publish(ctx, []event.Record{{Value: []byte("x")}}, nil); err == nil {
		t.Fatal("Publish succeeded with the broker gone")
	}
}

func TestParseCompression(t *testing.T) {
	for _, name := range []string{"", "none", "gzip", "snappy", "LZ4", "zstd"} {
		if _, err := ParseCompression(name); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
	if _, err := ParseCompression("brotli"); err == nil || !strings.Contains(err.Error(), "want none, gzip") {
		t.Errorf("brotli: %v", err)
	}
	if _, err := (Cluster{}).NewWriter(ProducerConfig{}, "t"); err == nil {
		t.Error("a writer without brokers was created")
	}
	if _, err := (Cluster{}).NewGroupReader(ReaderConfig{GroupID: "g", Topics: []string{"t"}}); err == nil {
		t.Error("a reader without brokers was created")
	}
	if err := (Cluster{}).CheckTopics(t.Context(), []string{"t"}); err == nil {
		t.Error("topics were checked without brokers")
	}
}

// TestTopicMessageBytes creates topics with max.message.bytes, raises it
// on a topic created with less, leaves a larger one alone, and produces a
// record only a raised topic takes.
func TestTopicMessageBytes(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "old", "large"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl := Cluster{Brokers: c.ListenAddrs()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const want = 4 << 20
	admin, done, err := cl.admin()
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if _, err := admin.IncrementalAlterConfigs(ctx, &kafkago.IncrementalAlterConfigsRequest{Resources: []kafkago.IncrementalAlterConfigsRequestResource{{
		ResourceType: kafkago.ResourceTypeTopic, ResourceName: "large",
		Configs: []kafkago.IncrementalAlterConfigsRequestConfig{{Name: "max.message.bytes", Value: "16777216", ConfigOperation: kafkago.ConfigOperationSet}},
	}}}); err != nil {
		t.Fatal(err)
	}
	big := []event.Record{{Key: []byte("k"), Value: bytes.Repeat([]byte("x"), 2<<20)}}
	w, err := cl.NewWriter(ProducerConfig{BatchBytes: want, Compression: "none"}, "old")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write(ctx, big); err == nil {
		t.Fatal("a 2 MiB record went to a topic of the default max.message.bytes")
	}

	specs := []TopicSpec{
		{Name: "new", Partitions: 1, ReplicationFactor: 1, MaxMessageBytes: want},
		{Name: "old", Partitions: 1, ReplicationFactor: 1, MaxMessageBytes: want},
		{Name: "large", Partitions: 1, ReplicationFactor: 1, MaxMessageBytes: want},
	}
	if err := cl.EnsureTopics(ctx, specs); err != nil {
		t.Fatal(err)
	}
	for topic, n := range map[string]int{"new": want, "old": want, "large": 16 << 20} {
		if got, err := cl.topicMessageBytes(ctx, topic); err != nil || got != n {
			t.Errorf("topic %s: max.message.bytes %d, %v; want %d", topic, got, err, n)
		}
	}
	if err := w.Write(ctx, big); err != nil {
		t.Errorf("a 2 MiB record to the raised topic: %v", err)
	}
}
