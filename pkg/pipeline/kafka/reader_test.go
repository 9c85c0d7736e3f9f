package kafka

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/assistantcms/cms/pkg/pipeline/event"
)

func newCluster(t *testing.T, topics ...string) Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return Cluster{Brokers: c.ListenAddrs()}
}

func readerConfig(group string, topics ...string) ReaderConfig {
	return ReaderConfig{GroupID: group, Topics: topics, SessionTimeout: 6 * time.Second, MaxWait: 50 * time.Millisecond}
}

// fetch reads n messages and returns them by their values.
func fetch(t *testing.T, r *GroupReader, n int) map[string]Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	got := map[string]Message{}
	for range n {
		m, err := r.Fetch(ctx)
		if err != nil {
			t.Fatalf("after %d messages: %v", len(got), err)
		}
		got[string(m.Value)] = m
	}
	return got
}

// TestGroupReaderResumesAfterCommit commits one position per partition,
// the last message read of each, and checks that the next member of the
// group starts right after them.
func TestGroupReaderResumesAfterCommit(t *testing.T) {
	cl := newCluster(t, "a", "b")
	ctx := t.Context()
	p, err := cl.NewProducer(ProducerConfig{}, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var first, second []event.Record
	for i := range 10 {
		first = append(first, event.Record{Key: []byte(strconv.Itoa(i)), Value: []byte("a" + strconv.Itoa(i))})
		second = append(second, event.Record{Key: []byte(strconv.Itoa(i)), Value: []byte("later" + strconv.Itoa(i))})
	}
	if err := p.Publish(ctx, first, []event.Record{{Value: []byte("b0")}}); err != nil {
		t.Fatal(err)
	}

	r, err := cl.NewGroupReader(readerConfig("g", "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	got := fetch(t, r, 11)
	type partition struct {
		topic string
		n     int
	}
	last := map[partition]Position{}
	for v, m := range got {
		if m.Topic == "" || m.HighWaterMark <= m.Offset {
			t.Errorf("%s: %+v", v, m)
		}
		k := partition{m.Topic, m.Partition}
		if m.Offset >= last[k].Offset {
			last[k] = Position{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset}
		}
	}
	if _, ok := got["b0"]; !ok || len(got) != 11 {
		t.Fatalf("read %d messages, want the 10 of a and the one of b", len(got))
	}
	var done []Position
	for _, p := range last {
		done = append(done, p)
	}
	if err := r.Commit(ctx, done); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	if err := p.Publish(ctx, second, nil); err != nil {
		t.Fatal(err)
	}
	r2, err := cl.NewGroupReader(readerConfig("g", "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	for v := range fetch(t, r2, 10) {
		if !strings.HasPrefix(v, "later") {
			t.Errorf("read %q again after its offset was committed", v)
		}
	}
}

func TestDeadLetterHeaders(t *testing.T) {
	cl := newCluster(t, "events", "dead")
	ctx := t.Context()
	w, err := cl.NewDeadLetterWriter(ProducerConfig{}, "dead")
	if err != nil {
		t.Fatal(err)
	}
	orig := Message{Topic: "events", Partition: 1, Offset: 42, Key: []byte("k"), Value: []byte("not json"),
		Headers: []Header{{Key: "trace", Value: []byte("t1")}}}
	if err := w.Write(ctx, []DeadLetter{{Message: orig, Reason: "invalid envelope: not JSON"}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := cl.NewGroupReader(readerConfig("dlq", "dead"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m := fetch(t, r, 1)["not json"]
	h := map[string]string{}
	for _, x := range m.Headers {
		h[x.Key] = string(x.Value)
	}
	want := map[string]string{"trace": "t1", HeaderReason: "invalid envelope: not JSON", HeaderOriginalTopic: "events",
		HeaderOriginalPartition: "1", HeaderOriginalOffset: "42"}
	if string(m.Key) != "k" || len(h) != len(want) {
		t.Fatalf("dead letter key %q headers %v", m.Key, h)
	}
	for k, v := range want {
		if h[k] != v {
			t.Errorf("header %s = %q, want %q", k, h[k], v)
		}
	}
}
