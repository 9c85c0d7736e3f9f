package ingest

import (
	"errors"
	"io"
	"sync"
)

// Reasons Admission refuses a request or a body. ErrAtCapacity and
// ErrBodyMemory are the whole server's budget running out; the others,
// the client's own share.
var (
	// ErrAppBusy: the app already has its share of the request slots.
	ErrAppBusy = errors.New("the app has its share of the request slots in flight")
	// ErrTokenBusy: the token already has its share of the request slots.
	ErrTokenBusy = errors.New("the token has its share of the request slots in flight")
	// ErrOrgBusy: the organization already has its share of the request
	// slots.
	ErrOrgBusy = errors.New("the organization has its share of the request slots in flight")
	// ErrAtCapacity: every request slot is taken.
	ErrAtCapacity = errors.New("every request slot is taken")
	// ErrAppMemory: the app's bodies hold its share of the body memory.
	ErrAppMemory = errors.New("the app's bodies hold its share of the memory for request bodies")
	// ErrTokenMemory: the token's bodies hold its share of the body memory.
	ErrTokenMemory = errors.New("the token's bodies hold its share of the memory for request bodies")
	// ErrOrgMemory: the organization's bodies hold its share of the body
	// memory.
	ErrOrgMemory = errors.New("the organization's bodies hold its share of the memory for request bodies")
	// ErrBodyMemory: the memory budget for bodies cannot hold this one.
	ErrBodyMemory = errors.New("memory budget for request bodies exhausted")
)

// Shares are an Admission's limits: request slots and body memory (in the
// units Pass.Body counts) for the whole server, and for each app, each
// token and each organization.
type Shares struct {
	Slots, SlotsPerApp, SlotsPerToken, SlotsPerOrg     int
	Memory, MemoryPerApp, MemoryPerToken, MemoryPerOrg int64
}

// Admission bounds the work the handler takes on at once: requests in
// flight and the memory their bodies hold, for the server and for each
// app, token and organization, so that no tenant can take what the others
// need. The app's share bounds what any of its tokens do for it; the
// token's, an organization token acting for several apps (a public token,
// as a runtime's is); the organization's, all its tokens together. It is
// safe for concurrent use.
type Admission struct {
	shares Shares

	mu    sync.Mutex
	slots int   // requests in flight
	free  int64 // of the body memory budget
	// What the requests in flight hold, by app, token ID and
	// organization; they hold only what is in flight.
	apps, tokens, orgs holdings
}

// use is what the requests of one app, token or organization hold.
type use struct {
	slots int
	held  int64 // of the body memory budget
}

// holdings are uses by key.
type holdings map[string]use

// add adds to key's use, and forgets the key once it holds no slot.
func (h holdings) add(key string, slots int, held int64) {
	u := h[key]
	u.slots += slots
	u.held += held
	if u.slots <= 0 {
		delete(h, key)
		return
	}
	h[key] = u
}

// NewAdmission returns an Admission of the given shares.
func NewAdmission(s Shares) *Admission {
	return &Admission{shares: s, free: s.Memory, apps: make(holdings), tokens: make(holdings), orgs: make(holdings)}
}

// Shares returns the admission's limits.
func (a *Admission) Shares() Shares { return a.shares }

// Pass is an admitted request's hold on a slot, its app's, token's and
// organization's shares and the body memory it has taken. Release gives
// all of it back.
type Pass struct {
	a               *Admission
	org, app, token string
	// allowance is what is left of the body bytes not counted.
	allowance int64
	// ahead is body bytes counted but not read yet; from the budget, not
	// the allowance, when counted is set.
	ahead   int64
	counted bool
	held    int64
}

// Enter admits a request of organization org acting for app, sent with
// token, or refuses it: ErrAppBusy, ErrTokenBusy or ErrOrgBusy when that
// app, token or organization has its share of the slots in flight,
// ErrAtCapacity when every slot is taken. The client's own shares are
// checked before the server's, so that a busy client is told to slow down
// rather than that the server is full; the app's first, as an app token's
// share is its app's by default, so that it is told in the app's name.
func (a *Admission) Enter(org, app, token string) (Pass, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.shares
	switch {
	case a.apps[app].slots >= s.SlotsPerApp:
		return Pass{}, ErrAppBusy
	case a.tokens[token].slots >= s.SlotsPerToken:
		return Pass{}, ErrTokenBusy
	case a.orgs[org].slots >= s.SlotsPerOrg:
		return Pass{}, ErrOrgBusy
	case a.slots >= s.Slots:
		return Pass{}, ErrAtCapacity
	}
	a.slots++
	a.apps.add(app, 1, 0)
	a.tokens.add(token, 1, 0)
	a.orgs.add(org, 1, 0)
	return Pass{a: a, org: org, app: app, token: token, allowance: BodyAllowance}, nil
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
	a.apps.add(p.app, -1, -p.held)
	a.tokens.add(p.token, -1, -p.held)
	a.orgs.add(p.org, -1, -p.held)
	a.mu.Unlock()
	*p = Pass{}
}

// Body wraps a request body so that every byte beyond the first
// BodyAllowance takes MemoryPerBodyByte bytes of the budget, and of the
// shares of the request's app, token and organization, until Release. The
// bytes are counted before they are read: a read asks the source for no
// more than is counted, so that a gzip body is never decompressed past
// what its app, token and organization may hold. A read that cannot be
// covered fails with ErrAppMemory, ErrTokenMemory, ErrOrgMemory or
// ErrBodyMemory, after reading at most one byte more, which tells the end
// of the body from more of it.
func (p *Pass) Body(r io.Reader) io.Reader { return &budgetReader{r: r, p: p} }

// Hold counts n bytes the request holds besides its body (a gzip
// decompressor's window and tables): from the allowance first, where a
// body byte stands for MemoryPerBodyByte bytes, then the budget and the
// shares byte for byte. It fails as Body does.
func (p *Pass) Hold(n int64) error {
	from := min((n+MemoryPerBodyByte-1)/MemoryPerBodyByte, p.allowance)
	p.allowance -= from
	if n -= from * MemoryPerBodyByte; n <= 0 {
		return nil
	}
	a := p.a
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, err := a.room(p, n); err != nil {
		return err
	}
	a.take(p, n)
	return nil
}

// readChunk is the most body bytes counted at once past the allowance:
// one lock per 64 KiB read.
const readChunk = 64 << 10

// count counts up to want more body bytes ahead of reading them, as many
// as the allowance, or else the shares and the budget, allow.
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
	room, err := a.room(p, MemoryPerBodyByte)
	if err != nil {
		return err
	}
	n := min(want, room/MemoryPerBodyByte)
	a.take(p, n*MemoryPerBodyByte)
	p.ahead, p.counted = n, true
	return nil
}

// room is the body memory p may take: what its app's, token's and
// organization's shares and the budget have left, the least of them. When
// one has less than need left, it fails with that one's error, checked in
// the order Enter checks the slots; a.mu is held.
func (a *Admission) room(p *Pass, need int64) (int64, error) {
	s := a.shares
	room := a.free
	for _, l := range [...]struct {
		left int64
		err  error
	}{
		{s.MemoryPerApp - a.apps[p.app].held, ErrAppMemory},
		{s.MemoryPerToken - a.tokens[p.token].held, ErrTokenMemory},
		{s.MemoryPerOrg - a.orgs[p.org].held, ErrOrgMemory},
		{a.free, ErrBodyMemory},
	} {
		if l.left < need {
			return 0, l.err
		}
		room = min(room, l.left)
	}
	return room, nil
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
	a.take(p, -cost)
	a.mu.Unlock()
}

// take moves cost bytes of the budget to p, its app, token and
// organization (back, when negative); a.mu is held.
func (a *Admission) take(p *Pass, cost int64) {
	a.free -= cost
	a.apps.add(p.app, 0, cost)
	a.tokens.add(p.token, 0, cost)
	a.orgs.add(p.org, 0, cost)
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

// orgsInUse reports the organizations with requests in flight, for tests.
func (a *Admission) orgsInUse() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.orgs)
}

// appHeld reports the body memory app holds, for tests.
func (a *Admission) appHeld(app string) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.apps[app].held
}

// heldBy reports the body memory a token and an organization hold, for
// tests.
func (a *Admission) heldBy(token, org string) (tokenHeld, orgHeld int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.tokens[token].held, a.orgs[org].held
}
