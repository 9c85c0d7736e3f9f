// Package ingesttest runs the ingest service in a test, on a loopback
// port, for tests of what stands in front of or behind it.
package ingesttest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/pipeline/ingest"
	"github.com/assistantcms/cms/pkg/pipeline/kafka"
)

// Serve runs ingest against brokers with one-partition topics named
// after topic and the test process, until the test ends. It returns the
// service's base URL and the events topic.
func Serve(t testing.TB, brokers string, store ingest.Store, topic string) (url, eventsTopic string) {
	t.Helper()
	eventsTopic = fmt.Sprintf("%s-%d", topic, os.Getpid())
	cfg := ingest.ServiceConfig{
		Kafka: kafka.Cluster{Brokers: []string{brokers}}, EventsTopic: eventsTopic, QuarantineTopic: eventsTopic + "-quarantine",
		// Above net/http's 5 s wait for a connection that never sent a
		// request, so that a client's spare connection cannot fail the drain.
		TopicPartitions: 1, TopicReplication: 1, ShutdownTimeout: 10 * time.Second,
	}
	return Start(t, cfg, store, slog.New(slog.NewTextHandler(io.Discard, nil))), eventsTopic
}

// Start runs ingest with cfg until the test ends and returns its base URL.
func Start(t testing.TB, cfg ingest.ServiceConfig, store ingest.Store, log *slog.Logger) string {
	t.Helper()
	ctx := context.Background()
	svc, err := ingest.NewService(ctx, cfg, store, log)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Serve(sctx, ln) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("ingest shutdown: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}
