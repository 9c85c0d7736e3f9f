package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
)

// Reconnection backoff of WatchRevisions: short at first, since a
// connection mostly drops when the server restarts, and bounded, so that a
// replica catches up soon after a longer outage.
const (
	watchMinBackoff = 100 * time.Millisecond
	watchMaxBackoff = 5 * time.Second
)

// WatchRevisions calls changed with an app's ID each time a transaction
// that created the app or moved its revision commits, through any store
// on the database, until ctx ends or the store is closed; it then returns
// nil.
//
// It listens on a connection of its own rather than holding one of the
// pool's, and reconnects with backoff when that connection drops.
// Notifications sent while it was not listening are lost, so each time it
// starts listening, the first time included, it calls changed with an
// empty ID, meaning any app may have changed. changed is called from one
// goroutine at a time, in commit order; while it runs, notifications queue
// on the server, so it should be quick.
func (s *Store) WatchRevisions(ctx context.Context, changed func(appID string)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	backoff := watchMinBackoff
	for ctx.Err() == nil {
		if listened, _ := s.listenOnce(ctx, changed); listened {
			backoff = watchMinBackoff
		}
		// Jitter keeps replicas that lost the server together from
		// reconnecting in step.
		wait := backoff/2 + rand.N(backoff)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		backoff = min(2*backoff, watchMaxBackoff)
	}
	return nil
}

// listenOnce connects, listens and passes notifications on until the
// connection fails or ctx ends. listened reports whether it got as far as
// listening, which resets the backoff.
func (s *Store) listenOnce(ctx context.Context, changed func(appID string)) (listened bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, s.listen.Copy())
	if err != nil {
		return false, fmt.Errorf("watch revisions: connect to %s: %w", s.name, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{revisionChannel}.Sanitize()); err != nil {
		return false, fmt.Errorf("watch revisions: listen: %w", err)
	}
	changed("")
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, fmt.Errorf("watch revisions: %w", err)
		}
		changed(n.Payload)
	}
}
