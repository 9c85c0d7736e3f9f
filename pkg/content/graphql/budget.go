package graphql

import "sync"

// answerBudget bounds the bytes of the answers being built at once in
// the process, shared fairly: while others build answers, an
// organization holds at most its part of the budget (half of it when
// it is alone, so that others always find room), each of its apps an
// equal part of that, and each token of an app an equal part of the
// app's. Answers are charged as they are resolved (execution.charge) and
// given back once written.
//
// Each answer is bounded on its own (MaxAnswerBytes), but what the
// process holds is their sum: sixteen answers of 11 MB built at once
// took an api from 291 to 816 MB.
type answerBudget struct {
	mu    sync.Mutex
	total int64
	used  int64
	orgs  map[string]*orgSpend
}

type orgSpend struct {
	used int64
	apps map[string]*appSpend
}

type appSpend struct {
	used   int64
	tokens map[string]int64
}

// spender is whom an answer's bytes are charged to.
type spender struct{ org, app, token string }

func newAnswerBudget(total int64) *answerBudget {
	return &answerBudget{total: total, orgs: map[string]*orgSpend{}}
}

// budgetRefusal says which share an answer would have gone over.
type budgetRefusal struct {
	// process is true when the process's budget is spent by answers of
	// several organizations; false when the spender's own share is.
	process bool
	share   string // "organization", "app" or "token"
	limit   int64
}

// take charges n more bytes to s, or refuses them, leaving nothing
// charged. A nil budget bounds nothing.
func (b *answerBudget) take(s spender, n int64) *budgetRefusal {
	if b == nil || n <= 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	o := b.orgs[s.org]
	if o == nil {
		o = &orgSpend{apps: map[string]*appSpend{}}
	}
	a := o.apps[s.app]
	if a == nil {
		a = &appSpend{tokens: map[string]int64{}}
	}
	orgs, apps, tokens := len(b.orgs), len(o.apps), len(a.tokens)
	if b.orgs[s.org] == nil {
		orgs++
	}
	if o.apps[s.app] == nil {
		apps++
	}
	if _, ok := a.tokens[s.token]; !ok {
		tokens++
	}
	orgShare := b.total / int64(max(orgs, 2))
	appShare := orgShare / int64(apps)
	tokenShare := appShare / int64(tokens)
	switch {
	case o.used+n > orgShare:
		return &budgetRefusal{share: "organization", limit: orgShare}
	case a.used+n > appShare:
		return &budgetRefusal{share: "app", limit: appShare}
	case a.tokens[s.token]+n > tokenShare:
		return &budgetRefusal{share: "token", limit: tokenShare}
	case b.used+n > b.total:
		return &budgetRefusal{process: true, limit: b.total}
	}
	b.orgs[s.org], o.apps[s.app] = o, a
	b.used += n
	o.used += n
	a.used += n
	a.tokens[s.token] += n
	return nil
}

// give returns n bytes charged to s.
func (b *answerBudget) give(s spender, n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	o := b.orgs[s.org]
	a := o.apps[s.app]
	b.used -= n
	o.used -= n
	a.used -= n
	a.tokens[s.token] -= n
	if a.tokens[s.token] == 0 {
		delete(a.tokens, s.token)
	}
	if a.used == 0 {
		delete(o.apps, s.app)
	}
	if o.used == 0 {
		delete(b.orgs, s.org)
	}
}

// error is the refusal as the answer's error.
func (r *budgetRefusal) error(path string) *codedError {
	if r.process {
		return errorf(CodeUnavailable, "", "the answers being built at once hold all %d bytes of the server's budget (GRAPHQL_ANSWER_BUDGET_BYTES), counted while resolving %s; retry after the time in Retry-After",
			r.limit, path)
	}
	return errorf(CodeRateLimited, "", "the answers this %s is having built at once hold its share of the server's answer budget, %d bytes (GRAPHQL_ANSWER_BUDGET_BYTES), counted while resolving %s; retry after the time in Retry-After, or ask for less at once",
		r.share, r.limit, path)
}
