package contentapi

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// rankGate lets at most a fixed number of rankings run at once and the
// others in, taking turns across organizations and, within one, across
// its apps. A ranking is work for one core and no waiting, so running
// more than there are cores only shares the cores out: every answer is
// slower, and Go's scheduler, which runs the goroutine woken last first,
// lets some wait many times longer than others. Index builds take turns
// at a gate of their own (API.building).
//
// Turns, not arrival order, are what keep tenants apart: one token
// sending questions from many connections queues behind itself, and
// another organization's question is next whatever the length of that
// queue. While other organizations ask too (one did within shareWindow),
// an organization also holds at most perOrg places at once (all but one
// when there are several), so that a question of another finds a place
// without waiting for a ranking to end; an organization alone uses them
// all.
type rankGate struct {
	mu     sync.Mutex
	free   int
	places int
	perOrg int
	now    func() time.Time
	// recent are the two organizations that entered last, the latest
	// first, each with when it last did: whether another than o asked
	// within shareWindow is whether the latest other than o did.
	recent [2]struct {
		org string
		at  time.Time
	}
	// orgs are the organizations holding or waiting for places; ring
	// those waiting, served in turn.
	orgs map[string]*orgLine
	ring []*orgLine
}

// orgLine is one organization's rankings: how many places it holds and
// its apps' waiting questions, the apps served in turn.
type orgLine struct {
	id   string
	held int
	apps map[string]*appLine
	ring []*appLine
}

// appLine is one app's waiting questions, first come first served: each
// a channel closed when its turn comes.
type appLine struct {
	id      string
	waiting []chan struct{}
}

// rankTenant is whom a ranking is for.
type rankTenant struct{ org, app string }

// shareWindow is how recently another organization must have asked for
// an organization to be held to its share of the places.
const shareWindow = 10 * time.Second

// newRankGate returns a gate of places places; while others ask too, an
// organization may hold all but one of them (one when there is one).
func newRankGate(places int) *rankGate {
	places = max(places, 1)
	return &rankGate{free: places, places: places, perOrg: max(places-1, 1), now: time.Now, orgs: map[string]*orgLine{}}
}

// share is how many places o may hold now. Called with g.mu held.
func (g *rankGate) share(o string, now time.Time) int {
	other := g.recent[0]
	if other.org == o {
		other = g.recent[1]
	}
	if !other.at.IsZero() && now.Sub(other.at) < shareWindow {
		return g.perOrg
	}
	return g.places
}

// seen notes that o asks now. Called with g.mu held.
func (g *rankGate) seen(o string, now time.Time) {
	if g.recent[0].org != o {
		g.recent[1] = g.recent[0]
		g.recent[0].org = o
	}
	g.recent[0].at = now
}

// enter takes a place for t, waiting for its turn, or returns when ctx
// ends first. The place is given back with leave(t).
func (g *rankGate) enter(ctx context.Context, t rankTenant) error {
	turn := make(chan struct{})
	g.mu.Lock()
	o := g.orgs[t.org]
	if o == nil {
		o = &orgLine{id: t.org, apps: map[string]*appLine{}}
		g.orgs[t.org] = o
	}
	a := o.apps[t.app]
	if a == nil {
		a = &appLine{id: t.app}
		o.apps[t.app] = a
	}
	if len(a.waiting) == 0 {
		if len(o.ring) == 0 {
			g.ring = append(g.ring, o)
		}
		o.ring = append(o.ring, a)
	}
	a.waiting = append(a.waiting, turn)
	g.seen(t.org, g.now())
	g.dispatch()
	g.mu.Unlock()
	select {
	case <-turn:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	waited := g.withdraw(o, a, turn)
	g.mu.Unlock()
	if !waited {
		g.leave(t) // its turn came meanwhile: the next one's now
	}
	return fmt.Errorf("wait to rank: %w", context.Cause(ctx))
}

// leave gives t's place to whoever's turn is next.
func (g *rankGate) leave(t rankTenant) {
	g.mu.Lock()
	defer g.mu.Unlock()
	o := g.orgs[t.org]
	if o == nil || o.held == 0 {
		panic("contentapi: a place given back by an organization holding none")
	}
	o.held--
	g.free++
	g.forget(o)
	g.dispatch()
}

// dispatch gives free places to the organizations in turn, each to the
// first question of its next app, skipping those holding their share.
// Called with g.mu held.
func (g *rankGate) dispatch() {
	now := g.now()
	for g.free > 0 {
		i := slices.IndexFunc(g.ring, func(o *orgLine) bool { return o.held < g.share(o.id, now) })
		if i < 0 {
			return
		}
		o := g.ring[i]
		a := o.ring[0]
		close(a.waiting[0])
		a.waiting = a.waiting[1:]
		o.held++
		g.free--
		// The app goes to the back of its organization's line, and the
		// organization to the back of the gate's, if they still wait.
		o.ring = o.ring[1:]
		if len(a.waiting) > 0 {
			o.ring = append(o.ring, a)
		} else {
			delete(o.apps, a.id)
		}
		g.ring = slices.Delete(g.ring, i, i+1)
		if len(o.ring) > 0 {
			g.ring = append(g.ring, o)
		}
	}
}

// withdraw takes turn out of a's line, reporting whether it was still
// there (false: its turn came). Called with g.mu held.
func (g *rankGate) withdraw(o *orgLine, a *appLine, turn chan struct{}) bool {
	i := slices.Index(a.waiting, turn)
	if i < 0 {
		return false
	}
	a.waiting = slices.Delete(a.waiting, i, i+1)
	if len(a.waiting) == 0 {
		delete(o.apps, a.id)
		o.ring = slices.DeleteFunc(o.ring, func(x *appLine) bool { return x == a })
		if len(o.ring) == 0 {
			g.ring = slices.DeleteFunc(g.ring, func(x *orgLine) bool { return x == o })
		}
	}
	g.forget(o)
	return true
}

// forget drops an organization that neither holds nor waits. Called with
// g.mu held.
func (g *rankGate) forget(o *orgLine) {
	if o.held == 0 && len(o.ring) == 0 {
		delete(g.orgs, o.id)
	}
}
