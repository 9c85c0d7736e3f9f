package authhttp

import (
	"context"
	"net/http"
	"time"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/backoff"
	"github.com/assistantcms/cms/pkg/ratelimit"
)

// Authenticator checks tokens and decides which app a request acts for.
// *auth.Authenticator is the one the services use.
type Authenticator interface {
	Authenticate(ctx context.Context, h http.Header) (auth.Principal, error)
	Resolve(ctx context.Context, p auth.Principal, appIDParam string) (auth.Target, error)
}

// Admit authenticates the token in h and takes one request from its rate
// in l (see Limit): the first two checks of a request to the content API,
// REST or GraphQL. Refuse turns its error into the answer.
func Admit(ctx context.Context, a Authenticator, l *ratelimit.Limiter, h http.Header) (auth.Principal, error) {
	p, err := a.Authenticate(ctx, h)
	if err != nil {
		return p, err
	}
	return p, Limit(ctx, l, p.TokenID)
}

// RefusalPause is how long Limit holds a refusal: less than the
// Retry-After of at least a second the answer tells.
const RefusalPause = 500 * time.Millisecond

// Limit takes one request from the token's rate in l (nil: no limit).
// Past it, it returns the Throttled error the answer is made of (see
// Refuse), after holding it for RefusalPause or until the client leaves:
// a client that ignores Retry-After and asks again at once would
// otherwise spend the CPU other tenants need on refusals (sixteen
// connections drew ten thousand 429s in four seconds, and another
// tenant's p99 went up fifteenfold). A client that waits as told loses
// nothing.
func Limit(ctx context.Context, l *ratelimit.Limiter, tokenID string) error {
	ok, wait := l.Allow(tokenID)
	if ok {
		return nil
	}
	backoff.Sleep(ctx, RefusalPause)
	return &auth.Error{Kind: auth.Throttled, RetryAfter: wait,
		Message: "too many requests for this token; retry after the time in Retry-After"}
}
