package ingest

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
)

func TestAdmissionEnter(t *testing.T) {
	type step struct {
		app, token string
		release    int // when > 0, release the pass of this earlier step (1-based) instead of entering
		want       error
	}
	tests := []struct {
		name                   string
		shares                 Shares
		steps                  []step
		requests, apps, tokens int // in use after the steps
	}{
		{
			name: "admits up to the slots", shares: Shares{Slots: 2, SlotsPerApp: 2, SlotsPerToken: 2},
			steps:    []step{{app: "a", token: "a"}, {app: "b", token: "b"}, {app: "c", token: "c", want: ErrAtCapacity}},
			requests: 2, apps: 2, tokens: 2,
		},
		{
			name: "one token gets its share only", shares: Shares{Slots: 4, SlotsPerApp: 4, SlotsPerToken: 2},
			steps:    []step{{app: "a", token: "a"}, {app: "a", token: "a"}, {app: "a", token: "a", want: ErrTokenBusy}, {app: "b", token: "b"}},
			requests: 3, apps: 2, tokens: 2,
		},
		{
			name: "one app gets its share only, whichever token acts for it", shares: Shares{Slots: 8, SlotsPerApp: 2, SlotsPerToken: 4},
			steps: []step{{app: "a", token: "app-token"}, {app: "a", token: "org-token"}, {app: "a", token: "app-token", want: ErrAppBusy},
				{app: "a", token: "other-app-token", want: ErrAppBusy}, {app: "b", token: "org-token"}, {app: "b", token: "b"}},
			requests: 4, apps: 2, tokens: 3,
		},
		{
			name: "an organization token gets its share over all its apps", shares: Shares{Slots: 8, SlotsPerApp: 2, SlotsPerToken: 3},
			steps: []step{{app: "a", token: "org"}, {app: "b", token: "org"}, {app: "c", token: "org"}, {app: "d", token: "org", want: ErrTokenBusy},
				{app: "d", token: "d"}},
			requests: 4, apps: 4, tokens: 2,
		},
		{
			name: "a busy token is told before a busy app", shares: Shares{Slots: 4, SlotsPerApp: 1, SlotsPerToken: 1},
			steps:    []step{{app: "a", token: "a"}, {app: "a", token: "a", want: ErrTokenBusy}, {app: "a", token: "a2", want: ErrAppBusy}},
			requests: 1, apps: 1, tokens: 1,
		},
		{
			name: "a busy app is told before a full server", shares: Shares{Slots: 2, SlotsPerApp: 1, SlotsPerToken: 2},
			steps:    []step{{app: "a", token: "a"}, {app: "b", token: "b"}, {app: "a", token: "a", want: ErrAppBusy}, {app: "c", token: "c", want: ErrAtCapacity}},
			requests: 2, apps: 2, tokens: 2,
		},
		{
			name: "a refused slot gives the shares back", shares: Shares{Slots: 1, SlotsPerApp: 1, SlotsPerToken: 1},
			steps:    []step{{app: "a", token: "a"}, {app: "b", token: "b", want: ErrAtCapacity}, {release: 1}, {app: "b", token: "b"}},
			requests: 1, apps: 1, tokens: 1,
		},
		{
			name: "release frees the slot and the shares", shares: Shares{Slots: 1, SlotsPerApp: 1, SlotsPerToken: 1},
			steps:    []step{{app: "a", token: "a"}, {app: "a", token: "a", want: ErrTokenBusy}, {release: 1}, {app: "a", token: "a"}, {release: 4}},
			requests: 0, apps: 0, tokens: 0,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.shares.Memory, tc.shares.MemoryPerApp = 1<<20, 1<<20
			a := NewAdmission(tc.shares)
			passes := make([]Pass, len(tc.steps))
			for i, s := range tc.steps {
				if s.release > 0 {
					passes[s.release-1].Release()
					continue
				}
				p, err := a.Enter(s.app, s.token)
				if !errors.Is(err, s.want) {
					t.Fatalf("step %d: Enter(%q, %q) = %v, want %v", i+1, s.app, s.token, err, s.want)
				}
				passes[i] = p
			}
			if requests, apps, tokens, _ := a.inUse(); requests != tc.requests || apps != tc.apps || tokens != tc.tokens {
				t.Errorf("in use: %d requests of %d apps and %d tokens, want %d of %d and %d", requests, apps, tokens, tc.requests, tc.apps, tc.tokens)
			}
		})
	}
}

func TestAdmissionBodyMemory(t *testing.T) {
	const budget = 1 << 20
	tests := []struct {
		name     string
		appShare int64
		held     int    // body bytes another request holds
		heldBy   string // the app of that request
		body     int
		want     error
		during   int64 // budget left while the body is held
		appHeld  int64 // of it, what app "t" holds
	}{
		{name: "within the allowance costs nothing", appShare: budget, body: BodyAllowance, during: budget},
		{name: "past the allowance costs per byte", appShare: budget, body: BodyAllowance + 1000,
			during: budget - 1000*MemoryPerBodyByte, appHeld: 1000 * MemoryPerBodyByte},
		{name: "the largest body the budget holds", appShare: budget, body: BodyAllowance + budget/MemoryPerBodyByte,
			during: budget - budget/MemoryPerBodyByte*MemoryPerBodyByte, appHeld: budget / MemoryPerBodyByte * MemoryPerBodyByte},
		{name: "one byte past the budget, which is the app's share", appShare: budget, body: BodyAllowance + budget/MemoryPerBodyByte + 1, want: ErrAppMemory},
		{name: "the largest body the app's share holds", appShare: budget / 4, body: BodyAllowance + budget/4/MemoryPerBodyByte,
			during: budget - budget/4/MemoryPerBodyByte*MemoryPerBodyByte, appHeld: budget / 4 / MemoryPerBodyByte * MemoryPerBodyByte},
		{name: "one byte past the app's share", appShare: budget / 4, body: BodyAllowance + budget/4/MemoryPerBodyByte + 1, want: ErrAppMemory},
		{name: "another app holds most of the budget", appShare: budget, heldBy: "other", held: BodyAllowance + 200<<10,
			body: BodyAllowance + 200<<10, want: ErrBodyMemory},
		{name: "the same app holds most of its share while the budget has room", appShare: budget / 2, heldBy: "t", held: BodyAllowance + 100<<10,
			body: BodyAllowance + 100<<10, want: ErrAppMemory},
		{name: "another app holds some of the budget", appShare: budget / 2, heldBy: "other", held: BodyAllowance + 100<<10,
			body: BodyAllowance + 100<<10, during: budget - 2*(100<<10)*MemoryPerBodyByte, appHeld: (100 << 10) * MemoryPerBodyByte},
		{name: "the same app holds some of its share", appShare: budget / 2, heldBy: "t", held: BodyAllowance + 50<<10,
			body: BodyAllowance + 50<<10, during: budget - 2*(50<<10)*MemoryPerBodyByte, appHeld: 2 * (50 << 10) * MemoryPerBodyByte},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAdmission(Shares{Slots: 2, SlotsPerApp: 2, SlotsPerToken: 2, Memory: budget, MemoryPerApp: tc.appShare})
			other, err := a.Enter(appOr(tc.heldBy, "other"), "other")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, other.Body(bytes.NewReader(make([]byte, tc.held)))); err != nil {
				t.Fatalf("held body: %v", err)
			}
			p, err := a.Enter("t", "t")
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			_, err = buf.ReadFrom(p.Body(bytes.NewReader(make([]byte, tc.body))))
			if !errors.Is(err, tc.want) {
				t.Fatalf("read %d bytes: %v, want %v", tc.body, err, tc.want)
			}
			if _, _, _, free := a.inUse(); err == nil && (free != tc.during || a.appHeld("t") != tc.appHeld) {
				t.Errorf("while the body is held: %d bytes of the budget left, %d held by its app; want %d and %d", free, a.appHeld("t"), tc.during, tc.appHeld)
			}
			p.Release()
			other.Release()
			if requests, apps, tokens, free := a.inUse(); requests != 0 || apps != 0 || tokens != 0 || free != budget {
				t.Errorf("after release: %d requests, %d apps, %d tokens, %d bytes free; want 0, 0, 0, %d", requests, apps, tokens, free, budget)
			}
		})
	}
}

func appOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// TestAdmissionHold counts a gzip decompressor's state: from the
// allowance, where a body byte stands for MemoryPerBodyByte bytes, then
// from the budget byte for byte.
func TestAdmissionHold(t *testing.T) {
	const budget = 1 << 20
	tests := []struct {
		name      string
		appShare  int64
		hold      int64
		body      int
		want      error
		free      int64 // budget left after the hold and the body
		allowance int64 // left after the hold
	}{
		{name: "within the allowance", appShare: budget, hold: gzipStateBytes, free: budget, allowance: BodyAllowance - gzipStateBytes/MemoryPerBodyByte},
		{name: "then the body is counted sooner", appShare: budget, hold: gzipStateBytes, body: BodyAllowance,
			free: budget - gzipStateBytes, allowance: BodyAllowance - gzipStateBytes/MemoryPerBodyByte},
		{name: "past the allowance, byte for byte", appShare: budget, hold: 3*BodyAllowance + 1000, free: budget - 1000},
		{name: "past the app's share", appShare: 500, hold: 3*BodyAllowance + 1000, want: ErrAppMemory, free: budget},
		{name: "past the budget", appShare: 2 * budget, hold: 3*BodyAllowance + budget + 1, want: ErrBodyMemory, free: budget},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAdmission(Shares{Slots: 1, SlotsPerApp: 1, SlotsPerToken: 1, Memory: budget, MemoryPerApp: tc.appShare})
			p, err := a.Enter("a", "a")
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Hold(tc.hold); !errors.Is(err, tc.want) {
				t.Fatalf("Hold(%d) = %v, want %v", tc.hold, err, tc.want)
			}
			if p.allowance != tc.allowance {
				t.Errorf("allowance left %d, want %d", p.allowance, tc.allowance)
			}
			if _, err := io.Copy(io.Discard, p.Body(bytes.NewReader(make([]byte, tc.body)))); err != nil {
				t.Fatal(err)
			}
			if _, _, _, free := a.inUse(); free != tc.free {
				t.Errorf("budget left %d, want %d", free, tc.free)
			}
			p.Release()
			if _, _, _, free := a.inUse(); free != budget {
				t.Errorf("after release %d free, want %d", free, budget)
			}
		})
	}
}

// TestBodyCountedBeforeRead reads bodies through the budget in reads as
// large as a growing buffer offers: no read asks its source for more than
// has been counted, so a gzip bomb is never decompressed past what its app
// may hold (one byte more tells the end of a body from more of it).
func TestBodyCountedBeforeRead(t *testing.T) {
	const budget = 300 << 10
	bomb := func() []byte {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		_, _ = zw.Write(make([]byte, 100<<20))
		_ = zw.Close()
		return b.Bytes()
	}()
	tests := []struct {
		name     string
		appShare int64
		src      func() io.Reader
		want     error
	}{
		{name: "gzip bomb, the app's share binds", appShare: budget / 3, want: ErrAppMemory, src: func() io.Reader {
			zr, err := gzip.NewReader(bytes.NewReader(bomb))
			if err != nil {
				t.Fatal(err)
			}
			return zr
		}},
		{name: "gzip bomb, the budget binds", appShare: 2 * budget, want: ErrBodyMemory, src: func() io.Reader {
			zr, err := gzip.NewReader(bytes.NewReader(bomb))
			if err != nil {
				t.Fatal(err)
			}
			return zr
		}},
		{name: "plain body", appShare: budget, want: ErrAppMemory, src: func() io.Reader { return bytes.NewReader(make([]byte, 10<<20)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAdmission(Shares{Slots: 1, SlotsPerApp: 1, SlotsPerToken: 1, Memory: budget, MemoryPerApp: tc.appShare})
			p, err := a.Enter("a", "a")
			if err != nil {
				t.Fatal(err)
			}
			defer p.Release()
			src := &countReads{r: tc.src(), p: &p}
			var buf bytes.Buffer
			_, err = buf.ReadFrom(p.Body(src))
			if !errors.Is(err, tc.want) {
				t.Fatalf("read: %v, want %v", err, tc.want)
			}
			mayHold := int64(BodyAllowance) + min(tc.appShare, budget)/MemoryPerBodyByte
			if src.n > mayHold+1 || src.most > 0 {
				t.Errorf("the source produced %d bytes, %d more at most than were counted at the time; the pass may hold %d", src.n, src.most, mayHold)
			}
		})
	}
}

// countReads counts what its source produced, and the most it produced
// past what the pass had counted (the allowance used and the budget held,
// in body bytes) plus the one byte that tells the end of a body.
type countReads struct {
	r       io.Reader
	p       *Pass
	n, most int64
}

func (c *countReads) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	counted := int64(BodyAllowance) - c.p.allowance + c.p.held/MemoryPerBodyByte
	c.most = max(c.most, c.n-counted-1)
	return n, err
}

// TestAdmissionConcurrent enters and releases from many goroutines: the
// counts never pass their bounds and come back whole.
func TestAdmissionConcurrent(t *testing.T) {
	const slots, perApp, perToken, budget, appBudget = 8, 3, 2, 4 << 20, 1 << 20
	a := NewAdmission(Shares{Slots: slots, SlotsPerApp: perApp, SlotsPerToken: perToken, Memory: budget, MemoryPerApp: appBudget})
	body := make([]byte, BodyAllowance+64<<10)
	var perAppInFlight [4]atomic.Int32
	var wg sync.WaitGroup
	for g := range 32 {
		app := string(rune('a' + g%4))
		token := app + string(rune('0'+g%3)) // three tokens for each app
		inFlight := &perAppInFlight[g%4]
		wg.Go(func() {
			for range 200 {
				p, err := a.Enter(app, token)
				if err != nil {
					continue
				}
				if n := inFlight.Add(1); n > perApp {
					t.Errorf("app %s has %d requests in flight, more than its share of %d", app, n, perApp)
				}
				if requests, _, _, _ := a.inUse(); requests > slots {
					t.Errorf("%d requests in flight, more than %d slots", requests, slots)
				}
				_, _ = io.Copy(io.Discard, p.Body(bytes.NewReader(body)))
				if held := a.appHeld(app); held > appBudget {
					t.Errorf("app %s holds %d bytes, more than its share of %d", app, held, appBudget)
				}
				inFlight.Add(-1)
				p.Release()
			}
		})
	}
	wg.Wait()
	if requests, apps, tokens, free := a.inUse(); requests != 0 || apps != 0 || tokens != 0 || free != budget {
		t.Errorf("after every release: %d requests, %d apps, %d tokens, %d bytes free", requests, apps, tokens, free)
	}
}

// BenchmarkAdmission admits a request, reads a body past its allowance
// and releases it, from every processor at once.
func BenchmarkAdmission(b *testing.B) {
	a := NewAdmission(Shares{Slots: 256, SlotsPerApp: 64, SlotsPerToken: 128, Memory: 256 << 20, MemoryPerApp: 64 << 20})
	body := make([]byte, BodyAllowance+16<<10)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 32<<10)
		for pb.Next() {
			p, err := a.Enter("app", "token")
			if err != nil {
				continue
			}
			r := p.Body(bytes.NewReader(body))
			for {
				if _, err := r.Read(buf); err != nil {
					break
				}
			}
			p.Release()
		}
	})
}
