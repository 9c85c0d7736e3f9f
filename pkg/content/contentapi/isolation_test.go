package contentapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// isolationBundle gives three apps, two in one organization and one in
// another, the same record IDs and channel layout, each record carrying
// its app's marker: an answer holding another app's marker is a leak,
// and a lookup by ID that crossed apps would find the other app's record.
const isolationBundle = `{
 "organizations": [{"id": "org-1", "name": "One"}, {"id": "org-2", "name": "Two"}],
 "apps": [
  {"appId": "app-1", "organizationId": "org-1", "name": "App marker-app-one", "channels": [{"id": "web", "type": "CHAT", "key": "key-1"}]},
  {"appId": "app-2", "organizationId": "org-1", "name": "App marker-app-two", "channels": [{"id": "web", "type": "CHAT", "key": "key-2"}]},
  {"appId": "app-3", "organizationId": "org-2", "name": "App marker-org-two", "channels": [{"id": "web", "type": "CHAT", "key": "key-3"}]}
 ],
 "documents": [
  {"appId": "app-1", "id": "zebra", "title": "Zebra crossings marker-app-one", "uri": "https://one.example/zebra", "location": "town", "document": "The zebra crossing is striped. Only marker-app-one knows this."},
  {"appId": "app-2", "id": "zebra", "title": "Zebra crossings marker-app-two", "uri": "https://two.example/zebra", "location": "town", "document": "The zebra crossing is striped. Only marker-app-two knows this."},
  {"appId": "app-3", "id": "zebra", "title": "Zebra crossings marker-org-two", "uri": "https://three.example/zebra", "location": "town", "document": "The zebra crossing is striped. Only marker-org-two knows this."}
 ],
 "faqs": [
  {"appId": "app-1", "id": "zebra", "name": "Zebra", "questions": ["Where is the zebra crossing?"], "answer": "By the station, says marker-app-one.", "url": "https://one.example/faq"},
  {"appId": "app-2", "id": "zebra", "name": "Zebra", "questions": ["Where is the zebra crossing?"], "answer": "By the station, says marker-app-two.", "url": "https://two.example/faq"},
  {"appId": "app-3", "id": "zebra", "name": "Zebra", "questions": ["Where is the zebra crossing?"], "answer": "By the station, says marker-org-two.", "url": "https://three.example/faq"}
 ],
 "intents": [
  {"appId": "app-1", "intentId": "Zebra", "utterancePatterns": ["zebra crossing marker-app-one"]},
  {"appId": "app-2", "intentId": "Zebra", "utterancePatterns": ["zebra crossing marker-app-two"]},
  {"appId": "app-3", "intentId": "Zebra", "utterancePatterns": ["zebra crossing marker-org-two"]}
 ],
 "handlers": [
  {"appId": "app-1", "intentId": "Welcome", "name": "Welcome marker-app-one"},
  {"appId": "app-2", "intentId": "Welcome", "name": "Welcome marker-app-two"},
  {"appId": "app-3", "intentId": "Welcome", "name": "Welcome marker-org-two"}
 ],
 "entities": [
  {"appId": "app-1", "entityId": "ANIMAL", "displayName": "Animal marker-app-one", "values": [{"name": "zebra"}]},
  {"appId": "app-2", "entityId": "ANIMAL", "displayName": "Animal marker-app-two", "values": [{"name": "zebra"}]},
  {"appId": "app-3", "entityId": "ANIMAL", "displayName": "Animal marker-org-two", "values": [{"name": "zebra"}]}
 ]
}`

// The markers of the apps of isolationBundle.
const (
	markerApp1 = "marker-app-one"
	markerApp2 = "marker-app-two"
	markerApp3 = "marker-org-two"
)

func allMarkers() []string { return []string{markerApp1, markerApp2, markerApp3} }

// isolationTokens are the tokens issued on isolationBundle; "revoked" is
// revoked by newIsolationEnv before any request.
func isolationTokens() map[string]tenancy.Token {
	return map[string]tenancy.Token{
		"app1":    {OrganizationID: "org-1", AppID: "app-1"},
		"app2":    {OrganizationID: "org-1", AppID: "app-2"},
		"app3":    {OrganizationID: "org-2", AppID: "app-3"},
		"org1":    {OrganizationID: "org-1"},
		"org2":    {OrganizationID: "org-2"},
		"revoked": {OrganizationID: "org-1", AppID: "app-1"},
	}
}

func newIsolationEnv(t *testing.T, cfg ServiceConfig) *env {
	t.Helper()
	e := newEnvWith(t, isolationBundle, isolationTokens(), cfg)
	id, err := auth.ParseToken(e.tokens["revoked"])
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.RevokeToken(contenttest.Acting(context.Background()), id, time.Now()); err != nil {
		t.Fatal(err)
	}
	return e
}

// outcome is what one request must get.
type outcome struct {
	status int
	msg    string // substring of the error message
	field  string // the error's field (REST)
	code   string // extensions.code of every GraphQL error
	sees   string // the only marker the answer holds; "" for none
}

func unauthorized() outcome { return outcome{status: 401, msg: "Unauthorized"} }

func unauthenticatedGraphQL() outcome {
	return outcome{status: 401, msg: "Unauthorized", code: "UNAUTHENTICATED"}
}

func sees(marker string) outcome { return outcome{status: 200, sees: marker} }

// TestAbuseAndIsolationMatrix sends every content route, search, FAQ,
// RAG, suggestions and GraphQL (POST and GET) with every kind of bad or
// foreign credential, and checks the status, a clear message, and that no
// answer holds the data of an app the credential does not reach.
func TestAbuseAndIsolationMatrix(t *testing.T) {
	e := newIsolationEnv(t, ServiceConfig{})
	app1 := e.tokens["app1"]
	// A real token ID with another secret, and a well-formed token never
	// issued.
	wrongSecret := app1[:len(app1)-8] + strings.Map(func(r rune) rune {
		if r == 'A' {
			return 'B'
		}
		return 'A'
	}, app1[len(app1)-8:])
	unknown, _, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	bearer := func(name string) []string { return []string{"Authorization", "Bearer " + e.tokens[name]} }

	type endpoint struct {
		name, method, path string
		kind               string // rest, suggest or graphql
	}
	endpoints := []endpoint{
		{"handler list", http.MethodGet, "/cms/handler", "rest"},
		{"one handler", http.MethodGet, "/cms/handler/Welcome", "rest"},
		{"entity list", http.MethodGet, "/cms/entity", "rest"},
		{"one entity", http.MethodGet, "/cms/entity/ANIMAL", "rest"},
		{"app", http.MethodGet, "/cms/app", "rest"},
		{"search", http.MethodGet, "/cms/search?question=zebra+crossing", "rest"},
		{"faq", http.MethodGet, "/cms/faq/query?question=where+is+the+zebra+crossing", "rest"},
		{"rag", http.MethodGet, "/cms/rag?question=where+is+the+zebra+crossing&temperature=undefined", "rest"},
		{"suggestions", http.MethodGet, "/cms/suggestions?key=key-1&queryText=zebr", "suggest"},
		{"graphql POST", http.MethodPost, "/cms/graphql", "graphql"},
		{"graphql GET", http.MethodGet, "/cms/graphql", "graphql"},
	}
	// Each row is one credential, sent to every endpoint as app-1's
	// client would send it; appId is the app it names, if any.
	type row struct {
		name                string
		header              []string
		appID, query        string
		rest, suggest, gqlO outcome
	}
	unauth := func(name string, header []string, query string) row {
		return row{name: name, header: header, query: query, rest: unauthorized(), suggest: unauthorized(), gqlO: unauthenticatedGraphQL()}
	}
	forbiddenGraphQL := outcome{status: 200, code: "FORBIDDEN"}
	qsTokens := "token=" + url.QueryEscape(app1) + "&access_token=" + url.QueryEscape(app1) + "&apiKey=" + url.QueryEscape(app1)
	rows := []row{
		{name: "own app token", header: bearer("app1"), rest: sees(markerApp1), suggest: sees(markerApp1), gqlO: sees(markerApp1)},
		unauth("no token", nil, ""),
		unauth("malformed: Basic scheme", []string{"Authorization", "Basic dXNlcjpwYXNz"}, ""),
		unauth("malformed: scheme only", []string{"Authorization", "Bearer"}, ""),
		unauth("malformed: no scheme", []string{"Authorization", app1}, ""),
		unauth("malformed: not a token", []string{"Authorization", "Bearer not-a-token"}, ""),
		unauth("malformed: token with a suffix", []string{"Authorization", "Bearer " + app1 + "x"}, ""),
		unauth("malformed: two tokens", []string{"Authorization", "Bearer " + app1 + " " + app1}, ""),
		unauth("malformed: Token scheme in Authorize", []string{"Authorize", "Token " + app1}, ""),
		unauth("wrong token: never issued", []string{"Authorization", "Bearer " + unknown}, ""),
		unauth("wrong token: real ID, other secret", []string{"Authorization", "Bearer " + wrongSecret}, ""),
		unauth("revoked token", bearer("revoked"), ""),
		{name: "another app's token naming app-1", header: bearer("app2"), appID: "app-1",
			rest:    outcome{status: 403, field: "appId", msg: "cannot act for app"},
			suggest: outcome{status: 404, field: "key", msg: "No channel of this token's apps has this key."}, gqlO: forbiddenGraphQL},
		// Without appId another app's token reads its own app: the same
		// IDs give its own records, never app-1's.
		{name: "another app's token alone", header: bearer("app2"),
			rest: sees(markerApp2), suggest: outcome{status: 404, field: "key", msg: "No channel of this token's apps has this key."}, gqlO: sees(markerApp2)},
		{name: "another organization's app token naming app-1", header: bearer("app3"), appID: "app-1",
			rest:    outcome{status: 403, field: "appId", msg: "cannot act for app"},
			suggest: outcome{status: 404, field: "key", msg: "No channel of this token's apps has this key."}, gqlO: forbiddenGraphQL},
		{name: "another organization's token naming app-1", header: bearer("org2"), appID: "app-1",
			rest:    outcome{status: 403, field: "appId", msg: "not an app of this token's organization"},
			suggest: outcome{status: 404, field: "key", msg: "No channel of this token's apps has this key."}, gqlO: forbiddenGraphQL},
		// The channel key names the app, so suggestions need no appId.
		{name: "organization token without appId", header: bearer("org1"),
			rest:    outcome{status: 400, field: "appId", msg: "appId query parameter is required"},
			suggest: sees(markerApp1), gqlO: outcome{status: 200, code: "BAD_APP_ID"}},
		{name: "organization token with an empty appId", header: bearer("org1"), query: "appId=",
			rest:    outcome{status: 400, field: "appId", msg: "must not be empty"},
			suggest: outcome{status: 400, field: "appId", msg: "must not be empty"}, gqlO: outcome{status: 200, code: "BAD_APP_ID"}},
		{name: "organization token with its own app", header: bearer("org1"), appID: "app-1",
			rest: sees(markerApp1), suggest: sees(markerApp1), gqlO: sees(markerApp1)},
		{name: "organization token with a foreign appId", header: bearer("org1"), appID: "app-3",
			rest:    outcome{status: 403, field: "appId", msg: "not an app of this token's organization"},
			suggest: outcome{status: 403, field: "appId", msg: "another app than the channel key"}, gqlO: forbiddenGraphQL},
		{name: "organization token with an unknown appId", header: bearer("org1"), appID: "ghost",
			rest:    outcome{status: 403, field: "appId", msg: "not an app of this token's organization"},
			suggest: outcome{status: 403, field: "appId", msg: "another app than the channel key"}, gqlO: forbiddenGraphQL},
		unauth("token in the query string: token", nil, "token="+url.QueryEscape(app1)),
		unauth("token in the query string: access_token", nil, "access_token="+url.QueryEscape(app1)),
		unauth("token in the query string: apiKey", nil, "apiKey="+url.QueryEscape(app1)),
		// Beside a header the query-string token is not used either: the
		// answers are those of the header's token.
		{name: "query-string tokens beside another app's header", header: bearer("app2"), query: qsTokens,
			rest: sees(markerApp2), suggest: outcome{status: 404, field: "key", msg: "No channel of this token's apps has this key."}, gqlO: sees(markerApp2)},
		{name: "query-string tokens beside an organization header", header: bearer("org1"), query: qsTokens,
			rest:    outcome{status: 400, field: "appId", msg: "appId query parameter is required"},
			suggest: sees(markerApp1), gqlO: outcome{status: 200, code: "BAD_APP_ID"}},
	}

	const gqlQuery = `query($appId: ID) { handlers(appId: $appId) { intentId name } entities(appId: $appId) { entityId displayName } }`
	for _, rw := range rows {
		t.Run(rw.name, func(t *testing.T) {
			for _, ep := range endpoints {
				var params []string
				if rw.appID != "" {
					params = append(params, "appId="+url.QueryEscape(rw.appID))
				}
				if rw.query != "" {
					params = append(params, rw.query)
				}
				path, body, want := ep.path, "", rw.rest
				switch ep.kind {
				case "suggest":
					want = rw.suggest
				case "graphql":
					want = rw.gqlO
					// GraphQL takes the app as an argument; the query
					// string carries only the extra parameters.
					params = nil
					if rw.query != "" && rw.query != "appId=" {
						params = append(params, rw.query)
					}
					vars := `{"appId":null}`
					switch {
					case rw.appID != "":
						vars = `{"appId":"` + rw.appID + `"}`
					case rw.query == "appId=":
						vars = `{"appId":""}`
					}
					if ep.method == http.MethodPost {
						body = `{"query":` + jsonString(gqlQuery) + `,"variables":` + vars + `}`
					} else {
						params = append(params, "query="+url.QueryEscape(gqlQuery), "variables="+url.QueryEscape(vars))
					}
				}
				if len(params) > 0 {
					sep := "?"
					if strings.Contains(path, "?") {
						sep = "&"
					}
					path += sep + strings.Join(params, "&")
				}
				r := e.do(ep.method, path, body, rw.header...)
				checkOutcome(t, ep.name, ep.kind == "graphql", r, want)
			}
		})
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// do sends a request with the given headers (name, value pairs) and no
// token of its own.
func (e *env) do(method, path, body string, headers ...string) response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, string(b)}
}

func checkOutcome(t *testing.T, endpoint string, graphql bool, r response, want outcome) {
	t.Helper()
	if r.status != want.status {
		t.Errorf("%s: status %d, want %d; body %.300s", endpoint, r.status, want.status, r.body)
		return
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: Content-Type %q", endpoint, ct)
	}
	for _, m := range allMarkers() {
		if m != want.sees && strings.Contains(r.body, m) {
			t.Errorf("%s: the answer holds %s, data of an app this credential does not reach: %.300s", endpoint, m, r.body)
		}
	}
	if want.sees != "" && !strings.Contains(r.body, want.sees) {
		t.Errorf("%s: the answer lacks %s, the data it should show: %.300s", endpoint, want.sees, r.body)
	}
	if graphql {
		var res struct {
			Errors []struct {
				Message    string
				Extensions map[string]any
			}
		}
		if err := json.Unmarshal([]byte(r.body), &res); err != nil {
			t.Errorf("%s: body is not JSON: %v: %.300s", endpoint, err, r.body)
			return
		}
		if want.code == "" && len(res.Errors) > 0 {
			t.Errorf("%s: errors %v", endpoint, res.Errors)
		}
		if want.code != "" && len(res.Errors) == 0 {
			t.Errorf("%s: no error, want %s: %.300s", endpoint, want.code, r.body)
		}
		for _, e := range res.Errors {
			if e.Extensions["code"] != want.code || e.Message == "" || !strings.Contains(e.Message, want.msg) {
				t.Errorf("%s: error %q %v, want code %s and a message with %q", endpoint, e.Message, e.Extensions, want.code, want.msg)
			}
		}
		return
	}
	m := decodeJSON(t, r.body)
	if want.status < 400 {
		return
	}
	msg, _ := m["message"].(string)
	field, _ := m["field"].(string)
	if m["errorType"] != "HandledError" || m["httpStatus"] != float64(want.status) || msg == "" || !strings.Contains(msg, want.msg) || field != want.field {
		t.Errorf("%s: error body %s, want message with %q and field %q", endpoint, r.body, want.msg, want.field)
	}
	// The reference client recognises exactly this message.
	if want.status == http.StatusUnauthorized && msg != "Unauthorized" {
		t.Errorf("%s: 401 message %q", endpoint, msg)
	}
}
