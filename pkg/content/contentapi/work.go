package contentapi

import (
	"context"
	"runtime"
	"time"

	"github.com/assistantcms/cms/pkg/ratelimit"
)

// WorkPerRequest is how long a piece of work beyond answering may take
// for the price of one request: an index build is charged to the rate
// limit of the token that changed the app's content through GraphQL in
// this process (see API.ChangedBy), or else of the request that needed
// it, one request for each half millisecond it took. The build, not the
// question, is what a change of content followed by a question costs; at
// the default limit (1,000 requests a second, bursts of 2,000) a token
// gets half a second of builds a second, and an index of 10,000
// documents (under a second to build) still fits in one burst.
const WorkPerRequest = 500 * time.Microsecond

// RankPerRequest is how much CPU time ranking a question (with the
// built-in encoder, embedding it) may use for the price of one request, charged
// beyond the request itself: a question of a few words, a fraction of a
// millisecond, costs a few requests; a unique question of 1,000
// characters, about 30 ms, a few hundred. At the default limit a
// token gets a tenth of a core for ranking, so that one public token
// cannot spend the CPU the app's others need, or another tenant's.
const RankPerRequest = 100 * time.Microsecond

// cpuTime runs work, which must run on its own goroutine alone (no
// goroutines of its own, no waiting), and returns the CPU time it used:
// its thread's, as it is kept on one thread meanwhile. Where a thread's
// time cannot be read, it is the time work took. Wall time would charge
// a token for time its work waited for a core: under another tenant's
// load, the very tenant being crowded out would pay more and be refused.
func cpuTime(work func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := time.Now()
	from, ok := threadCPU()
	work()
	if to, ok2 := threadCPU(); ok && ok2 {
		return to - from
	}
	return time.Since(start)
}

// payer is the token a request's extra work is charged to.
type payer struct {
	limiter *ratelimit.Limiter
	token   string
}

type payerKey struct{}

func withPayer(ctx context.Context, p payer) context.Context {
	return context.WithValue(ctx, payerKey{}, p)
}

// charge bills the request of ctx, if it has a payer, for work that took
// d, a request for each per of it. Loads that outlive their request keep
// its values, so a build started by a request is billed to it even when
// it ends after the request.
func charge(ctx context.Context, d, per time.Duration) {
	if p, ok := ctx.Value(payerKey{}).(payer); ok {
		p.limiter.Charge(p.token, float64(d)/float64(per))
	}
}
