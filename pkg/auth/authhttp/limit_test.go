package authhttp

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/ratelimit"
)

// TestLimit: within its rate a token passes; past it the refusal is held
// for RefusalPause and answers 429 with when to try again, and another
// token still passes.
func TestLimit(t *testing.T) {
	ctx := t.Context()
	l := ratelimit.New(0.5, 1, nil)
	if err := Limit(ctx, l, "tok"); err != nil {
		t.Fatalf("first request refused: %v", err)
	}
	start := time.Now()
	err := Limit(ctx, l, "tok")
	if held := time.Since(start); held < RefusalPause {
		t.Errorf("refusal answered after %v, want at least %v", held, RefusalPause)
	}
	var ae *auth.Error
	if !errors.As(err, &ae) || ae.Kind != auth.Throttled || ae.RetryAfter <= 0 {
		t.Fatalf("second request: %v; want a Throttled error with a time to retry", err)
	}
	rec := httptest.NewRecorder()
	Refuse(err).Write(rec)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Errorf("answer %d, Retry-After %q; want 429 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	if err := Limit(ctx, l, "other"); err != nil {
		t.Errorf("another token refused: %v", err)
	}
	if err := Limit(ctx, nil, "tok"); err != nil {
		t.Errorf("no limiter refused: %v", err)
	}
}
