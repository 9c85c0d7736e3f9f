// Package backoff paces waiting: a sleep that ends when its context does,
// and retry waits that double from a first to a longest.
package backoff

import (
	"context"
	"time"
)

// Sleep waits for d or until ctx ends; it reports whether it waited fully.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Doubling is the wait between attempts at something that keeps failing:
// First, then twice the last, up to Longest. The zero value waits not at
// all.
type Doubling struct {
	First, Longest time.Duration
	next           time.Duration // zero: First
}

// Next is the wait the next call of Wait takes, for a log line that says
// when the next attempt comes.
func (b *Doubling) Next() time.Duration {
	if b.next == 0 {
		return b.First
	}
	return b.next
}

// Wait sleeps Next and doubles the wait after it; it reports whether it
// waited fully (false: ctx ended).
func (b *Doubling) Wait(ctx context.Context) bool {
	d := b.Next()
	b.next = min(2*d, max(b.Longest, b.First))
	return Sleep(ctx, d)
}

// Reset makes the next wait First again, after an attempt that worked.
func (b *Doubling) Reset() { b.next = 0 }
