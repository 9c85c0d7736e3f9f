package ingest_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/assistantcms/cms/pkg/pipeline/ingest"
	"github.com/assistantcms/cms/pkg/pipeline/kafka"
)

// TestShutdownDrainsInFlightRequests holds produce requests in an
// in-process broker, cancels the service (as SIGTERM does) and checks that
// every request in flight still gets its 200 after its records are stored.
func TestShutdownDrainsInFlightRequests(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	must(t, err)
	defer cluster.Close()
	addr := cluster.ListenAddrs()[0]

	// Reuse the harness's content database and tokens, on its own service.
	h := newHarness(t, startBroker(t, ""), harnessOpts{})
	release := make(chan struct{})
	var held atomic.Int32
	cluster.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		held.Add(1)
		cluster.SleepControl(func() { <-release })
		return nil, nil, false
	})

	svc, err := ingest.NewService(t.Context(), ingest.ServiceConfig{
		Kafka: kafka.Cluster{Brokers: []string{addr}}, EventsTopic: "drain-events", QuarantineTopic: "drain-quarantine",
		TopicPartitions: 2, TopicReplication: 1, ShutdownTimeout: 10 * time.Second,
		Handler: ingest.Config{ProduceTimeout: 8 * time.Second},
	}, h.store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	must(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- svc.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String() + "/cms/app/events"

	const requests = 5
	var wg sync.WaitGroup
	statuses := make(chan int, requests)
	for range requests {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader(eventsBody(launch("s-1"), launch("s-2"))))
			req.Header.Set("Authorization", "Bearer "+h.tokens["a1"])
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("request failed during shutdown: %v", err)
				return
			}
			resp.Body.Close()
			statuses <- resp.StatusCode
		})
	}
	waitFor(t, 10*time.Second, func() bool { return held.Load() > 0 })
	start := time.Now()
	stop()
	// Shutdown must wait for the held requests rather than return.
	waitFor(t, 5*time.Second, func() bool {
		_, err := net.DialTimeout("tcp", ln.Addr().String(), 100*time.Millisecond)
		return err != nil // the listener closes first
	})
	select {
	case err := <-served:
		t.Fatalf("Serve returned while requests were in flight: %v", err)
	default:
	}
	close(release)
	wg.Wait()
	close(statuses)
	n := 0
	for s := range statuses {
		n++
		if s != 200 {
			t.Errorf("in-flight request answered %d during shutdown", s)
		}
	}
	if n != requests {
		t.Errorf("%d of %d requests answered", n, requests)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("shutdown took %s, want under 10s", took)
	}
	if got := len(readTopic(t, addr, "drain-events")); got != 2*requests {
		t.Errorf("topic holds %d records after shutdown, want %d", got, 2*requests)
	}
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
