package authhttp

import (
	"errors"
	"net/http"
	"time"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// Refusal is the answer to a request refused for its token (not
// authenticated, throttled, not allowed the app or the scope, or the
// token store unreachable): the same status, headers and message from
// every service that checks tokens, whatever shape its body takes.
type Refusal struct {
	Kind    auth.Kind
	Status  int
	Message string
	// Field is "appId" when the app the request named is what was
	// refused, else "".
	Field string
	// Scope is what the token lacks (auth.ScopeMissing).
	Scope tenancy.Scopes
	// Err is the failure behind an auth.Unavailable refusal, for the
	// service's log; nil for the others, which are the client's.
	Err error

	challenge  string
	retryAfter time.Duration
}

// Refuse is the answer to err, an authentication, app or scope failure
// from package auth. Any other error means the token could not be
// checked: 503, as auth.Unavailable.
func Refuse(err error) Refusal {
	var ae *auth.Error
	if !errors.As(err, &ae) {
		return Refusal{Kind: auth.Unavailable, Status: http.StatusServiceUnavailable,
			Message: "token store unavailable", Err: err, retryAfter: time.Second}
	}
	r := Refusal{Kind: ae.Kind, Status: Status(ae.Kind), Message: ae.Message, Scope: ae.Scope, challenge: auth.Challenge(err)}
	switch ae.Kind {
	case auth.Invalid, auth.Forbidden:
		r.Field = "appId"
	case auth.Throttled:
		r.retryAfter = ae.RetryAfter
	case auth.Unavailable:
		r.Err, r.retryAfter = err, time.Second
	}
	return r
}

// SetHeaders sets the refusal's headers: the scope a token lacks
// (WWW-Authenticate, RFC 6750) and when to try again (Retry-After).
func (r Refusal) SetHeaders(w http.ResponseWriter) {
	if r.challenge != "" {
		w.Header().Set("WWW-Authenticate", r.challenge)
	}
	if r.retryAfter > 0 {
		httpserve.RetryAfter(w, r.retryAfter.Seconds())
	}
}

// Write answers with the refusal as the REST services do: its headers and
// the JSON error body of package httpserve.
func (r Refusal) Write(w http.ResponseWriter) {
	r.SetHeaders(w)
	httpserve.Error(w, r.Status, r.Field, r.Message)
}
