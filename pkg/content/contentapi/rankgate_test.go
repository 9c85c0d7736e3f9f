package contentapi

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestGateOrder: no more than its places are taken at once, those
// waiting get in in the order they came, and one that gives up waiting
// takes no place.
func TestGateOrder(t *testing.T) {
	for _, places := range []int{1, 2, 3} {
		g := newRankGate(places)
		ctx := context.Background()
		for range places {
			if err := g.enter(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// One waiter gives up; the others queue up one after another.
		gaveUp, cancel := context.WithCancel(ctx)
		quit := make(chan error)
		go func() { quit <- g.enter(gaveUp) }()
		waitQueued(t, g, 1)
		cancel()
		if err := <-quit; !errors.Is(err, context.Canceled) {
			t.Fatalf("a cancelled wait returned %v", err)
		}
		const waiters = 8
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		for i := range waiters {
			wg.Go(func() {
				if err := g.enter(ctx); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, i)
				if len(order) > waiters {
					t.Error("more entered than waited")
				}
				mu.Unlock()
			})
			waitQueued(t, g, i+1)
		}
		// Each place given back lets the first in line in, alone.
		for k := range waiters {
			g.leave()
			deadline := time.Now().Add(10 * time.Second)
			for {
				mu.Lock()
				n := len(order)
				mu.Unlock()
				if n == k+1 {
					break
				}
				if n > k+1 || time.Now().After(deadline) {
					t.Fatalf("places %d: %d entered after %d places were given back", places, n, k+1)
				}
				time.Sleep(time.Millisecond)
			}
		}
		wg.Wait()
		if g.free != 0 || g.queued() != 0 {
			t.Errorf("%d places free and %d waiting, want none", g.free, g.queued())
		}
		for range places {
			g.leave()
		}
		if g.free != places {
			t.Errorf("%d places free after all left, want %d", g.free, places)
		}
		for i, w := range order {
			if w != i {
				t.Fatalf("places %d: entered in the order %v, want 0 to %d", places, order, waiters-1)
			}
		}
	}
}

// waitQueued waits until n wait in line at g.
func waitQueued(t *testing.T, g *rankGate, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for g.queued() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiting, want %d", g.queued(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// queued is how many wait in line at g.
func (g *rankGate) queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.waiting)
}
