package ratelimit

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestPace(t *testing.T) {
	p := NewPace(1000, 10)
	allowed, waited, err := p.Wait(context.Background())
	if err != nil || waited || allowed != 10 {
		t.Fatalf("a full pace: Wait = %d, %v, %v; want 10 allowed at once", allowed, waited, err)
	}
	// A fetch larger than allowed puts the pace 50 into debt, which the
	// next Wait sits out in full: about 51 ms at 1,000 a second.
	p.Spend(60)
	start := time.Now()
	allowed, waited, err = p.Wait(context.Background())
	if err != nil || !waited || allowed < 1 {
		t.Fatalf("after debt: Wait = %d, %v, %v; want a wait, then at least one allowed", allowed, waited, err)
	}
	if d := time.Since(start); d < 45*time.Millisecond {
		t.Fatalf("a debt of 50 at 1,000 a second was waited out in %v", d)
	}

	p.Spend(1_000_000)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := p.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on an ended context = %v, want context.Canceled", err)
	}
}

func TestPaceBurstAtLeastOne(t *testing.T) {
	if allowed, _, err := NewPace(2, 0.5).Wait(context.Background()); err != nil || allowed != 1 {
		t.Fatalf("Wait = %d, %v; want one allowed", allowed, err)
	}
}
