package openapi_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/assistantcms/cms/pkg/tenancy"
	"github.com/assistantcms/cms/schemas/openapi"
)

// TestScopesDocumented: every operation that takes a token names, in each
// of its security requirements, the scope the code asks of it: events
// need events:write, GraphQL's POST content:read (queries) or
// content:write (mutations), every other /cms read content:read.
func TestScopesDocumented(t *testing.T) {
	_, m, err := load(openapi.Bundled(), "")
	if err != nil {
		t.Fatal(err)
	}
	want := func(tags []string, method string) []string {
		switch {
		case slices.Contains(tags, "events"):
			return []string{tenancy.EventsWrite.String()}
		case slices.Contains(tags, "live"), slices.Contains(tags, "analytics"):
			return []string{tenancy.EventsRead.String()}
		case slices.Contains(tags, "history"):
			return []string{tenancy.ContentWrite.String()}
		case slices.Contains(tags, "graphql") && method == "post":
			return []string{tenancy.ContentRead.String(), tenancy.ContentWrite.String()}
		case slices.Contains(tags, "content"), slices.Contains(tags, "knowledge"), slices.Contains(tags, "graphql"):
			return []string{tenancy.ContentRead.String()}
		}
		return nil
	}
	checked := 0
	for path, item := range m.Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			var scopes []string
			tokens := 0
			for _, req := range op.Security {
				if req.Requirements == nil || req.Requirements.Len() == 0 {
					continue // the empty requirement: no token needed
				}
				for scheme, s := range req.Requirements.FromOldest() {
					tokens++
					if len(s) != 1 {
						t.Errorf("%s %s: scheme %s lists scopes %v, want one", method, path, scheme, s)
					}
					for _, one := range s {
						if !slices.Contains(scopes, one) {
							scopes = append(scopes, one)
						}
					}
				}
			}
			w := want(op.Tags, method)
			if strings.HasPrefix(path, "/cms/graphql/assets") || strings.HasPrefix(path, "/cms/app/events/live/") || path == "/cms/analytics/page.js" || path == "/cms/analytics/page.css" || (path == "/openapi.yaml") {
				w = nil
			}
			if len(w) == 0 {
				if tokens > 0 {
					t.Errorf("%s %s takes a token; its scopes are not known to this test", method, path)
				}
				continue
			}
			slices.Sort(scopes)
			if !slices.Equal(scopes, w) {
				t.Errorf("%s %s documents scopes %v, want %v", method, path, scopes, w)
			}
			for _, s := range scopes {
				if _, err := tenancy.ParseScopes(s); err != nil {
					t.Errorf("%s %s: %v", method, path, err)
				}
			}
			checked++
		}
	}
	if checked < 13 {
		t.Errorf("checked %d operations, want every /cms one", checked)
	}
}
