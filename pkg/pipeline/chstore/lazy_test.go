package chstore

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestLazy(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t)
	l := NewLazy(Config{Addrs: []string{srv.Addr()}})
	defer l.Close()
	var first, second *Store
	if err := l.Do(ctx, func(s *Store) error { first = s; return nil }); err != nil || first == nil {
		t.Fatalf("first use: %v", err)
	}
	if err := l.Do(ctx, func(s *Store) error { second = s; return nil }); err != nil || second != first {
		t.Fatalf("second use: %v; want the same connection", err)
	}
	// A failure drops the connection: the next use opens another.
	boom := errors.New("boom")
	if err := l.Do(ctx, func(*Store) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("failure came back as %v", err)
	}
	var third *Store
	if err := l.Do(ctx, func(s *Store) error { third = s; return s.Conn().Ping(s.Context(ctx)) }); err != nil || third == first {
		t.Fatalf("after a failure: %v; want a new, working connection", err)
	}
	// A caller giving up keeps it.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.Do(cctx, func(*Store) error { return cctx.Err() }); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	var fourth *Store
	if err := l.Do(ctx, func(s *Store) error { fourth = s; return nil }); err != nil || fourth != third {
		t.Fatalf("after a cancelled use: %v; want the same connection", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// No server: the error comes back and nothing is kept.
	down := NewLazy(Config{Addrs: []string{"127.0.0.1:1"}, DialTimeout: time.Second})
	if err := down.Do(ctx, func(*Store) error { t.Error("ran without a connection"); return nil }); err == nil {
		t.Error("no error without a server")
	}
	if err := down.Close(); err != nil {
		t.Error(err)
	}
}
