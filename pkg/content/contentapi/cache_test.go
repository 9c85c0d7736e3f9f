package contentapi

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// revisions is a revision source the test moves by hand.
type revisions struct{ rev atomic.Int64 }

func (r *revisions) Live(context.Context, string) (int64, int64, error) { return r.rev.Load(), 0, nil }

// gate is a load that blocks until released, counting its calls.
type gate struct {
	calls   atomic.Int32
	started chan struct{}
	release chan struct{}
	value   string
	err     error
}

func newGate(value string) *gate {
	return &gate{started: make(chan struct{}, 16), release: make(chan struct{}), value: value}
}

func (g *gate) load(context.Context, int64) (any, error) {
	g.calls.Add(1)
	g.started <- struct{}{}
	<-g.release
	return g.value, g.err
}

func TestCacheLoadsOnceAndKeysApart(t *testing.T) {
	ctx := context.Background()
	c := newCache(&revisions{}, time.Hour, 0)
	slow := newGate("slow")
	var wg sync.WaitGroup
	got := make([]any, 4)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = c.get(ctx, "app", "slow", true, slow.load)
		}()
	}
	<-slow.started
	// Another key of the same app answers while "slow" loads.
	v, err := c.get(ctx, "app", "fast", true, func(context.Context, int64) (any, error) { return "fast", nil })
	if err != nil || v != "fast" {
		t.Fatalf("fast key: %v %v", v, err)
	}
	close(slow.release)
	wg.Wait()
	for i, v := range got {
		if v != "slow" {
			t.Errorf("waiter %d got %v", i, v)
		}
	}
	if n := slow.calls.Load(); n != 1 {
		t.Errorf("loaded %d times, want once", n)
	}
}

func TestCacheFailedLoadsAreNotKept(t *testing.T) {
	ctx := context.Background()
	c := newCache(&revisions{}, time.Hour, 0)
	calls := 0
	load := func(context.Context, int64) (any, error) {
		calls++
		if calls == 1 {
			return nil, errors.New("store down")
		}
		return "ok", nil
	}
	if _, err := c.get(ctx, "app", "k", true, load); err == nil {
		t.Fatal("the first load's error was not returned")
	}
	if v, err := c.get(ctx, "app", "k", true, load); err != nil || v != "ok" || calls != 2 {
		t.Errorf("after a failure: %v %v, %d loads", v, err, calls)
	}
}

func TestCacheStaleWhileLoading(t *testing.T) {
	ctx := context.Background()
	revs := &revisions{}
	c := newCache(revs, 0, 0) // the revision is read on every call
	v1 := func(context.Context, int64) (any, error) { return "v1", nil }
	if v, _ := c.getOrStale(ctx, "app", "index", true, v1); v != "v1" {
		t.Fatalf("first build: %v", v)
	}
	revs.rev.Store(2)
	g := newGate("v2")
	// The new build starts, and until it ends the last good value answers.
	if v, _ := c.getOrStale(ctx, "app", "index", true, g.load); v != "v1" {
		t.Errorf("while building: %v, want v1", v)
	}
	<-g.started
	if v, _ := c.getOrStale(ctx, "app", "index", true, g.load); v != "v1" {
		t.Errorf("while building, again: %v, want v1", v)
	}
	// A key that may not answer stale waits for the build.
	done := make(chan any)
	go func() {
		v, _ := c.get(ctx, "app", "index", true, g.load)
		done <- v
	}()
	close(g.release)
	if v := <-done; v != "v2" {
		t.Errorf("waiting get: %v, want v2", v)
	}
	if v, _ := c.getOrStale(ctx, "app", "index", true, g.load); v != "v2" {
		t.Errorf("after the build: %v, want v2", v)
	}
	if n := g.calls.Load(); n != 1 {
		t.Errorf("built %d times, want once", n)
	}
}

func TestCacheStaleKeptAfterFailedBuild(t *testing.T) {
	ctx := context.Background()
	revs := &revisions{}
	c := newCache(revs, 0, 0)
	if _, err := c.getOrStale(ctx, "app", "index", true, func(context.Context, int64) (any, error) { return "v1", nil }); err != nil {
		t.Fatal(err)
	}
	revs.rev.Store(2)
	g := newGate("")
	g.err = errors.New("bad content")
	if v, _ := c.getOrStale(ctx, "app", "index", true, g.load); v != "v1" {
		t.Fatalf("while building: %v", v)
	}
	<-g.started
	close(g.release)
	// Once the failed build is over, the next call starts another and is
	// answered from the last good value meanwhile.
	g2 := newGate("v2")
	deadline := time.Now().Add(5 * time.Second)
	for g2.calls.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no new build was started after the failed one")
		}
		if v, _ := c.getOrStale(ctx, "app", "index", true, g2.load); v != "v1" {
			t.Fatalf("after a failed build: %v, want v1", v)
		}
	}
	close(g2.release)
}

func TestCacheWaiterGivesUpWithItsContext(t *testing.T) {
	c := newCache(&revisions{}, time.Hour, 0)
	g := newGate("v")
	go c.get(context.Background(), "app", "k", true, g.load)
	<-g.started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.get(ctx, "app", "k", true, g.load); !errors.Is(err, context.Canceled) {
		t.Errorf("err %v, want context.Canceled", err)
	}
	close(g.release)
}

// flaky is a revision source that can be made to fail.
type flaky struct {
	rev   atomic.Int64
	down  atomic.Bool
	calls atomic.Int32
}

func (f *flaky) Live(context.Context, string) (int64, int64, error) {
	f.calls.Add(1)
	if f.down.Load() {
		return 0, 0, errors.New("content store unreachable")
	}
	return f.rev.Load(), 0, nil
}

func TestCacheAnswersCachedValuesThroughAShortOutage(t *testing.T) {
	ctx := context.Background()
	revs := &flaky{}
	c := newCache(revs, time.Second, 30*time.Second)
	clock := time.Unix(1_800_000_000, 0)
	c.now = func() time.Time { return clock }
	load := func(v string) func(context.Context, int64) (any, error) {
		return func(context.Context, int64) (any, error) { return v, nil }
	}
	if v, err := c.get(ctx, "app", "cached", true, load("v1")); err != nil || v != "v1" {
		t.Fatalf("before the outage: %v %v", v, err)
	}
	revs.down.Store(true)
	for _, tc := range []struct {
		after   time.Duration
		key     string
		want    any
		wantErr bool
	}{
		{2 * time.Second, "cached", "v1", false},  // past the refresh interval: the revision read fails
		{2 * time.Second, "uncached", nil, true},  // nothing cached to answer with
		{30 * time.Second, "cached", "v1", false}, // within refresh + grace of the last read
		{31 * time.Second, "cached", nil, true},   // the grace is over
		{31 * time.Second, "uncached", nil, true},
	} {
		clock = time.Unix(1_800_000_000, 0).Add(tc.after)
		v, err := c.get(ctx, "app", tc.key, true, load("new"))
		if (err != nil) != tc.wantErr || v != tc.want {
			t.Errorf("%v into the outage, %s: %v %v; want %v (error %v)", tc.after, tc.key, v, err, tc.want, tc.wantErr)
		}
	}
	// A failed read is not tried again within the refresh interval.
	before := revs.calls.Load()
	if _, err := c.get(ctx, "app", "cached", true, load("new")); err == nil || revs.calls.Load() != before {
		t.Errorf("right after a failed read: error %v, %d more reads; want the error and no read", err, revs.calls.Load()-before)
	}
	// Back: the revision is read again and answers follow it.
	clock = clock.Add(time.Second)
	revs.down.Store(false)
	revs.rev.Store(1)
	if v, err := c.get(ctx, "app", "cached", true, load("v2")); err != nil || v != "v2" {
		t.Errorf("after the outage: %v %v; want v2", v, err)
	}
}

func TestCacheWithoutGraceFailsAtOnce(t *testing.T) {
	revs := &flaky{}
	c := newCache(revs, 0, 0)
	if _, err := c.get(context.Background(), "app", "k", true, func(context.Context, int64) (any, error) { return "v", nil }); err != nil {
		t.Fatal(err)
	}
	revs.down.Store(true)
	if v, err := c.get(context.Background(), "app", "k", true, func(context.Context, int64) (any, error) { return "v", nil }); err == nil {
		t.Errorf("got %v with the store down and no grace; want the error", v)
	}
}

func TestInvalidateEveryApp(t *testing.T) {
	revs := &flaky{}
	c := newCache(revs, time.Hour, 0)
	for _, app := range []string{"a", "b"} {
		if _, err := c.get(context.Background(), app, "k", true, func(context.Context, int64) (any, error) { return "v1", nil }); err != nil {
			t.Fatal(err)
		}
	}
	revs.rev.Store(1)
	c.Invalidate("")
	for _, app := range []string{"a", "b"} {
		if v, _ := c.get(context.Background(), app, "k", true, func(context.Context, int64) (any, error) { return "v2", nil }); v != "v2" {
			t.Errorf("app %s after invalidating every app: %v, want v2", app, v)
		}
	}
}

func TestInvalidateKeepsValuesOfAnUnchangedRevision(t *testing.T) {
	revs := &flaky{}
	c := newCache(revs, time.Hour, 0)
	var loads atomic.Int32
	load := func(context.Context, int64) (any, error) { loads.Add(1); return "v", nil }
	for range 2 {
		if _, err := c.get(context.Background(), "app", "index", true, load); err != nil {
			t.Fatal(err)
		}
		c.Invalidate("app")
		c.Invalidate("")
	}
	if n, reads := loads.Load(), revs.calls.Load(); n != 1 || reads != 2 {
		t.Errorf("%d loads and %d revision reads; want 1 load (the revision did not move) and a read after each invalidation", n, reads)
	}
}

func TestReadinessFailsOnlyAfterTheGrace(t *testing.T) {
	var down atomic.Bool
	ping := func(context.Context) error {
		if down.Load() {
			return errors.New("content store unreachable")
		}
		return nil
	}
	clock := time.Unix(1_800_000_000, 0)
	check := pingWithin(ping, 30*time.Second, func() time.Time { return clock })
	down.Store(true)
	if err := check(context.Background()); err == nil {
		t.Error("ready before the store ever answered")
	}
	down.Store(false)
	if err := check(context.Background()); err != nil {
		t.Fatal(err)
	}
	down.Store(true)
	for _, tc := range []struct {
		after   time.Duration
		wantErr bool
	}{{time.Second, false}, {29 * time.Second, false}, {30 * time.Second, true}} {
		clock = time.Unix(1_800_000_000, 0).Add(tc.after)
		if err := check(context.Background()); (err != nil) != tc.wantErr {
			t.Errorf("%v into the outage: %v, want error %v", tc.after, err, tc.wantErr)
		}
	}
}

// slowRevisions answers revision reads only when released while held, and
// can move a shared clock by the time a read takes.
type slowRevisions struct {
	rev     atomic.Int64
	held    atomic.Bool
	fail    atomic.Bool
	calls   atomic.Int32
	release chan struct{}
	clock   *atomic.Int64 // Unix nanoseconds
	takes   time.Duration
	// deaf holds reads past their timeout too, until released: what
	// returns meanwhile did not wait for the read, however slow the
	// machine.
	deaf bool
}

func (s *slowRevisions) Live(ctx context.Context, _ string) (int64, int64, error) {
	s.calls.Add(1)
	// The revision as of the read's start, as a query sees it.
	rev := s.rev.Load()
	if s.held.Load() {
		done := ctx.Done()
		if s.deaf {
			done = nil
		}
		select {
		case <-s.release:
		case <-done:
			return 0, 0, ctx.Err()
		}
	}
	s.clock.Add(int64(s.takes))
	if s.fail.Load() {
		return 0, 0, errors.New("content store locked")
	}
	return rev, 0, nil
}

func fakeClock(c *cache) *atomic.Int64 {
	clock := &atomic.Int64{}
	clock.Store(time.Unix(1_800_000_000, 0).UnixNano())
	c.now = func() time.Time { return time.Unix(0, clock.Load()) }
	return clock
}

// TestCacheAnswersWhileARevisionReadIsSlow: a locked database makes the
// revision read slow; requests with a cached value get it after checkWait
// instead of the read's timeout, those without wait for the read, and one
// read serves them all.
func TestCacheAnswersWhileARevisionReadIsSlow(t *testing.T) {
	ctx := context.Background()
	revs := &slowRevisions{release: make(chan struct{}), deaf: true}
	c := newCache(revs, time.Second, 30*time.Second)
	revs.clock = fakeClock(c)
	load := func(v string) func(context.Context, int64) (any, error) {
		return func(context.Context, int64) (any, error) { return v, nil }
	}
	if v, err := c.get(ctx, "app", "cached", true, load("v1")); err != nil || v != "v1" {
		t.Fatalf("before: %v %v", v, err)
	}
	revs.held.Store(true)
	revs.rev.Store(1)
	revs.clock.Add(int64(2 * time.Second))

	// The read is held until released below, so an answer now is one
	// that did not wait for it; the bound only ends a test that would
	// otherwise wait for ever.
	cached := make(chan any, 1)
	go func() {
		v, err := c.get(ctx, "app", "cached", true, load("v2"))
		if err != nil {
			v = err
		}
		cached <- v
	}()
	select {
	case v := <-cached:
		if v != "v1" {
			t.Fatalf("cached key during a slow read: %v; want v1", v)
		}
	case <-time.After(10 * time.Second):
		close(revs.release)
		t.Fatalf("cached key during a slow read: no answer in 10s; want v1 without waiting for the read")
	}
	uncached := make(chan any, 1)
	go func() {
		v, _ := c.get(ctx, "app", "uncached", true, load("u2"))
		uncached <- v
	}()
	select {
	case v := <-uncached:
		t.Fatalf("an uncached key was answered (%v) before the revision read ended", v)
	case <-time.After(2 * checkWait):
	}
	close(revs.release)
	if v := <-uncached; v != "u2" {
		t.Errorf("uncached key after the read: %v", v)
	}
	if v, err := c.get(ctx, "app", "cached", true, load("v2")); err != nil || v != "v2" {
		t.Errorf("cached key after the revision moved: %v %v; want v2", v, err)
	}
	if n := revs.calls.Load(); n != 2 {
		t.Errorf("%d revision reads; want 2 (one before, one shared during the slow read)", n)
	}
}

// TestCacheFailedReadCountsFromItsEnd: a read that fails after waiting out
// its timeout is not tried again by the next request, which would make
// every request wait that long in turn.
func TestCacheFailedReadCountsFromItsEnd(t *testing.T) {
	ctx := context.Background()
	revs := &slowRevisions{release: make(chan struct{}), takes: 2 * time.Second}
	c := newCache(revs, time.Second, 30*time.Second)
	revs.clock = fakeClock(c)
	load := func(context.Context, int64) (any, error) { return "v1", nil }
	if _, err := c.get(ctx, "app", "k", true, load); err != nil {
		t.Fatal(err)
	}
	revs.fail.Store(true)
	revs.clock.Add(int64(time.Second))
	for i := range 3 {
		if v, err := c.get(ctx, "app", "k", true, load); err != nil || v != "v1" {
			t.Fatalf("read %d during the outage: %v %v", i, v, err)
		}
	}
	if n := revs.calls.Load(); n != 2 {
		t.Errorf("%d revision reads; want 2: the failed one is not repeated within the refresh interval from its end", n)
	}
}

// TestCacheInvalidationDuringARead asks for another read: the one under way
// may have read the revision before the change.
func TestCacheInvalidationDuringARead(t *testing.T) {
	ctx := context.Background()
	revs := &slowRevisions{release: make(chan struct{})}
	c := newCache(revs, time.Hour, 0)
	revs.clock = fakeClock(c)
	if _, err := c.get(ctx, "app", "k", true, func(context.Context, int64) (any, error) { return "v1", nil }); err != nil {
		t.Fatal(err)
	}
	revs.held.Store(true)
	c.Invalidate("app")
	got := make(chan any, 1)
	go func() {
		v, _ := c.get(ctx, "app", "k", true, func(context.Context, int64) (any, error) { return "v2", nil })
		got <- v
	}()
	// Wait for the read to start, then invalidate again and move the
	// revision, as a write during the read would.
	for revs.calls.Load() < 2 {
		runtime.Gosched()
	}
	c.Invalidate("app")
	revs.rev.Store(1)
	revs.held.Store(false)
	close(revs.release)
	if v := <-got; v != "v2" {
		t.Errorf("after a write during the read: %v; want v2", v)
	}
	if n := revs.calls.Load(); n != 3 {
		t.Errorf("%d revision reads; want 3", n)
	}
}
