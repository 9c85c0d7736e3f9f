package contentapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// TestAuthorizedRoute: a route with a scope of its own is refused as the
// content routes are, reaches its handler with the app the token acts
// for, and its recheck fails once the token is revoked.
func TestAuthorizedRoute(t *testing.T) {
	type served struct {
		target  auth.Target
		recheck func(context.Context) error
	}
	got := make(chan served, 10)
	route := AuthorizedRoute{Path: "/cms/app/watch", Scope: tenancy.EventsRead, Need: "watching",
		Serve: func(w http.ResponseWriter, r *http.Request, tg auth.Target, recheck func(context.Context) error) {
			got <- served{tg, recheck}
			w.WriteHeader(http.StatusNoContent)
		},
		Page:      http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("page")) }),
		WantsPage: func(r *http.Request) bool { return strings.Contains(r.Header.Get("Accept"), "text/html") },
	}
	e := newEnvWith(t, fixtureBundle, map[string]tenancy.Token{
		"reader":  {OrganizationID: "org-1", AppID: "app-1", Scopes: tenancy.EventsRead},
		"runtime": {OrganizationID: "org-1", AppID: "app-1", Scopes: tenancy.RuntimeScopes},
		"org":     {OrganizationID: "org-1", Scopes: tenancy.EventsRead},
	}, ServiceConfig{Authorized: []AuthorizedRoute{route}, TokenCacheTTL: time.Millisecond})

	for _, tc := range []struct {
		name, token, query string
		status             int
		contains           string
	}{
		{"no token", "", "", 401, "Unauthorized"},
		{"a runtime token", "runtime", "", 403, "lacks the events:read scope needed for watching"},
		{"another app", "reader", "?appId=app-2", 403, "app-2"},
		{"an organization token without appId", "org", "", 400, "appId"},
		{"an empty appId", "reader", "?appId=", 400, "appId must not be empty"},
	} {
		r := e.get(route.Path+tc.query, tc.token)
		if r.status != tc.status || !strings.Contains(r.body, tc.contains) {
			t.Errorf("%s: %d %s, want %d with %q", tc.name, r.status, r.body, tc.status, tc.contains)
		}
	}
	if r := e.get(route.Path, "", "Accept", "text/html"); r.status != 200 || r.body != "page" {
		t.Errorf("asked for as HTML: %d %s, want the page", r.status, r.body)
	}
	if len(got) != 0 {
		t.Fatalf("the handler was reached by a refused request")
	}

	if r := e.get(route.Path+"?appId=app-1", "org"); r.status != http.StatusNoContent {
		t.Fatalf("an organization token naming its app: %d %s", r.status, r.body)
	}
	s := <-got
	if s.target.AppID != "app-1" || s.target.OrganizationID != "org-1" {
		t.Errorf("target %+v, want app-1 of org-1", s.target)
	}
	if err := s.recheck(t.Context()); err != nil {
		t.Errorf("recheck of a valid token: %v", err)
	}
	id, err := auth.ParseToken(e.tokens["org"])
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.RevokeToken(contenttest.Acting(t.Context()), id, time.Now()); err != nil {
		t.Fatal(err)
	}
	// Once the token cache's millisecond has passed, the token is read
	// again.
	var ae *auth.Error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		err := s.recheck(t.Context())
		if errors.As(err, &ae) && ae.Kind == auth.Unauthenticated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("recheck of a revoked token: %v 5 s later, want it unauthenticated", err)
		}
	}
}
