package authhttp

import (
	"context"
	"time"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/ratelimit"
)

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
	t := time.NewTimer(RefusalPause)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return &auth.Error{Kind: auth.Throttled, RetryAfter: wait,
		Message: "too many requests for this token; retry after the time in Retry-After"}
}
