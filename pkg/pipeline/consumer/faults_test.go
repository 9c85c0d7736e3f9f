package consumer_test

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// produce writes n envelopes with IDs prefix-0 .. prefix-(n-1) straight to
// the events topic, as ingest would.
func produce(t *testing.T, broker, prefix string, n int) {
	t.Helper()
	w := &kafkago.Writer{Addr: kafkago.TCP(broker), Topic: "events", RequiredAcks: kafkago.RequireAll,
		BatchTimeout: time.Millisecond, Balancer: &kafkago.Murmur2Balancer{}}
	defer w.Close()
	msgs := make([]kafkago.Message, n)
	for i := range msgs {
		id := prefix + "-" + strconv.Itoa(i)
		msgs[i] = kafkago.Message{Key: []byte("a/" + id), Value: []byte(`{"v":1,"eventId":"` + id +
			`","appId":"a","organizationId":"o","receivedAt":"2026-11-21T10:00:00.000Z","event":{"type":"REQUEST","name":"X","appId":"a","sessionId":"` + id + `"}}`)}
	}
	must(t, w.WriteMessages(t.Context(), msgs...))
}

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func waitStatus(t *testing.T, url string, want int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, body := get(url)
		if code == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s answered %d (%s), want %d", url, code, body, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// exactlyOnce checks that every produced event is in ClickHouse once after
// deduplication.
func exactlyOnce(t *testing.T, e *env, n uint64) {
	t.Helper()
	s := e.query(t)
	waitRows(t, s, n)
	var final uint64
	must(t, s.Conn().QueryRow(s.Context(t.Context()), "SELECT count() FROM analytics.events FINAL").Scan(&final))
	if final != n {
		t.Errorf("count() FINAL = %d, want %d", final, n)
	}
}

func TestClickHouseOutageLosesNothing(t *testing.T) {
	e := newEnv(t)
	url := e.startConsumer(t, "outage")
	produce(t, e.broker.Addr(), "before", 500)
	waitRows(t, e.query(t), 500)
	waitStatus(t, url+"/readyz", 200)

	must(t, e.ch.Stop())
	produce(t, e.broker.Addr(), "during", 500)
	waitStatus(t, url+"/readyz", 503)
	// Restart only once inserts have failed and been retried.
	waitFor(t, func() bool { return metric(url, `cms_consumer_retries_total{operation="insert"}`) >= 2 })
	must(t, e.ch.Start(t.Context()))

	exactlyOnce(t, e, 1000)
	waitStatus(t, url+"/readyz", 200)
	if got := metric(url, "cms_consumer_rows_inserted_total"); got != 1000 {
		t.Errorf("rows inserted metric %v, want 1000", got)
	}
}

// metric reads one sample from a /metrics page; 0 when absent.
func metric(url, name string) float64 {
	_, body := get(url + "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 60s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTwoConsumersShareTheWork(t *testing.T) {
	e := newEnv(t)
	a := e.startConsumer(t, "shared")
	b := e.startConsumer(t, "shared")
	inserted := func(url string) float64 { return metric(url, "cms_consumer_rows_inserted_total") }
	// Produce in waves until both members have written rows: the group
	// settles its assignment in the first seconds.
	total := 0
	deadline := time.Now().Add(60 * time.Second)
	for wave := 0; inserted(a) == 0 || inserted(b) == 0; wave++ {
		if time.Now().After(deadline) {
			t.Fatalf("after %d events one consumer wrote nothing: %v and %v rows", total, inserted(a), inserted(b))
		}
		produce(t, e.broker.Addr(), fmt.Sprintf("wave%d", wave), 300)
		total += 300
		waitRows(t, e.query(t), uint64(total))
	}
	exactlyOnce(t, e, uint64(total))
	t.Logf("%d events: %v and %v rows inserted", total, inserted(a), inserted(b))
}
