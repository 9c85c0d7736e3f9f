package httpserve

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestMinUploadRate sends bodies over real connections to a handler that
// reads them through a watch: a body that stalls after a burst, or
// trickles, is cut off once it is behind (its grace plus a second per
// Rate bytes), with a *SlowBodyError saying how much came in how long; a
// body that keeps the rate is read whole however long it takes; the
// server's own read timeout is never extended.
func TestMinUploadRate(t *testing.T) {
	type piece struct {
		bytes int
		every time.Duration // between pieces; the body stalls after them when zero
		count int
	}
	tests := []struct {
		name        string
		rate        MinUploadRate
		readTimeout time.Duration
		send        piece
		length      int // announced; more than sent means the client stalls
		// want: the body read whole, or cut off for its pace with this
		// many bytes after between these times, or by the read timeout.
		whole    bool
		received int64
		after    [2]time.Duration
		timedOut bool
	}{
		{name: "stalls after a burst", rate: MinUploadRate{Rate: 10_000, Grace: 200 * time.Millisecond},
			send: piece{bytes: 5000, count: 1}, length: 100_000, received: 5000,
			after: [2]time.Duration{700 * time.Millisecond, 3 * time.Second}},
		{name: "trickles below the rate", rate: MinUploadRate{Rate: 2000, Grace: 200 * time.Millisecond},
			send: piece{bytes: 10, every: 20 * time.Millisecond, count: 1000}, length: 10_000,
			after: [2]time.Duration{200 * time.Millisecond, 3 * time.Second}},
		{name: "keeps the rate", rate: MinUploadRate{Rate: 1000, Grace: 200 * time.Millisecond},
			send: piece{bytes: 400, every: 20 * time.Millisecond, count: 40}, length: 16_000, whole: true},
		{name: "a small body within its grace", rate: MinUploadRate{Rate: 1_000_000, Grace: 2 * time.Second},
			send: piece{bytes: 10, every: 10 * time.Millisecond, count: 10}, length: 100, whole: true},
		{name: "the server's read timeout comes first", rate: MinUploadRate{Rate: 1000, Grace: 10 * time.Second}, readTimeout: 500 * time.Millisecond,
			send: piece{bytes: 100, count: 1}, length: 1000, timedOut: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			type result struct {
				n    int
				err  error
				took time.Duration
			}
			done := make(chan result, 1)
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				start := time.Now()
				body := tc.rate.Watch(w, r.Body)
				b, err := io.ReadAll(body)
				body.Stop()
				done <- result{len(b), err, time.Since(start)}
				w.Header().Set("Connection", "close")
				w.WriteHeader(http.StatusNoContent)
			}))
			srv.Config.ReadTimeout = tc.readTimeout
			srv.Start()
			defer srv.Close()
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", tc.length)
			go func() {
				for range tc.send.count {
					if _, err := conn.Write([]byte(strings.Repeat("x", tc.send.bytes))); err != nil {
						return
					}
					time.Sleep(tc.send.every) // the client's pace
				}
			}()
			var res result
			select {
			case res = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("the body was neither read nor cut off within 20s")
			}
			var slow *SlowBodyError
			switch {
			case tc.whole:
				if res.err != nil || res.n != tc.length {
					t.Errorf("read %d bytes, %v; want all %d", res.n, res.err, tc.length)
				}
			case tc.timedOut:
				var ne net.Error
				if errors.As(res.err, &slow) || !errors.As(res.err, &ne) || !ne.Timeout() || res.took > 5*time.Second {
					t.Errorf("after %s: %v, want the read timeout", res.took, res.err)
				}
			case !errors.As(res.err, &slow):
				t.Errorf("after %s: %v, want a *SlowBodyError", res.took, res.err)
			default:
				if slow.Received != int64(res.n) || (tc.received > 0 && slow.Received != tc.received) || slow.Rate != tc.rate {
					t.Errorf("cut off after %d bytes (%d read) at %+v, want %d", slow.Received, res.n, slow.Rate, tc.received)
				}
				if due := tc.rate.due(slow.Received); slow.After < due || slow.After < tc.after[0] || slow.After > tc.after[1] {
					t.Errorf("cut off after %s, want after %s (its due time) and within %s to %s", slow.After, due, tc.after[0], tc.after[1])
				}
				want := fmt.Sprintf("the body arrived too slowly: %d bytes in %s; after the first %s a body must arrive at %d bytes a second or faster",
					slow.Received, slow.After.Round(time.Millisecond), tc.rate.Grace, tc.rate.Rate)
				if slow.Error() != want {
					t.Errorf("message %q, want %q", slow.Error(), want)
				}
				// The connection is not left waiting for the rest.
				_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil || resp.StatusCode != http.StatusNoContent {
					t.Errorf("answer after the cut: %v %v", resp, err)
				}
			}
		})
	}
}

func TestMinUploadRateDue(t *testing.T) {
	m := MinUploadRate{Rate: 16 << 10, Grace: 2 * time.Second}
	for n, want := range map[int64]time.Duration{0: 2 * time.Second, 16 << 10: 3 * time.Second, 10 << 20: 642 * time.Second} {
		if got := m.due(n); got != want {
			t.Errorf("due(%d) = %s, want %s", n, got, want)
		}
	}
	if (MinUploadRate{}).Enabled() || (MinUploadRate{Rate: -1}).Enabled() || !m.Enabled() {
		t.Error("Enabled wrong")
	}
}

// BenchmarkMinUploadRateWatch is what pacing adds to reading a small
// body: the watch, its timer and the count of each read.
func BenchmarkMinUploadRateWatch(b *testing.B) {
	body := strings.Repeat("x", 4096)
	m := MinUploadRate{Rate: 16 << 10, Grace: 2 * time.Second}
	w := httptest.NewRecorder()
	buf := make([]byte, 8192)
	b.ReportAllocs()
	for b.Loop() {
		p := m.Watch(w, io.NopCloser(strings.NewReader(body)))
		for {
			if _, err := p.Read(buf); err != nil {
				break
			}
		}
		p.Stop()
	}
}

// TestMinUploadRateEndsWithTheBody: once a body has come whole, the
// request may take as long as it takes (waiting for the broker, or for an
// upstream's answer) without being cut off, and its context is not
// cancelled.
func TestMinUploadRateEndsWithTheBody(t *testing.T) {
	rate := MinUploadRate{Rate: 1000, Grace: 100 * time.Millisecond}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := rate.Watch(w, r.Body)
		defer body.Stop()
		if _, err := io.ReadAll(body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		select {
		case <-time.After(time.Second): // far past the body's due time
			w.WriteHeader(http.StatusNoContent)
		case <-r.Context().Done():
			t.Error("the request's context ended after its body had come")
		}
	}))
	defer srv.Close()
	resp, err := http.Post(srv.URL, "text/plain", strings.NewReader("small body"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("status %d, want 204", resp.StatusCode)
	}
}
