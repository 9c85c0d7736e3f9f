package ingest

import (
	"errors"
	"io"
	"sync"
)

// Reasons Admission refuses a request or a body.
var (
	// ErrTokenBusy: the token already has its share of requests in flight.
	ErrTokenBusy = errors.New("the token has its share of requests in flight")
	// ErrAtCapacity: every request slot is taken.
	ErrAtCapacity = errors.New("every request slot is taken")
	// ErrBodyMemory: the memory budget for bodies cannot hold this one.
	ErrBodyMemory = errors.New("memory budget for request bodies exhausted")
)

// Admission bounds the work the handler takes on at once: requests in
// flight, requests in flight per token, and the memory their bodies hold.
// It is safe for concurrent use.
type Admission struct {
	perToken int
	slots    chan struct{}

	mu     sync.Mutex
	tokens map[string]int // requests in flight by token ID
	free   int64          // of the body memory budget
}

// NewAdmission returns an Admission of maxInFlight request slots, at most
// perToken of them held by one token, and maxBodyMemory bytes of body
// memory, counted as Pass.Body describes.
func NewAdmission(maxInFlight, perToken int, maxBodyMemory int64) *Admission {
	return &Admission{
		perToken: perToken,
		slots:    make(chan struct{}, maxInFlight),
		tokens:   make(map[string]int),
		free:     maxBodyMemory,
	}
}

// PerToken returns how many requests one token may have in flight.
func (a *Admission) PerToken() int { return a.perToken }

// Pass is an admitted request's hold on a slot, its token's share and the
// body memory it has taken. Release gives all of it back.
type Pass struct {
	a     *Admission
	token string
	// allowance is what is left of the body bytes not counted.
	allowance int64
	held      int64
}

// Enter admits a request of token, or refuses it with ErrTokenBusy when
// the token has its share in flight, or ErrAtCapacity when every slot is
// taken. The token's share is checked first, so that one busy client is
// told to slow down rather than that the server is full.
func (a *Admission) Enter(token string) (Pass, error) {
	if !a.enterToken(token) {
		return Pass{}, ErrTokenBusy
	}
	select {
	case a.slots <- struct{}{}:
		return Pass{a: a, token: token, allowance: BodyAllowance}, nil
	default:
		a.leaveToken(token)
		return Pass{}, ErrAtCapacity
	}
}

// Release gives back the pass's slot, share and body memory. It must be
// called once per admitted pass, after the request no longer holds its
// body or the records built from it.
func (p *Pass) Release() {
	if p.a == nil {
		return
	}
	<-p.a.slots
	p.a.mu.Lock()
	p.a.free += p.held
	p.a.leaveTokenLocked(p.token)
	p.a.mu.Unlock()
	*p = Pass{}
}

// Body wraps a request body so that every byte read beyond the first
// BodyAllowance takes MemoryPerBodyByte bytes of the budget until Release.
// A read the budget cannot cover fails with ErrBodyMemory.
func (p *Pass) Body(r io.Reader) io.Reader { return &budgetReader{r: r, p: p} }

func (a *Admission) enterToken(token string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.tokens[token] >= a.perToken {
		return false
	}
	a.tokens[token]++
	return true
}

func (a *Admission) leaveToken(token string) {
	a.mu.Lock()
	a.leaveTokenLocked(token)
	a.mu.Unlock()
}

func (a *Admission) leaveTokenLocked(token string) {
	if a.tokens[token] <= 1 {
		delete(a.tokens, token) // the map holds only tokens in flight
		return
	}
	a.tokens[token]--
}

// take counts n more body bytes against the pass.
func (p *Pass) take(n int64) bool {
	over := n - p.allowance
	if over <= 0 {
		p.allowance -= n
		return true
	}
	p.allowance = 0
	cost := over * MemoryPerBodyByte
	a := p.a
	a.mu.Lock()
	defer a.mu.Unlock()
	if cost > a.free {
		return false
	}
	a.free -= cost
	p.held += cost
	return true
}

// budgetReader counts what it reads against a pass.
type budgetReader struct {
	r io.Reader
	p *Pass
}

func (b *budgetReader) Read(buf []byte) (int, error) {
	n, err := b.r.Read(buf)
	if !b.p.take(int64(n)) {
		return 0, ErrBodyMemory
	}
	return n, err
}

// inUse reports the requests in flight, the tokens they belong to and the
// body memory left, for tests.
func (a *Admission) inUse() (requests, tokens int, free int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.slots), len(a.tokens), a.free
}
