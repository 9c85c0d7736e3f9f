package contentapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// entries records the order in which waiters got their places.
type entries struct {
	mu    sync.Mutex
	order []string
}

func (e *entries) add(name string) {
	e.mu.Lock()
	e.order = append(e.order, name)
	e.mu.Unlock()
}

func (e *entries) len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.order)
}

// queue starts a waiter at g for t, named name, and waits until it is in
// line.
func (e *entries) queue(t *testing.T, wg *sync.WaitGroup, g *rankGate, tenant rankTenant, name string) {
	t.Helper()
	before := g.queued()
	wg.Go(func() {
		if err := g.enter(context.Background(), tenant); err != nil {
			t.Error(err)
			return
		}
		e.add(name)
	})
	waitQueued(t, g, before+1)
}

// admit gives back one place of held and waits until exactly want have
// entered.
func (e *entries) admit(t *testing.T, g *rankGate, held rankTenant, want int) {
	t.Helper()
	g.leave(held)
	deadline := time.Now().Add(10 * time.Second)
	for e.len() != want {
		if e.len() > want || time.Now().After(deadline) {
			t.Fatalf("%d entered after a place was given back, want %d", e.len(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGateTakesTurns: no more than its places are taken at once; waiting
// organizations take turns whatever the length of each one's line, and
// within one its apps do; within an app, first come first served; one
// that gives up waiting takes no place.
func TestGateTakesTurns(t *testing.T) {
	flood := rankTenant{"org-a", "app-a1"}
	for _, places := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("%d places", places), func(t *testing.T) {
			g := newRankGate(places)
			ctx := context.Background()
			// Another organization fills what the flood's share leaves.
			for range places - g.perOrg {
				if err := g.enter(ctx, rankTenant{"org-c", "app-c"}); err != nil {
					t.Fatal(err)
				}
			}
			for range g.perOrg {
				if err := g.enter(ctx, flood); err != nil {
					t.Fatal(err)
				}
			}
			// One waiter gives up.
			gaveUp, cancel := context.WithCancel(ctx)
			quit := make(chan error)
			go func() { quit <- g.enter(gaveUp, flood) }()
			waitQueued(t, g, 1)
			cancel()
			if err := <-quit; !errors.Is(err, context.Canceled) {
				t.Fatalf("a cancelled wait returned %v", err)
			}
			waitQueued(t, g, 0)

			// The flood's app queues six, its second app two, then
			// another organization two.
			var e entries
			var wg sync.WaitGroup
			for i := range 6 {
				e.queue(t, &wg, g, flood, fmt.Sprintf("a1-%d", i))
			}
			for i := range 2 {
				e.queue(t, &wg, g, rankTenant{"org-a", "app-a2"}, fmt.Sprintf("a2-%d", i))
			}
			for i := range 2 {
				e.queue(t, &wg, g, rankTenant{"org-b", "app-b"}, fmt.Sprintf("b-%d", i))
			}
			// The place given back each time is the one taken last, so that
			// the other organization keeps its places throughout and the
			// turns are the same whatever the number of places.
			holders := []rankTenant{}
			for range places - g.perOrg {
				holders = append(holders, rankTenant{"org-c", "app-c"})
			}
			for range g.perOrg {
				holders = append(holders, flood)
			}
			tenants := map[string]rankTenant{"a1": flood, "a2": {"org-a", "app-a2"}, "b-": {"org-b", "app-b"}}
			for k := range 10 {
				e.admit(t, g, holders[len(holders)-1], k+1)
				holders = holders[:len(holders)-1]
				holders = append(holders, tenants[e.order[k][:2]])
			}
			wg.Wait()
			// org-b's two are never behind more than one of org-a's;
			// org-a's apps take turns; each app's own come in order.
			want := []string{"a1-0", "b-0", "a2-0", "b-1", "a1-1", "a2-1", "a1-2", "a1-3", "a1-4", "a1-5"}
			if !slices.Equal(e.order, want) {
				t.Errorf("entered in the order %v, want %v", e.order, want)
			}
			for _, h := range holders {
				g.leave(h)
			}
			if g.free != places || len(g.orgs) != 0 || len(g.ring) != 0 {
				t.Errorf("%d places free of %d, %d organizations and %d in line after all left", g.free, places, len(g.orgs), len(g.ring))
			}
		})
	}
}

// TestGateKeepsAPlaceForOthers: with several places, while another
// organization asks too, one organization never holds them all, so the
// other's question finds a place at once. Alone, or once the others have
// not asked for shareWindow, it uses them all.
func TestGateKeepsAPlaceForOthers(t *testing.T) {
	for _, places := range []int{2, 3, 4} {
		g := newRankGate(places)
		clock := time.Now()
		g.now = func() time.Time { return clock }
		ctx := context.Background()
		flood, other := rankTenant{"org-a", "app-a"}, rankTenant{"org-b", "app-b"}
		// The other organization asked a moment ago.
		if err := g.enter(ctx, other); err != nil {
			t.Fatal(err)
		}
		g.leave(other)
		for range places - 1 {
			if err := g.enter(ctx, flood); err != nil {
				t.Fatal(err)
			}
		}
		waiting := make(chan error, 1)
		go func() { waiting <- g.enter(ctx, flood) }()
		waitQueued(t, g, 1)
		quick, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := g.enter(quick, other); err != nil {
			t.Fatalf("places %d: another organization waited: %v", places, err)
		}
		cancel()
		if g.queued() != 1 {
			t.Fatalf("places %d: the flood's extra question entered beside the others", places)
		}
		g.leave(other)
		if g.queued() != 1 {
			t.Fatalf("places %d: the place kept for others went to the flood", places)
		}
		// The other has not asked for shareWindow: the next place given
		// back lets the flood take them all.
		clock = clock.Add(shareWindow)
		g.leave(flood)
		if err := <-waiting; err != nil {
			t.Fatal(err)
		}
		quick2, cancel2 := context.WithTimeout(ctx, 10*time.Second)
		if err := g.enter(quick2, flood); err != nil {
			t.Fatalf("places %d: an organization alone could not take the last place: %v", places, err)
		}
		cancel2()
		if g.free != 0 {
			t.Fatalf("places %d: %d free with the flood holding them all", places, g.free)
		}
		for range places {
			g.leave(flood)
		}
		if g.free != places {
			t.Errorf("places %d: %d free after all left", places, g.free)
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
	n := 0
	for _, o := range g.orgs {
		for _, a := range o.apps {
			n += len(a.waiting)
		}
	}
	return n
}
