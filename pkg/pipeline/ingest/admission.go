package ingest

import (
	"errors"
	"io"
	"sync"
)

// Reasons Admission refuses a request or a body. The Err*Busy and
// ErrApp* ones are the client's own share running out; ErrAtCapacity and
// ErrBodyMemory, the whole server's budget.
var (
	// ErrTokenBusy: the token already has its share of the request slots.
	ErrTokenBusy = errors.New("the token has its share of the request slots in flight")
	// ErrAppBusy: the app already has its share of the request slots.
	ErrAppBusy = errors.New("the app has its share of the request slots in flight")
	// ErrAtCapacity: every request slot is taken.
	ErrAtCapacity = errors.New("every request slot is taken")
	// ErrAppMemory: the app's bodies hold its share of the body memory.
	ErrAppMemory = errors.New("the app's bodies hold its share of the memory for request bodies")
	// ErrBodyMemory: the memory budget for bodies cannot hold this one.
	ErrBodyMemory = errors.New("memory budget for request bodies exhausted")
)

// Shares are an Admission's limits: request slots and body memory (in the
// units Pass.Body counts), for the whole server and for each app, and
// request slots for each token.
type Shares struct {
	Slots, SlotsPerApp, SlotsPerToken int
	Memory, MemoryPerApp              int64
}

// Admission bounds the work the handler takes on at once: requests in
// flight, for the server, each app and each token, and the memory their
// bodies hold, for the server and each app, so that no tenant can take
// what the others need. It is safe for concurrent use.
type Admission struct {
	shares Shares

	mu     sync.Mutex
	slots  int               // requests in flight
	free   int64             // of the body memory budget
	apps   map[string]appUse // apps with requests in flight
	tokens map[string]int    // requests in flight by token ID
}

// appUse is what one app's requests hold.
type appUse struct {
	slots int
	held  int64 // of the body memory budget
}

// NewAdmission returns an Admission of the given shares.
func NewAdmission(s Shares) *Admission {
	return &Admission{shares: s, free: s.Memory, apps: make(map[string]appUse), tokens: make(map[string]int)}
}

// Shares returns the admission's limits.
func (a *Admission) Shares() Shares { return a.shares }

// Pass is an admitted request's hold on a slot, its app's and token's
// shares and the body memory it has taken. Release gives all of it back.
type Pass struct {
	a          *Admission
	app, token string
	// allowance is what is left of the body bytes not counted.
	allowance int64
	// ahead is body bytes counted but not read yet; from the budget, not
	// the allowance, when counted is set.
	ahead   int64
	counted bool
	held    int64
}

// Enter admits a request acting for app, sent with token, or refuses it:
// ErrTokenBusy or ErrAppBusy when that token or app has its share of the
// slots in flight, ErrAtCapacity when every slot is taken. The narrower
// shares are checked first, so that a busy client is told to slow down
// rather than that the server is full.
func (a *Admission) Enter(app, token string) (Pass, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	u := a.apps[app]
	switch {
	case a.tokens[token] >= a.shares.SlotsPerToken:
		return Pass{}, ErrTokenBusy
	case u.slots >= a.shares.SlotsPerApp:
		return Pass{}, ErrAppBusy
	case a.slots >= a.shares.Slots:
		return Pass{}, ErrAtCapacity
	}
	a.slots++
	a.tokens[token]++
	u.slots++
	a.apps[app] = u
	return Pass{a: a, app: app, token: token, allowance: BodyAllowance}, nil
}

// Release gives back the pass's slot, shares and body memory. It must be
// called once per admitted pass, after the request no longer holds its
// body or the records built from it.
func (p *Pass) Release() {
	a := p.a
	if a == nil {
		return
	}
	a.mu.Lock()
	a.slots--
	a.free += p.held
	if n := a.tokens[p.token]; n <= 1 {
		delete(a.tokens, p.token) // the maps hold only what is in flight
	} else {
		a.tokens[p.token] = n - 1
	}
	if u := a.apps[p.app]; u.slots <= 1 {
		delete(a.apps, p.app)
	} else {
		u.slots--
		u.held -= p.held
		a.apps[p.app] = u
	}
	a.mu.Unlock()
	*p = Pass{}
}

// Body wraps a request body so that every byte beyond the first
// BodyAllowance takes MemoryPerBodyByte bytes of the budget, and of the
// app's share, until Release. The bytes are counted before they are read:
// a read asks the source for no more than is counted, so that a gzip body
// is never decompressed past what its app may hold. A read the budget
// cannot cover fails with ErrAppMemory or ErrBodyMemory, after reading at
// most one byte more, which tells the end of the body from more of it.
func (p *Pass) Body(r io.Reader) io.Reader { return &budgetReader{r: r, p: p} }

// Hold counts n bytes the request holds besides its body (a gzip
// decompressor's window and tables): from the allowance first, where a
// body byte stands for MemoryPerBodyByte bytes, then the budget and the
// app's share byte for byte. It fails as Body does.
func (p *Pass) Hold(n int64) error {
	from := min((n+MemoryPerBodyByte-1)/MemoryPerBodyByte, p.allowance)
	p.allowance -= from
	if n -= from * MemoryPerBodyByte; n <= 0 {
		return nil
	}
	a := p.a
	a.mu.Lock()
	defer a.mu.Unlock()
	u := a.apps[p.app]
	switch {
	case u.held+n > a.shares.MemoryPerApp:
		return ErrAppMemory
	case n > a.free:
		return ErrBodyMemory
	}
	a.take(p, &u, n)
	return nil
}

// readChunk is the most body bytes counted at once past the allowance:
// one lock per 64 KiB read.
const readChunk = 64 << 10

// count counts up to want more body bytes ahead of reading them, as many
// as the allowance, or else the app's share and the budget, allow.
func (p *Pass) count(want int64) error {
	if p.allowance > 0 {
		p.ahead, p.counted = min(want, p.allowance), false
		p.allowance -= p.ahead
		return nil
	}
	want = min(want, readChunk)
	a := p.a
	a.mu.Lock()
	defer a.mu.Unlock()
	u := a.apps[p.app]
	appLeft := (a.shares.MemoryPerApp - u.held) / MemoryPerBodyByte
	left := a.free / MemoryPerBodyByte
	switch {
	case appLeft <= 0:
		return ErrAppMemory // the app's own doing, checked first
	case left <= 0:
		return ErrBodyMemory
	}
	n := min(want, appLeft, left)
	a.take(p, &u, n*MemoryPerBodyByte)
	p.ahead, p.counted = n, true
	return nil
}

// uncount gives back what was counted and not read, once the body ended.
func (p *Pass) uncount() {
	if p.ahead == 0 {
		return
	}
	if !p.counted {
		p.allowance += p.ahead
		p.ahead = 0
		return
	}
	cost := p.ahead * MemoryPerBodyByte
	p.ahead = 0
	a := p.a
	a.mu.Lock()
	a.free += cost
	p.held -= cost
	u := a.apps[p.app]
	u.held -= cost
	a.apps[p.app] = u
	a.mu.Unlock()
}

// take moves cost bytes of the budget to p and its app; a.mu is held.
func (a *Admission) take(p *Pass, u *appUse, cost int64) {
	a.free -= cost
	u.held += cost
	a.apps[p.app] = *u
	p.held += cost
}

// budgetReader counts what it reads against a pass before reading it.
type budgetReader struct {
	r io.Reader
	p *Pass
}

func (b *budgetReader) Read(buf []byte) (int, error) {
	if len(buf) == 0 {
		return b.r.Read(buf)
	}
	p := b.p
	if p.ahead == 0 {
		if err := p.count(int64(len(buf))); err != nil {
			var one [1]byte
			n, rerr := b.r.Read(one[:])
			if n > 0 {
				return 0, err
			}
			return 0, rerr
		}
	}
	n, err := b.r.Read(buf[:min(int64(len(buf)), p.ahead)])
	p.ahead -= int64(n)
	if err != nil {
		p.uncount()
	}
	return n, err
}

// inUse reports the requests in flight, the apps and tokens they belong
// to and the body memory left, for tests.
func (a *Admission) inUse() (requests, apps, tokens int, free int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.slots, len(a.apps), len(a.tokens), a.free
}

// appHeld reports the body memory app holds, for tests.
func (a *Admission) appHeld(app string) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.apps[app].held
}
