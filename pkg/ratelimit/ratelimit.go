// Package ratelimit keeps token buckets. A Limiter keeps one per key (per
// access token, or per client network): requests take one token each, or
// are refused, and work whose cost shows only as it is done is charged
// after. A Pace is one bucket a reader waits on instead.
package ratelimit

import (
	"math"
	"sync"
	"time"
)

// Limiter admits up to Rate events per second per key, with bursts of up to
// Burst. A nil *Limiter or one with a zero rate admits everything.
type Limiter struct {
	rate  float64
	burst float64
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
	sweep   time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
}

// New returns a limiter; burst below 1 is raised to 1. now may be nil.
func New(rate float64, burst int, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{rate: rate, burst: math.Max(1, float64(burst)), now: now, buckets: make(map[string]*bucket)}
}

// Allow takes one token from key's bucket. When none is left it reports how
// long until one is, for a Retry-After header.
func (l *Limiter) Allow(key string) (ok bool, retryAfter time.Duration) {
	return l.AllowN(key, 1)
}

// AllowN takes n tokens from key's bucket at once, or none: a request that
// counts as n things (the events of a batch) passes whole or not at all.
// When fewer than n are left it reports how long until n are. n above the
// burst never passes: it is told how long until the bucket is full, zero
// once it is, so callers keep n within the burst.
func (l *Limiter) AllowN(key string, n float64) (ok bool, retryAfter time.Duration) {
	if l == nil || l.rate <= 0 || n <= 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.maybeSweep(now)
	b := l.refill(key, now)
	if b.tokens >= n {
		b.tokens -= n
		return true, 0
	}
	return false, l.waitFor(b.tokens, math.Min(n, l.burst))
}

// Charge takes n more tokens from key's bucket for work a request did
// beyond what Allow counted, such as an index it had to build. The
// bucket may go into debt, down to minus one burst, which later requests
// of key wait out: work is paid for even when it was not known
// beforehand, and no single charge shuts a key out for longer than a
// burst takes to refill.
func (l *Limiter) Charge(key string, n float64) {
	if l == nil || l.rate <= 0 || n <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refill(key, l.now())
	b.tokens = math.Max(-l.burst, b.tokens-n)
}

// Refund gives back one token Allow took for something that turned out
// not to count.
func (l *Limiter) Refund(key string) { l.RefundN(key, 1) }

// RefundN gives back n tokens AllowN took for something that turned out
// not to count, such as a batch another limit refused.
func (l *Limiter) RefundN(key string, n float64) {
	if l == nil || l.rate <= 0 || n <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refill(key, l.now())
	b.tokens = math.Min(l.burst, b.tokens+n)
}

// refill returns key's bucket, made full when new, with what has accrued
// since it was last used. l.mu must be held.
func (l *Limiter) refill(key string, now time.Time) *bucket {
	b, found := l.buckets[key]
	if !found {
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[key] = b
	}
	b.refill(now, l.rate, l.burst)
	return b
}

// refill adds what accrued since b was last used, up to burst.
func (b *bucket) refill(now time.Time, rate, burst float64) {
	b.tokens = math.Min(burst, b.tokens+now.Sub(b.last).Seconds()*rate)
	b.last = now
}

// waitFor is how long a bucket holding tokens takes to hold n.
func (l *Limiter) waitFor(tokens, n float64) time.Duration {
	return time.Duration((n - tokens) / l.rate * float64(time.Second))
}

// maybeSweep forgets buckets that have refilled completely, once a minute,
// so keys that stopped sending do not hold memory.
func (l *Limiter) maybeSweep(now time.Time) {
	if now.Sub(l.sweep) < time.Minute {
		return
	}
	l.sweep = now
	for k, b := range l.buckets {
		// Only a bucket that has refilled is forgotten: one in debt for
		// charged work keeps it until it is paid.
		if b.tokens+now.Sub(b.last).Seconds()*l.rate >= l.burst {
			delete(l.buckets, k)
		}
	}
}

// Optional returns a limiter for rate requests per second, or nil (no
// limit) when rate is not positive.
func Optional(rate float64, burst int) *Limiter {
	if rate <= 0 {
		return nil
	}
	return New(rate, burst, nil)
}
