package ratelimit

import (
	"context"
	"sync"
	"time"

	"github.com/assistantcms/cms/pkg/backoff"
)

// Pace is one bucket that a reader waits on rather than is refused by: it
// waits until one thing is allowed, then may take more than is allowed at
// once (a fetch brings what it brings) and pays for all of it after, the
// bucket going as far into debt as it must, so that over time no more
// than rate things a second pass.
type Pace struct {
	rate  float64
	burst float64

	mu sync.Mutex
	b  bucket
}

// NewPace returns a pace of rate things a second, saved up to burst (at
// least one).
func NewPace(rate, burst float64) *Pace {
	burst = max(1, burst)
	return &Pace{rate: rate, burst: burst, b: bucket{tokens: burst, last: time.Now()}}
}

// Wait waits until at least one thing is allowed, and returns how many
// are and whether it had to wait; an error when ctx ends first.
func (p *Pace) Wait(ctx context.Context) (allowed int64, waited bool, err error) {
	for {
		p.mu.Lock()
		p.b.refill(time.Now(), p.rate, p.burst)
		tokens := p.b.tokens
		p.mu.Unlock()
		if tokens >= 1 {
			return int64(tokens), waited, nil
		}
		waited = true
		if !backoff.Sleep(ctx, time.Duration((1-tokens)/p.rate*float64(time.Second))) {
			return 0, true, ctx.Err()
		}
	}
}

// Spend pays for n things taken.
func (p *Pace) Spend(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.b.refill(time.Now(), p.rate, p.burst)
	p.b.tokens -= float64(n)
}
