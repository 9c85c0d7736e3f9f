package authhttp

import (
	"context"
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

// tokenChecker knows one token, "good", of the token ID "tok".
type tokenChecker struct{}

func (tokenChecker) Authenticate(_ context.Context, h http.Header) (auth.Principal, error) {
	if h.Get("Authorization") != "Bearer good" {
		return auth.Principal{}, &auth.Error{Kind: auth.Unauthenticated, Message: "unknown token"}
	}
	return auth.Principal{TokenID: "tok"}, nil
}

func (tokenChecker) Resolve(context.Context, auth.Principal, string) (auth.Target, error) {
	return auth.Target{}, nil
}

// TestAdmit: an unknown token is refused before it costs its rate; a known
// one is charged, and refused once past it.
func TestAdmit(t *testing.T) {
	ctx := t.Context()
	l := ratelimit.New(0.001, 1, nil)
	tests := []struct {
		name     string
		token    string
		wantKind auth.Kind // zero: admitted
	}{
		{"unknown token", "bad", auth.Unauthenticated},
		{"unknown token again, rate untouched", "bad", auth.Unauthenticated},
		{"known token", "good", 0},
		{"known token past its rate", "good", auth.Throttled},
	}
	for _, tc := range tests {
		h := http.Header{"Authorization": {"Bearer " + tc.token}}
		p, err := Admit(ctx, tokenChecker{}, l, h)
		var ae *auth.Error
		switch {
		case tc.wantKind == 0 && (err != nil || p.TokenID != "tok"):
			t.Fatalf("%s: Admit = %+v, %v; want token tok admitted", tc.name, p, err)
		case tc.wantKind != 0 && (!errors.As(err, &ae) || ae.Kind != tc.wantKind):
			t.Fatalf("%s: Admit error %v; want kind %v", tc.name, err, tc.wantKind)
		}
	}
}
