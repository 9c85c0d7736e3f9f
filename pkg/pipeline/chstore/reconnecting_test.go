package chstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/devclickhouse"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
)

func TestReconnecting(t *testing.T) {
	ctx := context.Background()
	srv := devclickhouse.StartForTest(t)
	r := chstore.NewReconnecting(chstore.Config{Addrs: []string{srv.Addr()}})
	defer r.Close()
	var first, second *chstore.Store
	if err := r.Do(ctx, func(s *chstore.Store) error { first = s; return nil }); err != nil || first == nil {
		t.Fatalf("first use: %v", err)
	}
	if err := r.Do(ctx, func(s *chstore.Store) error { second = s; return nil }); err != nil || second != first {
		t.Fatalf("second use: %v; want the same connection", err)
	}
	// A failure drops the connection: the next use opens another.
	boom := errors.New("boom")
	if err := r.Do(ctx, func(*chstore.Store) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("failure came back as %v", err)
	}
	var third *chstore.Store
	if err := r.Do(ctx, func(s *chstore.Store) error { third = s; return s.Conn().Ping(s.Context(ctx)) }); err != nil || third == first {
		t.Fatalf("after a failure: %v; want a new, working connection", err)
	}
	// A caller giving up keeps it.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := r.Do(cctx, func(*chstore.Store) error { return cctx.Err() }); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	var fourth *chstore.Store
	if err := r.Do(ctx, func(s *chstore.Store) error { fourth = s; return nil }); err != nil || fourth != third {
		t.Fatalf("after a cancelled use: %v; want the same connection", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// No server: the error comes back and nothing is kept.
	down := chstore.NewReconnecting(chstore.Config{Addrs: []string{"127.0.0.1:1"}, DialTimeout: time.Second})
	if err := down.Do(ctx, func(*chstore.Store) error { t.Error("ran without a connection"); return nil }); err == nil {
		t.Error("no error without a server")
	}
	if err := down.Close(); err != nil {
		t.Error(err)
	}
}
