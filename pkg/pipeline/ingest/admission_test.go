package ingest

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
)

func TestAdmissionEnter(t *testing.T) {
	type step struct {
		token   string
		release int // when > 0, release the pass of this earlier step (1-based) instead of entering
		want    error
	}
	tests := []struct {
		name             string
		slots, perToken  int
		steps            []step
		requests, tokens int // in use after the steps
	}{
		{
			name: "admits up to the slots", slots: 2, perToken: 2,
			steps:    []step{{token: "a"}, {token: "b"}, {token: "c", want: ErrAtCapacity}},
			requests: 2, tokens: 2,
		},
		{
			name: "one token gets its share only", slots: 4, perToken: 2,
			steps:    []step{{token: "a"}, {token: "a"}, {token: "a", want: ErrTokenBusy}, {token: "b"}},
			requests: 3, tokens: 2,
		},
		{
			name: "a busy token is told before a full server", slots: 2, perToken: 2,
			steps:    []step{{token: "a"}, {token: "a"}, {token: "a", want: ErrTokenBusy}, {token: "b", want: ErrAtCapacity}},
			requests: 2, tokens: 1,
		},
		{
			name: "a refused slot gives the token's share back", slots: 1, perToken: 1,
			steps:    []step{{token: "a"}, {token: "b", want: ErrAtCapacity}, {release: 1}, {token: "b"}},
			requests: 1, tokens: 1,
		},
		{
			name: "release frees the slot and the share", slots: 1, perToken: 1,
			steps:    []step{{token: "a"}, {token: "a", want: ErrTokenBusy}, {release: 1}, {token: "a"}, {release: 4}},
			requests: 0, tokens: 0,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAdmission(tc.slots, tc.perToken, 1<<20)
			passes := make([]Pass, len(tc.steps))
			for i, s := range tc.steps {
				if s.release > 0 {
					passes[s.release-1].Release()
					continue
				}
				p, err := a.Enter(s.token)
				if !errors.Is(err, s.want) {
					t.Fatalf("step %d: Enter(%q) = %v, want %v", i+1, s.token, err, s.want)
				}
				passes[i] = p
			}
			if requests, tokens, _ := a.inUse(); requests != tc.requests || tokens != tc.tokens {
				t.Errorf("in use: %d requests of %d tokens, want %d of %d", requests, tokens, tc.requests, tc.tokens)
			}
		})
	}
}

func TestAdmissionBodyMemory(t *testing.T) {
	const budget = 1 << 20
	tests := []struct {
		name   string
		held   int // body bytes another request holds
		body   int
		want   error
		during int64 // budget left while the body is held
	}{
		{name: "within the allowance costs nothing", body: BodyAllowance, during: budget},
		{name: "past the allowance costs per byte", body: BodyAllowance + 1000, during: budget - 1000*MemoryPerBodyByte},
		{name: "the largest body that fits", body: BodyAllowance + budget/MemoryPerBodyByte,
			during: budget - budget/MemoryPerBodyByte*MemoryPerBodyByte},
		{name: "one byte past the budget", body: BodyAllowance + budget/MemoryPerBodyByte + 1, want: ErrBodyMemory},
		{name: "another body holds most of it", held: BodyAllowance + 200<<10, body: BodyAllowance + 200<<10, want: ErrBodyMemory},
		{name: "another body holds some of it", held: BodyAllowance + 100<<10, body: BodyAllowance + 100<<10,
			during: budget - 2*(100<<10)*MemoryPerBodyByte},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAdmission(2, 2, budget)
			other, err := a.Enter("other")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, other.Body(bytes.NewReader(make([]byte, tc.held)))); err != nil {
				t.Fatalf("held body: %v", err)
			}
			p, err := a.Enter("t")
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			_, err = buf.ReadFrom(p.Body(bytes.NewReader(make([]byte, tc.body))))
			if !errors.Is(err, tc.want) {
				t.Fatalf("read %d bytes: %v, want %v", tc.body, err, tc.want)
			}
			if _, _, free := a.inUse(); err == nil && free != tc.during {
				t.Errorf("budget left while the body is held: %d, want %d", free, tc.during)
			}
			p.Release()
			other.Release()
			if requests, tokens, free := a.inUse(); requests != 0 || tokens != 0 || free != budget {
				t.Errorf("after release: %d requests, %d tokens, %d bytes free; want 0, 0, %d", requests, tokens, free, budget)
			}
		})
	}
}

// TestAdmissionConcurrent enters and releases from many goroutines: the
// counts never pass their bounds and come back whole.
func TestAdmissionConcurrent(t *testing.T) {
	const slots, perToken, budget = 8, 3, 4 << 20
	a := NewAdmission(slots, perToken, budget)
	body := make([]byte, BodyAllowance+64<<10)
	var perTokenInFlight [4]atomic.Int32
	var wg sync.WaitGroup
	for g := range 32 {
		token := string(rune('a' + g%4))
		inFlight := &perTokenInFlight[g%4]
		wg.Go(func() {
			for range 200 {
				p, err := a.Enter(token)
				if err != nil {
					continue
				}
				if n := inFlight.Add(1); n > perToken {
					t.Errorf("token %s has %d requests in flight, more than its share of %d", token, n, perToken)
				}
				if requests, _, _ := a.inUse(); requests > slots {
					t.Errorf("%d requests in flight, more than %d slots", requests, slots)
				}
				_, _ = io.Copy(io.Discard, p.Body(bytes.NewReader(body)))
				inFlight.Add(-1)
				p.Release()
			}
		})
	}
	wg.Wait()
	if requests, tokens, free := a.inUse(); requests != 0 || tokens != 0 || free != budget {
		t.Errorf("after every release: %d requests, %d tokens, %d bytes free", requests, tokens, free)
	}
}
