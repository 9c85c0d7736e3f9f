// Package revisionwatch runs a store's WatchRevisions for a test and
// collects what it reports: the apps notified, and why connections ended.
package revisionwatch

import (
	"context"
	"testing"
	"time"
)

// Source is a store that watches revisions.
type Source interface {
	WatchRevisions(ctx context.Context, changed func(appID string), failed func(error)) error
}

// Watcher collects what WatchRevisions reports.
type Watcher struct {
	ch   chan string
	done chan error
	// Failed receives why connections ended (what WatchRevisions passes
	// to failed), while it has room.
	Failed chan error
}

// Start runs s.WatchRevisions until the test ends, and checks then that
// it returned nil.
func Start(t *testing.T, s Source) *Watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watcher{ch: make(chan string, 1000), done: make(chan error, 1), Failed: make(chan error, 100)}
	report := func(err error) {
		select {
		case w.Failed <- err:
		default:
		}
	}
	go func() { w.done <- s.WatchRevisions(ctx, func(id string) { w.ch <- id }, report) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-w.done:
			if err != nil {
				t.Errorf("WatchRevisions returned %v after its context ended, want nil", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("WatchRevisions did not return after its context ended")
		}
	})
	return w
}

// Ready waits for the empty ID that says the watcher listens.
func (w *Watcher) Ready(t *testing.T) {
	t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case id := <-w.ch:
			if id == "" {
				return
			}
		case <-timeout:
			t.Fatal("WatchRevisions not listening after 15s")
		}
	}
}

// Expect waits up to five seconds for the next notification, which must
// name app.
func (w *Watcher) Expect(t *testing.T, app string) {
	t.Helper()
	select {
	case id := <-w.ch:
		if id != app {
			t.Errorf("notified of %q, want %q", id, app)
		}
	case <-time.After(5 * time.Second): // the replicas test holds the 1 s goal
		t.Errorf("no notification for %q within 5s", app)
	}
}
