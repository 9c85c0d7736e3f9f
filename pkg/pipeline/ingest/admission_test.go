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
		org        string // "o" when empty
		app, token string
		release    int // when > 0, release the pass of this earlier step (1-based) instead of entering
		want       error
	}
	tests := []struct {
		name                         string
		shares                       Shares // SlotsPerOrg: more than Slots when zero
		steps                        []step
		requests, apps, tokens, orgs int // in use after the steps
	}{
		{
			name: "admits up to the slots", shares: Shares{Slots: 2, SlotsPerApp: 2, SlotsPerToken: 2},
			steps:    []step{{app: "a", token: "a"}, {app: "b", token: "b"}, {app: "c", token: "c", want: ErrAtCapacity}},
			requests: 2, apps: 2, tokens: 2, orgs: 1,
		},
		{
			name: "one token gets its share only", shares: Shares{Slots: 4, SlotsPerApp: 4, SlotsPerToken: 2},
			steps:    []step{{app: "a", token: "a"}, {app: "a", token: "a"}, {app: "a", token: "a", want: ErrTokenBusy}, {app: "b", token: "b"}},
			requests: 3, apps: 2, tokens: 2, orgs: 1,
		},
		{
			name: "one app gets its share only, whichever token acts for it", shares: Shares{Slots: 8, SlotsPerApp: 2, SlotsPerToken: 4},
			steps: []step{{app: "a", token: "app-token"}, {app: "a", token: "org-token"}, {app: "a", token: "app-token", want: ErrAppBusy},
				{app: "a", token: "other-app-token", want: ErrAppBusy}, {app: "b", token: "org-token"}, {app: "b", token: "b"}},
			requests: 4, apps: 2, tokens: 3, orgs: 1,
		},
		{
			name: "an organization token gets its share over all its apps", shares: Shares{Slots: 8, SlotsPerApp: 2, SlotsPerToken: 3},
			steps: []step{{app: "a", token: "org"}, {app: "b", token: "org"}, {app: "c", token: "org"}, {app: "d", token: "org", want: ErrTokenBusy},
				{app: "d", token: "d"}},
			requests: 4, apps: 4, tokens: 2, orgs: 1,
		},
		{
			name: "an organization gets its share over all its tokens and apps", shares: Shares{Slots: 8, SlotsPerApp: 2, SlotsPerToken: 2, SlotsPerOrg: 3},
			steps: []step{{org: "o", app: "a", token: "a"}, {org: "o", app: "b", token: "b"}, {org: "o", app: "c", token: "org"},
				{org: "o", app: "d", token: "org2", want: ErrOrgBusy}, {org: "o", app: "a", token: "a", want: ErrOrgBusy}, {org: "p", app: "e", token: "e"}},
			requests: 4, apps: 4, tokens: 4, orgs: 2,
		},
		{
			// An app token's share is its app's by default: the app's
			// name is the one the client knows.
			name: "a busy app is told before a busy token", shares: Shares{Slots: 4, SlotsPerApp: 1, SlotsPerToken: 1},
			steps:    []step{{app: "a", token: "a"}, {app: "a", token: "a", want: ErrAppBusy}, {app: "b", token: "a", want: ErrTokenBusy}},
			requests: 1, apps: 1, tokens: 1, orgs: 1,
		},
		{
			name: "a busy token is told before a busy organization", shares: Shares{Slots: 4, SlotsPerApp: 4, SlotsPerToken: 1, SlotsPerOrg: 1},
			steps:    []step{{app: "a", token: "org"}, {app: "b", token: "org", want: ErrTokenBusy}, {app: "b", token: "b", want: ErrOrgBusy}},
			requests: 1, apps: 1, tokens: 1, orgs: 1,
		},
		{
			name: "a busy organization is told before a full server", shares: Shares{Slots: 2, SlotsPerApp: 2, SlotsPerToken: 2, SlotsPerOrg: 1},
			steps: []step{{org: "o", app: "a", token: "a"}, {org: "p", app: "b", token: "b"}, {org: "o", app: "c", token: "c", want: ErrOrgBusy},
				{org: "q", app: "d", token: "d", want: ErrAtCapacity}},
			requests: 2, apps: 2, tokens: 2, orgs: 2,
		},
		{
			name: "a busy app is told before a full server", shares: Shares{Slots: 2, SlotsPerApp: 1, SlotsPerToken: 2},
			steps:    []step{{app: "a", token: "a"}, {app: "b", token: "b"}, {app: "a", token: "a", want: ErrAppBusy}, {app: "c", token: "c", want: ErrAtCapacity}},
			requests: 2, apps: 2, tokens: 2, orgs: 1,
		},
		{
			name: "a refused slot gives the shares back", shares: Shares{Slots: 1, SlotsPerApp: 1, SlotsPerToken: 1},
			steps:    []step{{app: "a", token: "a"}, {app: "b", token: "b", want: ErrAtCapacity}, {release: 1}, {app: "b", token: "b"}},
			requests: 1, apps: 1, tokens: 1, orgs: 1,
		},
		{
			name: "release frees the slot and the shares", shares: Shares{Slots: 1, SlotsPerApp: 1, SlotsPerToken: 1},
			steps:    []step{{app: "a", token: "a"}, {app: "b", token: "a", want: ErrTokenBusy}, {release: 1}, {app: "b", token: "a"}, {release: 4}},
			requests: 0, apps: 0, tokens: 0, orgs: 0,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.shares.SlotsPerOrg == 0 {
				tc.shares.SlotsPerOrg = tc.shares.Slots + 1
			}
			tc.shares.Memory, tc.shares.MemoryPerApp, tc.shares.MemoryPerToken, tc.shares.MemoryPerOrg = 1<<20, 1<<20, 1<<20, 1<<20
			a := NewAdmission(tc.shares)
			passes := make([]Pass, len(tc.steps))
			for i, s := range tc.steps {
				if s.release > 0 {
					passes[s.release-1].Release()
					continue
				}
				org := appOr(s.org, "o")
				p, err := a.Enter(org, s.app, s.token)
				if !errors.Is(err, s.want) {
					t.Fatalf("step %d: Enter(%q, %q, %q) = %v, want %v", i+1, org, s.app, s.token, err, s.want)
				}
				passes[i] = p
			}
			if requests, apps, tokens, _ := a.inUse(); requests != tc.requests || apps != tc.apps || tokens != tc.tokens || a.orgsInUse() != tc.orgs {
				t.Errorf("in use: %d requests of %d apps, %d tokens and %d organizations, want %d of %d, %d and %d",
					requests, apps, tokens, a.orgsInUse(), tc.requests, tc.apps, tc.tokens, tc.orgs)
			}
		})
	}
}

func TestAdmissionBodyMemory(t *testing.T) {
	const budget = 1 << 20
	tests := []struct {
		name                 string
		appShare             int64
		tokenShare, orgShare int64  // the budget when zero
		held                 int    // body bytes another request holds
		heldBy               string // the app of that request
		heldToken, heldOrg   string // its token and organization, when not its own
		body                 int
		want                 error
		during               int64 // budget left while the body is held
		appHeld              int64 // of it, what app "t" holds
		tokenHeld, orgHeld   int64 // and token "t" and organization "o", when not zero
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
		{name: "the largest body the token's share holds", appShare: budget, tokenShare: budget / 4, body: BodyAllowance + budget/4/MemoryPerBodyByte,
			during: budget - budget/4/MemoryPerBodyByte*MemoryPerBodyByte, appHeld: budget / 4 / MemoryPerBodyByte * MemoryPerBodyByte,
			tokenHeld: budget / 4 / MemoryPerBodyByte * MemoryPerBodyByte},
		{name: "one byte past the token's share", appShare: budget, tokenShare: budget / 4, body: BodyAllowance + budget/4/MemoryPerBodyByte + 1, want: ErrTokenMemory},
		{name: "the same token holds most of its share for another app", appShare: budget / 2, tokenShare: budget / 2, heldToken: "t",
			held: BodyAllowance + 100<<10, body: BodyAllowance + 100<<10, want: ErrTokenMemory},
		{name: "the same token holds some of its share for another app", appShare: budget / 2, tokenShare: budget / 2, heldToken: "t",
			held: BodyAllowance + 50<<10, body: BodyAllowance + 50<<10, during: budget - 2*(50<<10)*MemoryPerBodyByte,
			appHeld: (50 << 10) * MemoryPerBodyByte, tokenHeld: 2 * (50 << 10) * MemoryPerBodyByte},
		{name: "the same organization holds most of its share with another app and token", appShare: budget / 2, orgShare: budget / 2, heldOrg: "o",
			held: BodyAllowance + 100<<10, body: BodyAllowance + 100<<10, want: ErrOrgMemory},
		{name: "the same organization holds some of its share with another app and token", appShare: budget / 2, orgShare: budget / 2, heldOrg: "o",
			held: BodyAllowance + 50<<10, body: BodyAllowance + 50<<10, during: budget - 2*(50<<10)*MemoryPerBodyByte,
			appHeld: (50 << 10) * MemoryPerBodyByte, tokenHeld: (50 << 10) * MemoryPerBodyByte, orgHeld: 2 * (50 << 10) * MemoryPerBodyByte},
		{name: "the app's share is told before the token's and the organization's", appShare: budget / 4, tokenShare: budget / 4, orgShare: budget / 4,
			body: BodyAllowance + budget/4/MemoryPerBodyByte + 1, want: ErrAppMemory},
		{name: "the token's share is told before the organization's", appShare: budget, tokenShare: budget / 4, orgShare: budget / 4,
			body: BodyAllowance + budget/4/MemoryPerBodyByte + 1, want: ErrTokenMemory},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAdmission(Shares{Slots: 2, SlotsPerApp: 2, SlotsPerToken: 2, SlotsPerOrg: 2, Memory: budget, MemoryPerApp: tc.appShare,
				MemoryPerToken: appOr64(tc.tokenShare, budget), MemoryPerOrg: appOr64(tc.orgShare, budget)})
			other, err := a.Enter(appOr(tc.heldOrg, "other"), appOr(tc.heldBy, "other"), appOr(tc.heldToken, "other"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, other.Body(bytes.NewReader(make([]byte, tc.held)))); err != nil {
				t.Fatalf("held body: %v", err)
			}
			p, err := a.Enter("o", "t", "t")
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
			if token, org := a.heldBy("t", "o"); err == nil && (tc.tokenHeld != 0 && token != tc.tokenHeld || tc.orgHeld != 0 && org != tc.orgHeld) {
				t.Errorf("while the body is held: %d bytes held by its token and %d by its organization; want %d and %d", token, org, tc.tokenHeld, tc.orgHeld)
			}
			p.Release()
			other.Release()
			if requests, apps, tokens, free := a.inUse(); requests != 0 || apps != 0 || tokens != 0 || a.orgsInUse() != 0 || free != budget {
				t.Errorf("after release: %d requests, %d apps, %d tokens, %d organizations, %d bytes free; want 0, 0, 0, 0, %d",
					requests, apps, tokens, a.orgsInUse(), free, budget)
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

func appOr64(n, def int64) int64 {
	if n == 0 {
		return def
	}
	return n
}

// TestAdmissionHold counts a gzip decompressor's state: from the
// allowance, where a body byte stands for MemoryPerBodyByte bytes, then
// from the budget byte for byte.
func TestAdmissionHold(t *testing.T) {
	const budget = 1 << 20
	tests := []struct {
		name                 string
		appShare             int64
		tokenShare, orgShare int64 // the budget when zero
		hold                 int64
		body                 int
		want                 error
		free                 int64 // budget left after the hold and the body
		allowance            int64 // left after the hold
	}{
		{name: "within the allowance", appShare: budget, hold: gzipStateBytes, free: budget, allowance: BodyAllowance - gzipStateBytes/MemoryPerBodyByte},
		{name: "then the body is counted sooner", appShare: budget, hold: gzipStateBytes, body: BodyAllowance,
			free: budget - gzipStateBytes, allowance: BodyAllowance - gzipStateBytes/MemoryPerBodyByte},
		{name: "past the allowance, byte for byte", appShare: budget, hold: 3*BodyAllowance + 1000, free: budget - 1000},
		{name: "past the app's share", appShare: 500, hold: 3*BodyAllowance + 1000, want: ErrAppMemory, free: budget},
		{name: "past the token's share", appShare: budget, tokenShare: 500, hold: 3*BodyAllowance + 1000, want: ErrTokenMemory, free: budget},
		{name: "past the organization's share", appShare: budget, orgShare: 500, hold: 3*BodyAllowance + 1000, want: ErrOrgMemory, free: budget},
		{name: "past the budget", appShare: 2 * budget, hold: 3*BodyAllowance + budget + 1, want: ErrBodyMemory, free: budget},
		{name: "past the organization's share and the budget: the organization's is told", appShare: 2 * budget, orgShare: 500,
			hold: 3*BodyAllowance + budget + 1, want: ErrOrgMemory, free: budget},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAdmission(Shares{Slots: 1, SlotsPerApp: 1, SlotsPerToken: 1, SlotsPerOrg: 1, Memory: budget, MemoryPerApp: tc.appShare,
				MemoryPerToken: appOr64(tc.tokenShare, 2*budget), MemoryPerOrg: appOr64(tc.orgShare, 2*budget)})
			p, err := a.Enter("o", "a", "a")
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
	gzipBomb := func() io.Reader {
		zr, err := gzip.NewReader(bytes.NewReader(bomb))
		if err != nil {
			t.Fatal(err)
		}
		return zr
	}
	tests := []struct {
		name                 string
		appShare             int64
		tokenShare, orgShare int64 // the app's when zero
		src                  func() io.Reader
		want                 error
	}{
		{name: "gzip bomb, the app's share binds", appShare: budget / 3, want: ErrAppMemory, src: gzipBomb},
		{name: "gzip bomb, the token's share binds", appShare: budget, tokenShare: budget / 3, want: ErrTokenMemory, src: gzipBomb},
		{name: "gzip bomb, the organization's share binds", appShare: budget, orgShare: budget / 3, want: ErrOrgMemory, src: gzipBomb},
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
			a := NewAdmission(Shares{Slots: 1, SlotsPerApp: 1, SlotsPerToken: 1, SlotsPerOrg: 1, Memory: budget, MemoryPerApp: tc.appShare,
				MemoryPerToken: appOr64(tc.tokenShare, tc.appShare), MemoryPerOrg: appOr64(tc.orgShare, tc.appShare)})
			p, err := a.Enter("o", "a", "a")
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
			mayHold := int64(BodyAllowance) + min(tc.appShare, appOr64(tc.tokenShare, tc.appShare), appOr64(tc.orgShare, tc.appShare), budget)/MemoryPerBodyByte
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

// TestAdmissionConcurrent enters and releases from many goroutines, with
// app tokens and organization tokens acting for several apps: the counts
// never pass their bounds and come back whole.
func TestAdmissionConcurrent(t *testing.T) {
	const slots, perApp, perToken, perOrg = 8, 3, 2, 5
	const budget, appBudget, tokenBudget, orgBudget = 4 << 20, 1 << 20, 768 << 10, 2 << 20
	a := NewAdmission(Shares{Slots: slots, SlotsPerApp: perApp, SlotsPerToken: perToken, SlotsPerOrg: perOrg,
		Memory: budget, MemoryPerApp: appBudget, MemoryPerToken: tokenBudget, MemoryPerOrg: orgBudget})
	body := make([]byte, BodyAllowance+64<<10)
	var perAppInFlight [4]atomic.Int32
	var perOrgInFlight [2]atomic.Int32
	var wg sync.WaitGroup
	for g := range 32 {
		app := string(rune('a' + g%4))
		org := "o" + string(rune('0'+g%4/2)) // apps a and b of o0, c and d of o1
		token := app + string(rune('0'+g%3)) // two tokens for each app
		if g%3 == 2 {
			token = org // and the organization's, for both its apps
		}
		appInFlight, orgInFlight := &perAppInFlight[g%4], &perOrgInFlight[g%4/2]
		wg.Go(func() {
			for range 200 {
				p, err := a.Enter(org, app, token)
				if err != nil {
					continue
				}
				if n := appInFlight.Add(1); n > perApp {
					t.Errorf("app %s has %d requests in flight, more than its share of %d", app, n, perApp)
				}
				if n := orgInFlight.Add(1); n > perOrg {
					t.Errorf("organization %s has %d requests in flight, more than its share of %d", org, n, perOrg)
				}
				if requests, _, _, _ := a.inUse(); requests > slots {
					t.Errorf("%d requests in flight, more than %d slots", requests, slots)
				}
				_, _ = io.Copy(io.Discard, p.Body(bytes.NewReader(body)))
				if held := a.appHeld(app); held > appBudget {
					t.Errorf("app %s holds %d bytes, more than its share of %d", app, held, appBudget)
				}
				if tokenHeld, orgHeld := a.heldBy(token, org); tokenHeld > tokenBudget || orgHeld > orgBudget {
					t.Errorf("token %s holds %d bytes and organization %s %d, more than their shares of %d and %d",
						token, tokenHeld, org, orgHeld, tokenBudget, orgBudget)
				}
				appInFlight.Add(-1)
				orgInFlight.Add(-1)
				p.Release()
			}
		})
	}
	wg.Wait()
	if requests, apps, tokens, free := a.inUse(); requests != 0 || apps != 0 || tokens != 0 || a.orgsInUse() != 0 || free != budget {
		t.Errorf("after every release: %d requests, %d apps, %d tokens, %d organizations, %d bytes free",
			requests, apps, tokens, a.orgsInUse(), free)
	}
}

// BenchmarkAdmission admits a request, reads a body past its allowance
// and releases it, from every processor at once.
func BenchmarkAdmission(b *testing.B) {
	a := NewAdmission(Shares{Slots: 256, SlotsPerApp: 64, SlotsPerToken: 64, SlotsPerOrg: 128,
		Memory: 256 << 20, MemoryPerApp: 64 << 20, MemoryPerToken: 64 << 20, MemoryPerOrg: 128 << 20})
	body := make([]byte, BodyAllowance+16<<10)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 32<<10)
		for pb.Next() {
			p, err := a.Enter("org", "app", "token")
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
