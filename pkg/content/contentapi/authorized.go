package contentapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// AuthorizedRoute is a GET route the process serves beside the content
// routes, with a scope of its own, answered by a handler the process
// builds (the live view of events): the service authenticates the token,
// applies its rate limit, requires Scope and resolves the app the request
// acts for (an organization token names it with appId) exactly as for the
// content routes, and refuses in the same words and statuses.
type AuthorizedRoute struct {
	Path  string
	Scope tenancy.Scopes
	// Need says what the scope is needed for, in a refusal: "this token
	// lacks the events:read scope needed for <Need>".
	Need string
	// Serve answers an authorized request for the app of t. recheck
	// authenticates the request's token again, for answers that last: an
	// *auth.Error says it may no longer do what it did (revoked, its
	// scope or app taken away); other errors say the check could not be
	// made.
	Serve func(w http.ResponseWriter, r *http.Request, t auth.Target, recheck func(context.Context) error)
	// Page, when set, answers without a token the requests WantsPage
	// picks: a browser opening the address asks for a page.
	Page      http.Handler
	WantsPage func(*http.Request) bool
}

// authorized is the Gin handler of rt.
func (a *API) authorized(rt AuthorizedRoute) gin.HandlerFunc {
	return func(c *gin.Context) {
		if rt.Page != nil && rt.WantsPage != nil && rt.WantsPage(c.Request) {
			rt.Page.ServeHTTP(c.Writer, c.Request)
			return
		}
		p, ok := a.principalFor(c, rt.Scope, rt.Need)
		if !ok {
			return
		}
		appID, present := c.GetQuery("appId")
		if present && strings.TrimSpace(appID) == "" {
			abort(c, http.StatusBadRequest, "appId", "appId must not be empty.")
			return
		}
		if !a.resolve(c, p, appID) {
			return
		}
		t := target(c)
		header := c.Request.Header.Clone()
		recheck := func(ctx context.Context) error {
			p, err := a.authn.Authenticate(ctx, header)
			if err != nil {
				return err
			}
			if err := p.Require(rt.Scope, rt.Need); err != nil {
				return err
			}
			now, err := a.authn.Resolve(ctx, p, appID)
			if err != nil {
				return err
			}
			if now != t {
				return &auth.Error{Kind: auth.Forbidden, Message: "the token now acts for another app or organization"}
			}
			return nil
		}
		rt.Serve(c.Writer, c.Request, t, recheck)
	}
}
