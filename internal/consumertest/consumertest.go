// Package consumertest runs the consumer service in a test, on a loopback
// port, for tests of the pipeline it ends.
package consumertest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/assistantcms/cms/pkg/pipeline/consumer"
)

// Start runs a consumer with cfg until the test ends and returns the base
// URL of its health and metrics endpoints. The consumer must stop cleanly.
func Start(t testing.TB, cfg consumer.ServiceConfig) string {
	t.Helper()
	return StartWithLog(t, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// StartWithLog is Start with the consumer logging to log.
func StartWithLog(t testing.TB, cfg consumer.ServiceConfig, log *slog.Logger) string {
	t.Helper()
	svc, err := consumer.NewService(t.Context(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx, ln) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("consumer stop: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}
