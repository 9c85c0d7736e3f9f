package httpserve

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestServeDrains checks the shutdown order: once ctx ends, readiness
// fails and the listener closes while a request in flight still finishes
// with its answer, and only then does Serve return.
func TestServeDrains(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		WriteJSON(w, http.StatusOK, map[string]string{"done": "yes"})
	})
	checker := NewChecker()
	Mount(GetOn(mux), NewRegistry(), checker)
	srv := NewServer(mux, DefaultLimits(), discard())
	shuttingDown := make(chan struct{})
	srv.RegisterOnShutdown(func() { close(shuttingDown) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, discard(), "test", srv, ln, checker, 10*time.Second) }()

	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d %s", p, resp.StatusCode, b)
		}
		if p == "/metrics" && (!strings.Contains(string(b), "go_goroutines") || !strings.Contains(string(b), "process_cpu_seconds_total")) {
			t.Errorf("/metrics lacks the Go and process collectors:\n%.300s", b)
		}
	}

	slow := make(chan error, 1)
	go func() {
		// Its own transport: the connection must not be shared with the
		// probes above, which the drain closes once idle.
		client := &http.Client{Transport: &http.Transport{}}
		resp, err := client.Get(base + "/slow")
		if err != nil {
			slow <- err
			return
		}
		defer resp.Body.Close()
		var body map[string]string
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK || body["done"] != "yes" {
			slow <- errors.Join(err, errors.New("in-flight request answered "+resp.Status))
			return
		}
		slow <- nil
	}()
	<-entered
	cancel()
	<-shuttingDown
	if failed := checker.Ready(t.Context()); failed["server"] != "shutting down" {
		t.Errorf("readiness while draining: %v", failed)
	}
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Error("the listener still accepts connections while draining")
	}
	select {
	case err := <-served:
		t.Fatalf("Serve returned (%v) before the request in flight finished", err)
	default:
	}
	close(release)
	if err := <-slow; err != nil {
		t.Errorf("request in flight: %v", err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

func TestServeDrainTimeout(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	srv := NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
	}), DefaultLimits(), discard())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, discard(), "test", srv, ln, NewChecker(), 50*time.Millisecond) }()
	go func() {
		if resp, err := http.Get("http://" + ln.Addr().String()); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	cancel()
	if err := <-served; err == nil || !strings.Contains(err.Error(), "drain HTTP requests") {
		t.Errorf("Serve = %v, want a drain error", err)
	}
}

func TestServeFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	err = Serve(t.Context(), discard(), "test", NewServer(http.NotFoundHandler(), DefaultLimits(), discard()), ln, NewChecker(), time.Second)
	if err == nil || !strings.Contains(err.Error(), "serve HTTP") {
		t.Errorf("Serve on a closed listener = %v", err)
	}
}

func TestListen(t *testing.T) {
	ln, err := Listen(discard(), "127.0.0.1:0", "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if OperatorOf(ln) != nil {
		t.Error("an operator listener without an operator address")
	}
	if _, err := Listen(discard(), ln.Addr().String(), "", ""); err == nil || !strings.Contains(err.Error(), "listen on "+ln.Addr().String()) {
		t.Errorf("second listener on %s: %v", ln.Addr(), err)
	}
}

func TestListenOperator(t *testing.T) {
	ln, err := Listen(discard(), "127.0.0.1:0", "", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	op := OperatorOf(ln)
	if op == nil || op.Addr().String() == ln.Addr().String() {
		t.Fatalf("operator listener %v beside %v", op, ln.Addr())
	}
	taken := op.Addr().String()
	if _, err := Listen(discard(), "127.0.0.1:0", "", taken); err == nil || !strings.Contains(err.Error(), "operator address "+taken) {
		t.Errorf("operator listener on the taken %s: %v", taken, err)
	}
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := op.Accept(); err == nil {
		t.Error("Close left the operator listener open")
	}
}

func TestNewServerLimits(t *testing.T) {
	l := Limits{ReadHeaderTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 3 * time.Second, IdleTimeout: 4 * time.Second, MaxHeaderBytes: 4096}
	srv := NewServer(http.NotFoundHandler(), l, discard())
	if LimitsOf(srv) != l || srv.ErrorLog == nil {
		t.Errorf("server limits %+v (error log %v), want %+v", LimitsOf(srv), srv.ErrorLog, l)
	}
}
