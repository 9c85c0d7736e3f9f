package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/assistantcms/cms/pkg/pipeline/event"
)

// stored reads every record of topic back, by partition.
func stored(t *testing.T, brokers []string, topic string, partitions int) map[int][]kafkago.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := make(map[int][]kafkago.Message)
	for part := range partitions {
		conn, err := kafkago.DialLeader(ctx, "tcp", brokers[0], topic, part)
		if err != nil {
			t.Fatal(err)
		}
		end, err := conn.ReadLastOffset()
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		if end == 0 {
			continue
		}
		r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: brokers, Topic: topic, Partition: part, MaxWait: 50 * time.Millisecond})
		for range end {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got[part] = append(got[part], m)
		}
		r.Close()
	}
	return got
}

// countProduce counts the produce requests c receives from now on, and
// answers the first fail of them itself with code for every partition.
func countProduce(c *kfake.Cluster, fail int, code int16) *atomic.Int64 {
	var n atomic.Int64
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if n.Add(1) > int64(fail) {
			return nil, nil, false
		}
		preq := req.(*kmsg.ProduceRequest)
		resp := preq.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range preq.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	return &n
}

// startProducer starts a kfake cluster of brokers holding topics ev and q of
// partitions each, and a producer of cfg writing to them; both stop with the
// test.
func startProducer(t *testing.T, brokers int, partitions int32, cfg ProducerConfig) (*kfake.Cluster, []string, *Producer) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(brokers), kfake.SeedTopics(partitions, "ev", "q"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addrs := c.ListenAddrs()
	p, err := Cluster{Brokers: addrs}.NewProducer(cfg, "ev", "q")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return c, addrs, p
}

func TestProducerSharesRequestsAmongConcurrentWrites(t *testing.T) {
	const partitions, writers = 6, 300
	c, brokers, p := startProducer(t, 3, partitions, ProducerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A first write learns the partitions' leaders.
	if err := p.Publish(ctx, []event.Record{{Key: []byte("warm"), Value: []byte("w")}}, nil); err != nil {
		t.Fatal(err)
	}
	requests := countProduce(c, 0, 0)

	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Go(func() {
			<-start
			key := fmt.Appendf(nil, "app/session-%d", i)
			acc := []event.Record{{Key: key, Value: fmt.Appendf(nil, "%d-a", i)}, {Key: key, Value: fmt.Appendf(nil, "%d-b", i)}}
			var quar []event.Record
			if i%10 == 0 {
				quar = []event.Record{{Key: key, Value: fmt.Appendf(nil, "%d-q", i)}}
			}
			if err := p.Publish(ctx, acc, quar); err != nil {
				errs <- err
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Each broker leads some partitions; the writes share a few requests
	// per broker instead of one or more each.
	if n := requests.Load(); n >= writers/3 {
		t.Errorf("%d produce requests for %d concurrent writes: their records should share requests", n, writers)
	} else {
		t.Logf("%d produce requests for %d writes", n, writers)
	}

	var bal kafkago.Murmur2Balancer
	parts := []int{0, 1, 2, 3, 4, 5}
	seen := map[string]bool{}
	for _, topic := range []string{"ev", "q"} {
		for part, msgs := range stored(t, brokers, topic, partitions) {
			for _, m := range msgs {
				if seen[string(m.Value)] {
					t.Errorf("%s holds %s twice", topic, m.Value)
				}
				seen[string(m.Value)] = true
				// The partition kafka-go's Writer, and the Java client,
				// would have chosen.
				if want := bal.Balance(kafkago.Message{Key: m.Key}, parts...); part != want {
					t.Errorf("%s: key %s on partition %d, want %d", topic, m.Key, part, want)
				}
			}
			// A write's records for one partition stay in order.
			for i := 1; i < len(msgs); i++ {
				if string(msgs[i].Key) == string(msgs[i-1].Key) && string(msgs[i].Value) < string(msgs[i-1].Value) {
					t.Errorf("%s partition %d: %s before %s", topic, part, msgs[i-1].Value, msgs[i].Value)
				}
			}
		}
	}
	want := 1 + 2*writers + writers/10
	if len(seen) != want {
		t.Errorf("%d records stored, want %d", len(seen), want)
	}
}

func TestProducerLingersOnlyAfterARequest(t *testing.T) {
	// Long enough that no produce round trip on a busy machine comes near.
	const linger = 2 * time.Second
	c, brokers, p := startProducer(t, 1, 3, ProducerConfig{Linger: linger})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The broker has had no request: the record goes at once.
	start := time.Now()
	if err := p.Publish(ctx, []event.Record{{Key: []byte("first"), Value: []byte("first")}}, nil); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took >= linger {
		t.Fatalf("a write to an idle broker took %s: it waited out the linger (%s)", took, linger)
	}
	// Writes within the linger of that request wait for the rest of it and
	// share one request.
	requests := countProduce(c, 0, 0)
	const writers = 20
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Go(func() {
			key := fmt.Appendf(nil, "k%d", i)
			if err := p.Publish(ctx, []event.Record{{Key: key, Value: key}}, nil); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if took := time.Since(start); took < linger {
		t.Errorf("the writes after the first were acknowledged %s after it, within the linger (%s)", took, linger)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("%d produce requests for %d writes within the linger, want 1", n, writers)
	}
	n := 0
	for _, msgs := range stored(t, brokers, "ev", 3) {
		n += len(msgs)
	}
	if n != writers+1 {
		t.Errorf("%d records stored, want %d", n, writers+1)
	}
}

func TestProducerFollowsMovedLeaders(t *testing.T) {
	const partitions = 4
	c, brokers, p := startProducer(t, 3, partitions, ProducerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	publish := func(round int) {
		t.Helper()
		var recs []event.Record
		for i := range 40 {
			recs = append(recs, event.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%d/%d", round, i)})
		}
		if err := p.Publish(ctx, recs, nil); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	publish(1)
	for part := range int32(partitions) {
		leader := c.LeaderFor("ev", part)
		if err := c.MoveTopicPartition("ev", part, (leader+1)%3); err != nil {
			t.Fatal(err)
		}
	}
	// The producer's routing is stale now: the old leaders answer
	// NOT_LEADER_FOR_PARTITION until the metadata is read again.
	publish(2)
	n := 0
	values := map[string]bool{}
	for _, msgs := range stored(t, brokers, "ev", partitions) {
		for _, m := range msgs {
			n++
			values[string(m.Value)] = true
		}
	}
	if n != 80 || len(values) != 80 {
		t.Errorf("%d records stored (%d distinct), want 80 once each", n, len(values))
	}
}

func TestProducerRetriesWhatMayPass(t *testing.T) {
	tests := []struct {
		name      string
		fail      int
		code      int16
		wantErr   string
		wantStore bool
	}{
		{"replicas catching up pass on retry", 2, kerr.NotEnoughReplicas.Code, "", true},
		{"a refused batch fails at once", 1000, kerr.MessageTooLarge.Code, "Message Size Too Large", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, brokers, p := startProducer(t, 1, 2, ProducerConfig{})
			requests := countProduce(c, tc.fail, tc.code)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			err := p.Publish(ctx, []event.Record{{Key: []byte("k"), Value: []byte("v")}}, nil)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("publish: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "partition")):
				t.Fatalf("publish error %v, want one naming the partition and %s", err, tc.wantErr)
			case tc.wantErr != "" && requests.Load() != 1:
				t.Errorf("%d produce requests; an error that cannot pass is not retried", requests.Load())
			case tc.wantErr != "" && time.Since(start) > 5*time.Second:
				t.Errorf("the error took %s", time.Since(start))
			}
			n := 0
			for _, msgs := range stored(t, brokers, "ev", 2) {
				n += len(msgs)
			}
			if want := map[bool]int{true: 1, false: 0}[tc.wantStore]; n != want {
				t.Errorf("%d records stored, want %d", n, want)
			}
		})
	}
}

func TestProducerStopsWaitingWithTheCaller(t *testing.T) {
	c, _, p := startProducer(t, 1, 1, ProducerConfig{})
	// Every produce request is refused with an error that may pass: the
	// caller's deadline, not the retries, ends the wait.
	countProduce(c, 1<<30, kerr.NotEnoughReplicas.Code)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := p.Publish(ctx, []event.Record{{Key: []byte("k"), Value: []byte("v")}}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("publish: %v, want the deadline's error", err)
	}
	// Close ends the retries of a write whose caller gave up.
	done := make(chan error, 1)
	go func() { done <- p.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waits for a write nobody waits for")
	}
	if err := p.Publish(context.Background(), []event.Record{{Value: []byte("late")}}, nil); !errors.Is(err, errClosed) {
		t.Errorf("publish after Close: %v", err)
	}
}

func TestSplitKeepsEntriesWithinTheRequestSize(t *testing.T) {
	l := &layout{partitions: map[string][]int{"ev": {0, 1, 2}}}
	rec := func(key string, size int) event.Record {
		return event.Record{Key: []byte(key), Value: make([]byte, size)}
	}
	tests := []struct {
		name     string
		maxBytes int64
		recs     []event.Record
		want     int // entries
	}{
		{"one key, one entry", 1 << 20, []event.Record{rec("a", 10), rec("a", 10), rec("a", 10)}, 1},
		{"one key, split by size", 200, []event.Record{rec("a", 100), rec("a", 100), rec("a", 100)}, 3},
		{"an oversized record goes alone", 100, []event.Record{rec("a", 500), rec("a", 10)}, 2},
		{"none", 100, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &coalescer{maxBytes: tc.maxBytes}
			got, err := c.split(nil, &write{}, l, topicRecords{"ev", tc.recs})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.want {
				t.Fatalf("%d entries, want %d", len(got), tc.want)
			}
			n := 0
			for _, e := range got {
				if len(e.recs) > 1 && e.bytes > tc.maxBytes {
					t.Errorf("entry of %d records holds %d bytes, over %d", len(e.recs), e.bytes, tc.maxBytes)
				}
				n += len(e.recs)
			}
			if n != len(tc.recs) {
				t.Errorf("%d records in entries, want %d", n, len(tc.recs))
			}
		})
	}
	if _, err := (&coalescer{maxBytes: 100}).split(nil, &write{}, l, topicRecords{"missing", []event.Record{rec("a", 1)}}); err == nil {
		t.Error("a topic without partitions was accepted")
	}
}

func TestRequestCompressesOnlyBatchesWorthIt(t *testing.T) {
	c := &coalescer{attrs: protocol.Attributes(kafkago.Lz4)}
	w := &write{}
	small := &entry{w: w, tp: topicPartition{"ev", 0}, recs: []event.Record{{Key: []byte("k"), Value: make([]byte, 900)}}, bytes: 933}
	large := &entry{w: w, tp: topicPartition{"ev", 1}, recs: []event.Record{{Key: []byte("k"), Value: make([]byte, 5000)}}, bytes: 5033}
	// Small entries of one partition add up past the threshold.
	var many []*entry
	for range 5 {
		many = append(many, &entry{w: w, tp: topicPartition{"q", 2}, recs: []event.Record{{Value: make([]byte, 900)}}, bytes: 932})
	}
	req := c.request(append([]*entry{small, large}, many...))
	want := map[topicPartition]protocol.Attributes{{"ev", 0}: 0, {"ev", 1}: c.attrs, {"q", 2}: c.attrs}
	got := map[topicPartition]protocol.Attributes{}
	for _, tp := range req.Topics {
		for _, p := range tp.Partitions {
			got[topicPartition{tp.Topic, p.Partition}] = p.RecordSet.Attributes
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("compression by partition %v, want %v", got, want)
	}
}
