package authhttp

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/tenancy"
)

func TestRefusal(t *testing.T) {
	storeDown := errors.New("connection refused")
	cases := []struct {
		name                  string
		err                   error
		status                int
		field, message        string
		challenge, retryAfter string
		logged                bool
	}{
		{"not authenticated", &auth.Error{Kind: auth.Unauthenticated, Message: "Unauthorized"}, 401, "", "Unauthorized", "", "", false},
		{"throttled", &auth.Error{Kind: auth.Throttled, Message: "too many failed authentications from this network", RetryAfter: 2500 * time.Millisecond},
			429, "", "too many failed authentications from this network", "", "3", false},
		{"another app", &auth.Error{Kind: auth.Forbidden, Message: "the token may not act for app b"}, 403, "appId", "the token may not act for app b", "", "", false},
		{"no app named", &auth.Error{Kind: auth.Invalid, Message: "appId is required"}, 400, "appId", "appId is required", "", "", false},
		{"scope missing", &auth.Error{Kind: auth.ScopeMissing, Message: "the token may not read events", Scope: tenancy.EventsRead},
			403, "", "the token may not read events", `Bearer error="insufficient_scope", scope="events:read"`, "", false},
		{"store down", &auth.Error{Kind: auth.Unavailable, Message: "token store unavailable", Err: storeDown}, 503, "", "token store unavailable", "", "1", true},
		{"not an auth error", storeDown, 503, "", "token store unavailable", "", "1", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Refuse(c.err)
			if (r.Err != nil) != c.logged || (c.logged && !errors.Is(r.Err, storeDown)) {
				t.Errorf("Err = %v, want it only for the store's failure", r.Err)
			}
			w := httptest.NewRecorder()
			r.Write(w)
			if w.Code != c.status {
				t.Errorf("status %d, want %d", w.Code, c.status)
			}
			if got := w.Header().Get("WWW-Authenticate"); got != c.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, c.challenge)
			}
			if got := w.Header().Get("Retry-After"); got != c.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, c.retryAfter)
			}
			var body struct {
				HTTPStatus int    `json:"httpStatus"`
				Message    string `json:"message"`
				Field      string `json:"field"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", w.Body, err)
			}
			if body.HTTPStatus != c.status || body.Message != c.message || body.Field != c.field {
				t.Errorf("body %+v, want status %d, message %q, field %q", body, c.status, c.message, c.field)
			}
		})
	}
}

// SetHeaders sets headers only, and none for a refusal that has none.
func TestRefusalHeadersOnly(t *testing.T) {
	w := httptest.NewRecorder()
	Refuse(&auth.Error{Kind: auth.Unauthenticated, Message: "Unauthorized"}).SetHeaders(w)
	if len(w.Header()) != 0 {
		t.Errorf("headers %v for an unauthenticated request", w.Header())
	}
	if w.Code != http.StatusOK || w.Body.Len() != 0 {
		t.Errorf("SetHeaders wrote %d %q", w.Code, w.Body)
	}
}
