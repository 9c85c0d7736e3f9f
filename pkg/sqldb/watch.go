package sqldb

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
	// watchCheck is how long the listening connection may stay silent
	// before it is checked: a connection cut without a reset (a dropped
	// route, a proxy's idle timeout) is otherwise noticed only by TCP
	// keepalive, minutes later, while notifications are lost.
	watchCheck = 30 * time.Second
)

// WatchRevisions calls changed with an app's ID each time a transaction
// that created the app or moved its revision commits, through any process
// on the database, until ctx ends or the database is closed; it then
// returns nil. Only PostgreSQL tells: on SQLite it fails at once.
//
// It listens on a connection of its own rather than holding one of the
// pool's, and reconnects with backoff when that connection drops.
// Notifications sent while it was not listening are lost, so each time it
// starts listening, the first time included, it calls changed with an
// empty ID, meaning any app may have changed. changed is called from one
// goroutine at a time, in commit order; while it runs, notifications queue
// on the server, so it should be quick. failed, when not nil, hears why
// each connection ended, before the next is tried.
func (db *DB) WatchRevisions(ctx context.Context, changed func(appID string), failed func(error)) error {
	if db.engine != Postgres {
		return fmt.Errorf("watch revisions: %s does not notify changes", db.engine)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-db.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	backoff := watchMinBackoff
	for ctx.Err() == nil {
		listened, err := db.listenOnce(ctx, changed)
		if listened {
			backoff = watchMinBackoff
		}
		if err != nil && ctx.Err() == nil && failed != nil {
			failed(err)
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
func (db *DB) listenOnce(ctx context.Context, changed func(appID string)) (listened bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, db.listen.Copy())
	if err != nil {
		return false, fmt.Errorf("watch revisions: connect to %s: %w", db.name, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{RevisionChannel}.Sanitize()); err != nil {
		return false, fmt.Errorf("watch revisions: listen: %w", err)
	}
	changed("")
	for {
		wctx, cancel := context.WithTimeout(ctx, watchCheck)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			changed(n.Payload)
		case ctx.Err() != nil:
			return true, nil
		case wctx.Err() != nil:
			// Silent for a while: make sure the server is still there. A
			// timed-out wait leaves the connection usable.
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := conn.Exec(cctx, "SELECT 1")
			cancel()
			if err != nil {
				return true, fmt.Errorf("watch revisions: check the listening connection: %w", err)
			}
		default:
			return true, fmt.Errorf("watch revisions: %w", err)
		}
	}
}
