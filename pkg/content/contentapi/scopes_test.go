package contentapi

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/assistantcms/cms/pkg/tenancy"
)

// TestScopesOfRoutes: every content route needs content:read, which a
// runtime token has and a token for events only lacks; the refusal is a
// 403 that names the scope, with the challenge of RFC 6750.
func TestScopesOfRoutes(t *testing.T) {
	e := newEnvWith(t, fixtureBundle, map[string]tenancy.Token{
		"runtime":   {OrganizationID: "org-1", AppID: "app-1", Scopes: tenancy.RuntimeScopes},
		"events":    {OrganizationID: "org-1", AppID: "app-1", Scopes: tenancy.EventsWrite | tenancy.EventsRead},
		"orgEvents": {OrganizationID: "org-1", Scopes: tenancy.EventsWrite},
	}, ServiceConfig{})
	routes := []string{
		"/cms/app", "/cms/handler", "/cms/handler/LaunchRequest", "/cms/entity", "/cms/entity/COLOR",
		"/cms/search?question=hello", "/cms/faq/query?question=hello", "/cms/rag?question=hello",
		"/cms/suggestions?key=k1&queryText=hel",
	}
	for _, route := range routes {
		t.Run(route, func(t *testing.T) {
			if r := e.get(route, "runtime"); r.status != http.StatusOK {
				t.Errorf("runtime token: %d %s", r.status, r.body)
			}
			for _, tok := range []string{"events", "orgEvents"} {
				r := e.get(route, tok)
				var body struct {
					Message string `json:"message"`
				}
				_ = json.Unmarshal([]byte(r.body), &body)
				if r.status != http.StatusForbidden || body.Message != "this token lacks the content:read scope needed for reading content" {
					t.Errorf("%s token: %d %s", tok, r.status, r.body)
				}
				if got := r.header.Get("WWW-Authenticate"); got != `Bearer error="insufficient_scope", scope="content:read"` {
					t.Errorf("%s token: WWW-Authenticate %q", tok, got)
				}
			}
		})
	}
}
