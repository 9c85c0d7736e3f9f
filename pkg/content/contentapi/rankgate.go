package contentapi

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// rankGate lets at most a fixed number of rankings run at once and the others
// in, in the order they came. A ranking is work for one core and no
// waiting, so running more than there are cores only shares the cores
// out: every answer is slower, and Go's scheduler, which runs the
// goroutine woken last first, lets some wait many times longer than
// others. In arrival order, the slowest answers wait about as long as the
// rest.
type rankGate struct {
	mu      sync.Mutex
	free    int
	waiting []chan struct{} // closed when its turn comes, first come first
}

func newRankGate(places int) *rankGate { return &rankGate{free: max(places, 1)} }

// enter takes a place, waiting in line for one, or returns when ctx ends
// first.
func (g *rankGate) enter(ctx context.Context) error {
	g.mu.Lock()
	if g.free > 0 {
		g.free--
		g.mu.Unlock()
		return nil
	}
	turn := make(chan struct{})
	g.waiting = append(g.waiting, turn)
	g.mu.Unlock()
	select {
	case <-turn:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	i := slices.Index(g.waiting, turn)
	if i >= 0 {
		g.waiting = slices.Delete(g.waiting, i, i+1)
	}
	g.mu.Unlock()
	if i < 0 {
		g.leave() // its turn came meanwhile: the next one's now
	}
	return fmt.Errorf("wait to rank: %w", context.Cause(ctx))
}

// leave gives the place to the first waiting, if any.
func (g *rankGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.waiting) == 0 {
		g.free++
		return
	}
	close(g.waiting[0])
	g.waiting = g.waiting[1:]
}
