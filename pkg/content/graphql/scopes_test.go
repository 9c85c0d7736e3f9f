package graphql

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// addToken issues a token of the given scopes for app-1 and files its
// secret under name.
func (e *env) addToken(name string, scopes tenancy.Scopes) {
	e.t.Helper()
	secret, id, err := auth.NewToken()
	if err != nil {
		e.t.Fatal(err)
	}
	tok := tenancy.Token{ID: id, Hash: auth.HashToken(secret), OrganizationID: "org-1", AppID: "app-1", Scopes: scopes, CreatedAt: time.Now()}
	if err := e.store.CreateToken(contenttest.Acting(e.t.Context()), tok); err != nil {
		e.t.Fatal(err)
	}
	e.tokens[name] = secret
}

// snapshot is everything app-1 holds, to tell that nothing changed.
func (e *env) snapshot() string {
	e.t.Helper()
	b, err := e.store.Export(e.t.Context(), content.ExportFilter{AppID: "app-1"})
	if err != nil {
		e.t.Fatal(err)
	}
	return jsonOf(b)
}

// TestRuntimeTokenCannotChangeContent is the attack of a web page's
// visitor: the token a browser runtime carries is read from the page and
// every mutation of the schema is sent with it. Each is refused with the
// scope it lacks before anything is validated or run, and the app's
// content is byte-identical afterwards; queries still answer.
func TestRuntimeTokenCannotChangeContent(t *testing.T) {
	e := newEnv(t, Limits{}, nil)
	e.addToken("runtime", tenancy.RuntimeScopes)
	schema, err := newSchema(&resolvers{})
	if err != nil {
		t.Fatal(err)
	}
	var mutations []string
	for name := range schema.MutationType().Fields() {
		mutations = append(mutations, name)
	}
	slices.Sort(mutations)
	if len(mutations) < 9 {
		t.Fatalf("the schema has only the mutations %v", mutations)
	}
	before := e.snapshot()
	for _, m := range mutations {
		t.Run(m, func(t *testing.T) {
			// Well-formed and valid, as an attacker would write it.
			a := e.post("runtime", `mutation { `+m+`(appId: "app-1", intentId: "LaunchRequest", handlerId: "LaunchRequest", entityId: "COLOR") { __typename } }`, nil)
			if a.status != http.StatusForbidden || len(a.Errors) != 1 {
				t.Fatalf("%d %s", a.status, a.raw)
			}
			got := a.Errors[0]
			if got.Extensions["code"] != CodeInsufficientScope || got.Extensions["scope"] != "content:write" ||
				got.Message != "this token lacks the content:write scope needed for GraphQL mutations" {
				t.Errorf("error %+v", got)
			}
			if a.Data != nil {
				t.Errorf("data %v", a.Data)
			}
		})
	}
	// Valid mutations too, each of which a management token runs (below):
	// refused alike, so the content stays as it was because of the scope.
	valid := []string{
		`mutation { updateHandler(handlerId: "LaunchRequest", handler: {name: "defaced"}) { intentId } }`,
		`mutation { deleteHandler(handlerId: "LaunchRequest") { intentId } }`,
		`mutation { deleteIntent(intentId: "OrderStatus") { intentId } }`,
		`mutation { replaceEntityValues(entityId: "COLOR", values: [{name: "defaced"}]) { entityId } }`,
		`mutation { addIntent(intent: {intentId: "Planted"}) { intentId } }`,
		`mutation { deleteEntity(entityId: "COLOR") { entityId } }`,
	}
	for _, q := range valid {
		if a := e.post("runtime", q, nil); a.status != http.StatusForbidden || len(a.Errors) != 1 || a.Errors[0].Extensions["code"] != CodeInsufficientScope {
			t.Errorf("%s: %d %s", q, a.status, a.raw)
		}
	}
	if after := e.snapshot(); after != before {
		t.Errorf("app-1's content changed:\nbefore %s\nafter  %s", before, after)
	}
	e.addToken("manage", tenancy.AllScopes)
	for _, q := range valid {
		if a := e.post("manage", q, nil); a.status != http.StatusOK || len(a.Errors) > 0 {
			t.Errorf("with a management token, %s: %d %s", q, a.status, a.raw)
		}
	}
	if after := e.snapshot(); after == before {
		t.Error("the management token's mutations changed nothing")
	}
	if a := e.post("runtime", `{ handler(intentId: "LaunchRequest") { intentId } }`, nil); a.status != http.StatusOK || len(a.Errors) > 0 {
		t.Errorf("a runtime token's query: %d %s", a.status, a.raw)
	}
}

// TestScopesOfOperations: which scopes each operation needs, over POST
// and GET, and the answer's challenge header.
func TestScopesOfOperations(t *testing.T) {
	e := newEnv(t, Limits{}, nil)
	e.addToken("runtime", tenancy.RuntimeScopes)
	e.addToken("events", tenancy.EventsWrite|tenancy.EventsRead)
	e.addToken("write", tenancy.ContentWrite)
	e.addToken("manage", tenancy.AllScopes)
	const query = `{ handlers { intentId } }`
	const mutation = `mutation { addIntent(appId: "app-1", intent: {intentId: "NewOne"}) { intentId } }`
	tests := []struct {
		token, query string
		status       int
		scope        string // the scope named by the refusal, "" when allowed
	}{
		{"runtime", query, 200, ""},
		{"runtime", mutation, 403, "content:write"},
		{"events", query, 403, "content:read"},
		{"events", mutation, 403, "content:read"}, // refused before its body is read
		{"write", query, 403, "content:read"},
		{"write", mutation, 200, ""},
		// What a mutation answers tells a write-only token no more than
		// IDs and times: an update that changes nothing would otherwise
		// read the whole record.
		{"write", `mutation { updateHandler(handlerId: "LaunchRequest", handler: {}) { intentId updatedAt __typename } }`, 200, ""},
		{"write", `mutation { updateHandler(handlerId: "LaunchRequest", handler: {}) { intentId document } }`, 403, "content:read"},
		{"write", `mutation { updateHandler(handlerId: "LaunchRequest", handler: {}) { content { key } } }`, 403, "content:read"},
		{"write", `mutation { updateHandler(handlerId: "LaunchRequest", handler: {}) { ...h } } fragment h on Handler { intentId ... on Handler { name } }`, 403, "content:read"},
		{"write", `mutation { a: updateHandler(handlerId: "LaunchRequest", handler: {}) { intentId } b: replaceEntityValues(entityId: "COLOR", values: [{name: "red"}]) { values { name } } }`, 403, "content:read"},
		{"manage", `mutation { updateHandler(handlerId: "LaunchRequest", handler: {}) { intentId document } }`, 200, ""},
		{"manage", query, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.token+" "+tt.query, func(t *testing.T) {
			a := e.post(tt.token, tt.query, nil)
			if a.status != tt.status {
				t.Fatalf("status %d, want %d: %s", a.status, tt.status, a.raw)
			}
			if tt.scope == "" {
				if len(a.Errors) > 0 {
					t.Fatalf("errors %s", a.raw)
				}
				return
			}
			if len(a.Errors) != 1 || a.Errors[0].Extensions["code"] != CodeInsufficientScope || a.Errors[0].Extensions["scope"] != tt.scope {
				t.Errorf("answer %s, want %s refused", a.raw, tt.scope)
			}
		})
	}
	// The refusal says which scope it wants, as RFC 6750 has it.
	req, err := http.NewRequest(http.MethodGet, e.srv.URL+"/cms/graphql?query=%7Bhandlers%7BintentId%7D%7D", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.tokens["events"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != 403 || got != `Bearer error="insufficient_scope", scope="content:read"` {
		t.Errorf("GET with an events token: %d, WWW-Authenticate %q", resp.StatusCode, got)
	}
}
