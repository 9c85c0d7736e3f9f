package gateway

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/edge/httpserve"
)

// TestEventStreamsPassAtOnceAndLast: an upstream's text/event-stream
// answer reaches the client message by message as the upstream writes
// it, not buffered; it lasts longer than the gateway's read, write and
// response timeouts; and the gateway's shutdown ends it at once rather
// than after its drain.
func TestEventStreamsPassAtOnceAndLast(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sent := make(chan time.Time, 100)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		for i := 0; ; i++ {
			fmt.Fprintf(w, "event: tick\ndata: %d\n\n", i)
			if rc.Flush() != nil {
				return
			}
			sent <- time.Now()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}))
	defer upstream.Close()
	g, err := New(Config{Ingest: upstream.URL, API: upstream.URL, ResponseTimeout: 300 * time.Millisecond, ShutdownTimeout: 10 * time.Second,
		HTTP: httpserve.Limits{ReadTimeout: 500 * time.Millisecond, WriteTimeout: time.Second}}, log)
	if err != nil {
		t.Fatal(err)
	}
	gw, stop := serve(t, g.Serve)

	resp, err := http.Get(gw + "/cms/app/events/live")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	lines := make(chan string, 100)
	ended := make(chan error, 1)
	go func() {
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				ended <- err
				return
			}
			if strings.HasPrefix(line, "data: ") {
				lines <- strings.TrimSpace(line[len("data: "):])
			}
		}
	}()
	// 3 s: three times the write timeout, six times the read timeout.
	var slowest time.Duration
	for i := range 15 {
		select {
		case got := <-lines:
			at := <-sent
			if got != fmt.Sprint(i) {
				t.Fatalf("message %s, want %d", got, i)
			}
			slowest = max(slowest, time.Since(at))
		case err := <-ended:
			t.Fatalf("the stream ended after %d messages: %v", i, err)
		case <-time.After(5 * time.Second):
			t.Fatalf("message %d did not arrive within 5 s", i)
		}
	}
	// Buffered, a message would wait for the next ones (or the end).
	if slowest > 150*time.Millisecond {
		t.Errorf("a message took %v from the upstream's flush to the client, want it passed on at once", slowest)
	}
	start := time.Now()
	stop()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream goes on after the gateway stopped")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the gateway took %v to stop with a stream open, want far less than its 10 s drain", took)
	}
}
