package backoff

import (
	"context"
	"testing"
	"time"
)

func TestDoublingWaits(t *testing.T) {
	tests := []struct {
		name           string
		first, longest time.Duration
		want           []time.Duration
	}{
		{"doubles up to the longest", time.Millisecond, 5 * time.Millisecond,
			[]time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 5 * time.Millisecond, 5 * time.Millisecond}},
		{"longest below first keeps first", 3 * time.Millisecond, time.Millisecond,
			[]time.Duration{3 * time.Millisecond, 3 * time.Millisecond}},
		{"zero waits not at all", 0, 0, []time.Duration{0, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := Doubling{First: tc.first, Longest: tc.longest}
			for i, want := range tc.want {
				if got := b.Next(); got != want {
					t.Fatalf("wait %d = %v, want %v", i, got, want)
				}
				if !b.Wait(context.Background()) {
					t.Fatalf("wait %d did not complete", i)
				}
			}
			b.Reset()
			if got := b.Next(); got != tc.first {
				t.Fatalf("after Reset the wait is %v, want %v", got, tc.first)
			}
		})
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if Sleep(ctx, time.Hour) {
		t.Fatal("Sleep reported a full wait on an ended context")
	}
	if d := time.Since(start); d > time.Minute {
		t.Fatalf("Sleep took %v on an ended context", d)
	}
	if !Sleep(context.Background(), 0) {
		t.Fatal("Sleep(0) reported an early end")
	}
}
