package ratelimit

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	clock := time.Unix(1000, 0)
	now := func() time.Time { return clock }
	l := New(2, 3, now) // 2 per second, bursts of 3

	steps := []struct {
		advance time.Duration
		key     string
		ok      bool
		retry   time.Duration
	}{
		{0, "a", true, 0},
		{0, "a", true, 0},
		{0, "a", true, 0},
		{0, "a", false, 500 * time.Millisecond},
		{0, "b", true, 0}, // keys are independent
		{250 * time.Millisecond, "a", false, 250 * time.Millisecond},
		{250 * time.Millisecond, "a", true, 0},
		{0, "a", false, 500 * time.Millisecond},
		{10 * time.Second, "a", true, 0}, // refilled, but only to the burst
		{0, "a", true, 0},
		{0, "a", true, 0},
		{0, "a", false, 500 * time.Millisecond},
	}
	for i, s := range steps {
		clock = clock.Add(s.advance)
		ok, retry := l.Allow(s.key)
		if ok != s.ok || retry != s.retry {
			t.Errorf("step %d: Allow(%q) = %v, %s; want %v, %s", i, s.key, ok, retry, s.ok, s.retry)
		}
	}
}

func TestLimiterDisabled(t *testing.T) {
	for _, l := range []*Limiter{nil, New(0, 1, nil)} {
		for range 100 {
			if ok, _ := l.Allow("k"); !ok {
				t.Fatal("disabled limiter refused")
			}
		}
	}
}

func TestLimiterSweepsIdleKeys(t *testing.T) {
	clock := time.Unix(1000, 0)
	l := New(10, 10, func() time.Time { return clock })
	l.Allow("idle")
	clock = clock.Add(2 * time.Minute)
	l.Allow("busy")
	if _, ok := l.buckets["idle"]; ok {
		t.Error("idle bucket kept after a sweep")
	}
}

func TestOptional(t *testing.T) {
	if Optional(0, 10) != nil || Optional(-1, 10) != nil {
		t.Error("a non-positive rate must mean no limiter")
	}
	l := Optional(1, 2)
	if l == nil {
		t.Fatal("a positive rate gave no limiter")
	}
	ok1, _ := l.Allow("k")
	ok2, _ := l.Allow("k")
	ok3, _ := l.Allow("k")
	if !ok1 || !ok2 || ok3 {
		t.Errorf("burst of 2: %v %v %v", ok1, ok2, ok3)
	}
}

// TestLimiterConcurrentFlood floods one key from many goroutines with the
// clock stopped: exactly the burst is admitted, every refusal names a wait,
// and a key sending beside the flood keeps its whole burst.
func TestLimiterConcurrentFlood(t *testing.T) {
	clock := time.Unix(1000, 0)
	l := New(5, 50, func() time.Time { return clock })
	const goroutines, each = 16, 200
	var wg sync.WaitGroup
	var admitted, noWait atomic.Int64
	for range goroutines {
		wg.Go(func() {
			for range each {
				ok, wait := l.Allow("flooded")
				switch {
				case ok:
					admitted.Add(1)
				case wait <= 0 || wait > time.Second/5:
					noWait.Add(1)
				}
			}
		})
	}
	steady := 0
	for range 50 {
		if ok, _ := l.Allow("steady"); ok {
			steady++
		}
	}
	wg.Wait()
	if admitted.Load() != 50 || noWait.Load() != 0 {
		t.Errorf("flooded key: %d admitted, %d refusals without a wait of up to 200ms; want 50 and 0", admitted.Load(), noWait.Load())
	}
	if steady != 50 {
		t.Errorf("the other key was admitted %d times of 50", steady)
	}
}

// TestCharge: work charged after a request is waited out by the key's next
// requests, debt at most one burst, and other keys are untouched.
func TestCharge(t *testing.T) {
	clock := time.Unix(1000, 0)
	l := New(100, 200, func() time.Time { return clock }) // 100 a second, bursts of 200
	steps := []struct {
		advance time.Duration
		charge  float64 // charged to "a" before the request
		key     string
		ok      bool
		retry   time.Duration
	}{
		{0, 0, "a", true, 0},                         // 199 left
		{0, 150, "a", true, 0},                       // 199 - 150 - 1 = 48
		{0, 100, "a", false, 530 * time.Millisecond}, // 48 - 100 = -52: 0.53 s to one token
		{0, 0, "b", true, 0},
		{530 * time.Millisecond, 0, "a", true, 0},
		{0, 1e9, "a", false, 2010 * time.Millisecond}, // debt bounded by one burst: -200
		{2 * time.Second, 0, "a", false, 10 * time.Millisecond},
		{10 * time.Millisecond, 0, "a", true, 0},
	}
	for i, s := range steps {
		clock = clock.Add(s.advance)
		l.Charge("a", s.charge)
		ok, retry := l.Allow(s.key)
		if ok != s.ok || (retry-s.retry).Abs() > time.Millisecond {
			t.Errorf("step %d: Allow(%q) = %v, %s; want %v, %s", i, s.key, ok, retry, s.ok, s.retry)
		}
	}
	var disabled *Limiter
	disabled.Charge("a", 10)
	New(0, 1, nil).Charge("a", 10)
}

// TestSweepKeepsDebt: a key in debt for charged work is not forgotten by
// the sweep of idle keys before it has paid.
func TestSweepKeepsDebt(t *testing.T) {
	clock := time.Unix(1000, 0)
	l := New(0.1, 10, func() time.Time { return clock }) // one every 10 s
	l.Allow("debtor")
	l.Charge("debtor", 1e6) // debt bounded at one burst: -10
	// 150 s: idle longer than a full burst takes, but still owing.
	clock = clock.Add(150 * time.Second)
	l.Allow("other") // sweeps
	if _, ok := l.buckets["debtor"]; !ok {
		t.Fatal("a bucket in debt was forgotten")
	}
	// 100 s more pay the debt and refill the burst: the next sweep may
	// forget it.
	clock = clock.Add(100 * time.Second)
	l.Allow("other")
	if _, ok := l.buckets["debtor"]; ok {
		t.Error("a refilled bucket was kept")
	}
}

// TestAllowN takes several tokens at once, all or none, and gives them
// back.
func TestAllowN(t *testing.T) {
	clock := time.Unix(1000, 0)
	l := New(100, 500, func() time.Time { return clock }) // 100 a second, bursts of 500
	steps := []struct {
		name    string
		advance time.Duration
		refund  float64 // given back before the take
		n       float64
		ok      bool
		retry   time.Duration
	}{
		{name: "within the burst", n: 300, ok: true},
		{name: "more than is left takes nothing", n: 300, retry: time.Second},
		{name: "what is left", n: 200, ok: true},
		{name: "empty", n: 1, retry: 10 * time.Millisecond},
		{name: "refilled in part", advance: 1500 * time.Millisecond, n: 150, ok: true},
		{name: "given back", refund: 100, n: 100, ok: true},
		{name: "refunds stop at the burst: more never passes", advance: time.Hour, refund: 1000, n: 501},
		{name: "the whole burst", n: 500, ok: true},
		{name: "zero always passes", n: 0, ok: true},
	}
	for _, s := range steps {
		clock = clock.Add(s.advance)
		l.RefundN("k", s.refund)
		ok, retry := l.AllowN("k", s.n)
		if ok != s.ok || retry != s.retry {
			t.Errorf("%s: AllowN(%v) = %v, %s; want %v, %s", s.name, s.n, ok, retry, s.ok, s.retry)
		}
	}
	if ok, _ := l.AllowN("other", 500); !ok {
		t.Error("another key's bucket was not full")
	}
	var disabled *Limiter
	if ok, _ := disabled.AllowN("k", 1e9); !ok {
		t.Error("a nil limiter refused")
	}
}
