package graphql

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/fixture"
	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/contentdb"
	"github.com/assistantcms/cms/pkg/ratelimit"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// The tests run the endpoint on the real SQLite store and the real token
// checks.

// fixtureBundle's records of app-2 and app-3 carry foreignMarkers, which
// no answer to app-1's token may contain.
const fixtureBundle = `{
 "organizations": [{"id": "org-1", "name": "One"}, {"id": "org-2", "name": "Two"}],
 "apps": [
  {"appId": "app-1", "organizationId": "org-1", "name": "App one"},
  {"appId": "app-2", "organizationId": "org-1", "name": "App two"},
  {"appId": "app-3", "organizationId": "org-2", "name": "App three"}
 ],
 "intents": [{"appId": "app-1", "intentId": "OrderStatus", "utterancePatterns": ["where is my order"], "slots": [{"name": "color", "type": "COLOR"}], "custom": {"x": 1}},
  {"appId": "app-2", "intentId": "OtherIntent", "note": "app-2-private-9f4c"},
  {"appId": "app-3", "intentId": "OtherIntent", "note": "app-3-private-71ae"}],
 "handlers": [
  {"appId": "app-1", "intentId": "LaunchRequest", "name": "Launch", "type": "InSessionIntent",
   "content": {"LaunchRequest": [{"outputSpeech": {"displayText": "Hi", "ssml": "<speak>Hi</speak>"}}], "Again": [{"outputSpeech": "Hello again"}]},
   "forward": {"HelpIntent": [{"intentId": "HelpIntent", "type": "START"}]}, "data": {"n": 1.50}, "futureField": true},
  {"appId": "app-2", "intentId": "OtherApp", "note": "app-2-private-9f4c"},
  {"appId": "app-3", "intentId": "OtherOrg", "note": "app-3-private-71ae"}
 ],
 "entities": [{"appId": "app-1", "entityId": "COLOR", "displayName": "Color", "values": [{"name": "red", "synonyms": ["crimson"], "hex": "#f00"}]},
  {"appId": "app-2", "entityId": "OtherEntity", "values": [{"name": "app-2-private-9f4c"}]},
  {"appId": "app-3", "entityId": "OtherEntity", "values": [{"name": "app-3-private-71ae"}]}]
}`

type env struct {
	t       testing.TB
	store   *contentdb.DB
	srv     *httptest.Server
	tokens  map[string]string
	mu      sync.Mutex
	changed []string
}

func newEnv(t testing.TB, limits Limits, limiter *ratelimit.Limiter) *env {
	t.Helper()
	store, tokens := fixture.Open(t, fixtureBundle, map[string]tenancy.Token{
		"app1": {OrganizationID: "org-1", AppID: "app-1"},
		"org1": {OrganizationID: "org-1"},
		"org2": {OrganizationID: "org-2"},
	})
	e := &env{t: t, store: store, tokens: tokens}
	authn, err := auth.NewAuthenticator(store, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(limits, store, authn, limiter, func(app, _ string) {
		e.mu.Lock()
		e.changed = append(e.changed, app)
		e.mu.Unlock()
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/cms/graphql", h)
	mux.Handle(AssetsPath, Assets())
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	return e
}

type gqlError struct {
	Message    string           `json:"message"`
	Locations  []map[string]int `json:"locations"`
	Path       []any            `json:"path"`
	Extensions map[string]any   `json:"extensions"`
}

type answer struct {
	status int
	Data   map[string]any `json:"data"`
	Errors []gqlError     `json:"errors"`
	raw    string
}

func (a answer) codes() []string {
	var out []string
	for _, e := range a.Errors {
		c, _ := e.Extensions["code"].(string)
		f, _ := e.Extensions["field"].(string)
		out = append(out, c+"@"+f)
	}
	return out
}

func (e *env) post(token, query string, vars map[string]any) answer {
	e.t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	return e.send(http.MethodPost, "/cms/graphql", token, bytes.NewReader(body))
}

func (e *env) send(method, path, token string, body io.Reader) answer {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+e.tokens[token])
	}
	// A request that hangs fails the test within the timeout.
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, raw: string(raw)}
	if err := json.Unmarshal(raw, &a); err != nil {
		e.t.Fatalf("answer %q is not JSON: %v", raw, err)
	}
	return a
}

func (e *env) stored(app string, kind content.Kind, id string) map[string]any {
	e.t.Helper()
	r, err := e.store.Record(context.Background(), app, kind, id)
	if err != nil {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(r.Doc, &m); err != nil {
		e.t.Fatal(err)
	}
	return m
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestQueries(t *testing.T) {
	e := newEnv(t, Limits{}, nil)
	a := e.post("app1", `{
		handler(intentId: "LaunchRequest") { appId organizationId intentId name type createdAt updatedAt
			content { key handlerResponse } forward { key paths } redirect { key } data utterancePatterns document }
		handlers { intentId }
		intent(intentId: "OrderStatus") { intentId utterancePatterns slots { name type } document }
		intents { intentId }
		entity(entityId: "COLOR") { entityId displayName values { name synonyms canonicalId } document }
		entities { entityId }
		missing: handler(intentId: "Nope") { intentId }
	}`, nil)
	if a.status != 200 || len(a.Errors) > 0 {
		t.Fatalf("%d %s", a.status, a.raw)
	}
	h := a.Data["handler"].(map[string]any)
	if h["appId"] != "app-1" || h["organizationId"] != "org-1" || h["type"] != "InSessionIntent" || h["createdAt"] == "" {
		t.Errorf("handler %v", h)
	}
	if got := jsonOf(h["content"]); got != `[{"handlerResponse":[{"outputSpeech":"Hello again"}],"key":"Again"},{"handlerResponse":[{"outputSpeech":{"displayText":"Hi","ssml":"\u003cspeak\u003eHi\u003c/speak\u003e"}}],"key":"LaunchRequest"}]` {
		t.Errorf("content as a list %s", got)
	}
	if got := jsonOf(h["forward"]); got != `[{"key":"HelpIntent","paths":[{"intentId":"HelpIntent","type":"START"}]}]` {
		t.Errorf("forward as a list %s", got)
	}
	if got := jsonOf(h["redirect"]); got != `[]` {
		t.Errorf("missing redirect %s", got)
	}
	if jsonOf(h["data"]) != `{"n":1.5}` || jsonOf(h["utterancePatterns"]) != `[]` {
		t.Errorf("data %s, utterancePatterns %s", jsonOf(h["data"]), jsonOf(h["utterancePatterns"]))
	}
	doc := h["document"].(map[string]any)
	if doc["futureField"] != true || doc["appId"] != "app-1" || doc["updatedAt"] != h["updatedAt"] {
		t.Errorf("document %v", doc)
	}
	if got := jsonOf(a.Data["handlers"]); got != `[{"intentId":"LaunchRequest"}]` {
		t.Errorf("handlers of app-1 %s", got)
	}
	in := a.Data["intent"].(map[string]any)
	if jsonOf(in["slots"]) != `[{"name":"color","type":"COLOR"}]` || in["document"].(map[string]any)["custom"] == nil {
		t.Errorf("intent %v", in)
	}
	ent := a.Data["entity"].(map[string]any)
	if jsonOf(ent["values"]) != `[{"canonicalId":null,"name":"red","synonyms":["crimson"]}]` || ent["document"].(map[string]any)["values"].([]any)[0].(map[string]any)["hex"] != "#f00" {
		t.Errorf("entity %v", ent)
	}
	if a.Data["missing"] != nil {
		t.Errorf("a missing handler is %v, want null", a.Data["missing"])
	}
	// An organization token names the app.
	a = e.post("org1", `query Q($app: ID) { handlers(appId: $app) { intentId appId } }`, map[string]any{"app": "app-2"})
	if got := jsonOf(a.Data["handlers"]); got != `[{"appId":"app-2","intentId":"OtherApp"}]` {
		t.Errorf("org token, app-2: %s", a.raw)
	}
}

func TestMutations(t *testing.T) {
	e := newEnv(t, Limits{}, nil)
	ctx := context.Background()
	rev0, _ := e.store.Revision(ctx, "app-1")
	a := e.post("app1", `mutation($h: AddHandlerInput!) { addHandler(handler: $h) { intentId content { key } createdAt updatedAt document } }`,
		map[string]any{"h": map[string]any{
			"intentId": "Hours", "name": "Hours", "type": "InSessionIntent",
			"content": []any{map[string]any{"key": "Hours", "handlerResponse": []any{map[string]any{"outputSpeech": "9 to 5"}}}},
			"forward": []any{map[string]any{"key": "Help", "paths": []any{map[string]any{"intentId": "Help"}}}},
			"slots":   []any{map[string]any{"name": "c", "type": "COLOR"}, map[string]any{"name": "n", "type": "NUMBER"}},
			"data":    map[string]any{"price": 12.50},
			"extra":   map[string]any{"permissions2": []any{"a"}},
		}})
	if len(a.Errors) > 0 {
		t.Fatalf("addHandler: %s", a.raw)
	}
	if got := jsonOf(e.stored("app-1", content.KindHandler, "Hours")); got != `{"content":{"Hours":[{"outputSpeech":"9 to 5"}]},"data":{"price":12.5},"forward":{"Help":[{"intentId":"Help"}]},"intentId":"Hours","name":"Hours","permissions2":["a"],"slots":[{"name":"c","type":"COLOR"},{"name":"n","type":"NUMBER"}],"type":"InSessionIntent"}` {
		t.Errorf("stored handler %s", got)
	}
	if rev, _ := e.store.Revision(ctx, "app-1"); rev == rev0 {
		t.Errorf("addHandler did not move the app's revision")
	}
	if len(e.changed) != 1 || e.changed[0] != "app-1" {
		t.Errorf("change notifications %v", e.changed)
	}

	// Update replaces the fields given and keeps the others.
	a = e.post("app1", `mutation { updateHandler(handlerId: "Hours", handler: {name: "Opening hours", content: [{key: "Hours", handlerResponse: [{outputSpeech: "Nine to five"}]}]}) { name content { key handlerResponse } data } }`, nil)
	if len(a.Errors) > 0 {
		t.Fatalf("updateHandler: %s", a.raw)
	}
	if got := jsonOf(a.Data["updateHandler"]); got != `{"content":[{"handlerResponse":[{"outputSpeech":"Nine to five"}],"key":"Hours"}],"data":{"price":12.5},"name":"Opening hours"}` {
		t.Errorf("updated handler %s", got)
	}
	a = e.post("app1", `mutation { deleteHandler(handlerId: "Hours") { intentId name } }`, nil)
	if jsonOf(a.Data["deleteHandler"]) != `{"intentId":"Hours","name":"Opening hours"}` || e.stored("app-1", content.KindHandler, "Hours") != nil {
		t.Errorf("deleteHandler: %s", a.raw)
	}

	// Intents; numbers written inline are kept as written, even beyond a
	// float64 (they were stored as null).
	a = e.post("app1", `mutation { addIntent(intent: {intentId: "Hello", utterancePatterns: ["hi", "hello"], nlu: {big: 1e350, small: -2.50}}) { intentId utterancePatterns } }`, nil)
	if jsonOf(a.Data["addIntent"]) != `{"intentId":"Hello","utterancePatterns":["hi","hello"]}` {
		t.Errorf("addIntent: %s", a.raw)
	}
	if r, err := e.store.Record(ctx, "app-1", content.KindIntent, "Hello"); err != nil || !strings.Contains(string(r.Doc), `"nlu":{"big":1e350,"small":-2.50}`) {
		t.Errorf("stored intent %s (%v)", r.Doc, err)
	}
	a = e.post("app1", `mutation { updateIntent(intentId: "Hello", intent: {name: "Greeting"}) { name utterancePatterns } }`, nil)
	if jsonOf(a.Data["updateIntent"]) != `{"name":"Greeting","utterancePatterns":["hi","hello"]}` {
		t.Errorf("updateIntent: %s", a.raw)
	}
	a = e.post("app1", `mutation { deleteIntent(intentId: "Hello") { intentId } }`, nil)
	if len(a.Errors) > 0 || e.stored("app-1", content.KindIntent, "Hello") != nil {
		t.Errorf("deleteIntent: %s", a.raw)
	}

	// Entities: addEntity takes its app inside the input.
	a = e.post("org1", `mutation { addEntity(entity: {appId: "app-2", entityId: "SIZE", type: "VALUE_SYNONYMS", values: [{name: "small", synonyms: ["s"], extra: {rank: 1}}]}) { appId entityId values { name } } }`, nil)
	if jsonOf(a.Data["addEntity"]) != `{"appId":"app-2","entityId":"SIZE","values":[{"name":"small"}]}` {
		t.Errorf("addEntity: %s", a.raw)
	}
	if got := jsonOf(e.stored("app-2", content.KindEntity, "SIZE")); got != `{"entityId":"SIZE","type":"VALUE_SYNONYMS","values":[{"name":"small","rank":1,"synonyms":["s"]}]}` {
		t.Errorf("stored entity %s", got)
	}
	a = e.post("org1", `mutation { updateEntity(appId: "app-2", entityId: "SIZE", entity: {displayName: "Size"}) { displayName values { name } } }`, nil)
	if jsonOf(a.Data["updateEntity"]) != `{"displayName":"Size","values":[{"name":"small"}]}` {
		t.Errorf("updateEntity: %s", a.raw)
	}
	a = e.post("org1", `mutation { replaceEntityValues(appId: "app-2", entityId: "SIZE", values: [{name: "large"}, {name: "medium", synonyms: ["m"]}]) { values { name synonyms } displayName } }`, nil)
	if jsonOf(a.Data["replaceEntityValues"]) != `{"displayName":"Size","values":[{"name":"large","synonyms":[]},{"name":"medium","synonyms":["m"]}]}` {
		t.Errorf("replaceEntityValues: %s", a.raw)
	}
	a = e.post("org1", `mutation { deleteEntity(appId: "app-2", entityId: "SIZE") { entityId } }`, nil)
	if len(a.Errors) > 0 || e.stored("app-2", content.KindEntity, "SIZE") != nil {
		t.Errorf("deleteEntity: %s", a.raw)
	}
}

func TestErrorCodes(t *testing.T) {
	e := newEnv(t, Limits{MaxBodyBytes: 4096}, nil)
	for _, tt := range []struct {
		name, token, query string
		status             int
		want               []string // code@field of each error
	}{
		{"no token", "", `{ handlers { intentId } }`, 401, []string{"UNAUTHENTICATED@"}},
		{"org token without appId", "org1", `{ handlers { intentId } }`, 200, []string{"BAD_APP_ID@appId"}},
		{"app token, foreign app", "app1", `{ handlers(appId: "app-2") { intentId } }`, 200, []string{"FORBIDDEN@appId"}},
		{"org token, other organization", "org2", `{ handler(appId: "app-1", intentId: "LaunchRequest") { intentId } }`, 200, []string{"FORBIDDEN@appId"}},
		{"org token, unknown app", "org1", `{ handlers(appId: "ghost") { intentId } }`, 200, []string{"FORBIDDEN@appId"}},
		{"mutation on a foreign app", "org2", `mutation { deleteHandler(appId: "app-1", handlerId: "LaunchRequest") { intentId } }`, 200, []string{"FORBIDDEN@appId"}},
		{"duplicate", "app1", `mutation { addHandler(handler: {intentId: "LaunchRequest"}) { intentId } }`, 200, []string{"ALREADY_EXISTS@handler.intentId"}},
		{"update missing", "app1", `mutation { updateIntent(intentId: "Nope", intent: {name: "x"}) { intentId } }`, 200, []string{"NOT_FOUND@intentId"}},
		{"delete missing", "app1", `mutation { deleteEntity(entityId: "NOPE") { entityId } }`, 200, []string{"NOT_FOUND@entityId"}},
		{"several problems", "app1", `mutation { addHandler(handler: {intentId: "X", content: [{key: "a", handlerResponse: ["x"]}, {key: "a", handlerResponse: []}], extra: {name: "n", intentId: "Y"}}) { intentId } }`, 200,
			[]string{"BAD_USER_INPUT@handler.content[1].key", "BAD_USER_INPUT@handler.extra.intentId"}},
		{"invalid record", "app1", `mutation { addIntent(intent: {intentId: "a/b", slots: [{name: "", type: "NUMBER"}]}) { intentId } }`, 200,
			[]string{"BAD_USER_INPUT@intent.intentId", "BAD_USER_INPUT@intent.slots[0].name"}},
		{"bad entity type", "app1", `mutation { updateEntity(entityId: "COLOR", entity: {type: "LIST"}) { entityId } }`, 200, []string{"BAD_USER_INPUT@entity.type"}},
		{"slot type names no entity", "app1", `mutation { addIntent(intent: {intentId: "I", slots: [{name: "a", type: "COLOR"}, {name: "b", type: "SHAPE"}, {name: "c", type: "AMAZON.Number"}]}) { intentId } }`, 200,
			[]string{"MISSING_REFERENCE@intent.slots[1].type"}},
		{"syntax", "app1", `{ handlers { intentId }`, 400, []string{"GRAPHQL_PARSE_FAILED@"}},
		{"unknown field", "app1", `{ handlers { nope } }`, 400, []string{"GRAPHQL_VALIDATION_FAILED@"}},
		{"missing required argument", "app1", `{ handler { intentId } }`, 400, []string{"GRAPHQL_VALIDATION_FAILED@"}},
		{"two operations, none named", "app1", `query A { handlers { intentId } } query B { intents { intentId } }`, 400, []string{"BAD_REQUEST@operationName"}},
		{"missing variable", "app1", `query($id: ID!) { intent(intentId: $id) { intentId } }`, 400, []string{"BAD_USER_INPUT@variables.id"}},
		{"variable without a type", "app1", `query($a:) { handlers { intentId } }`, 400, []string{"GRAPHQL_PARSE_FAILED@"}},
		{"variable of a list of nothing", "app1", `query($a: []) { handlers { intentId } }`, 400, []string{"GRAPHQL_PARSE_FAILED@"}},
		{"invalid character", "app1", "{ handlers { intentId } } \u0007", 400, []string{"GRAPHQL_PARSE_FAILED@"}},
		{"type definitions", "app1", `type Query { x: ] } { handlers { intentId } }`, 400, []string{"GRAPHQL_VALIDATION_FAILED@"}},
		{"subscription", "app1", `subscription { handlers { intentId } }`, 400, []string{"GRAPHQL_VALIDATION_FAILED@"}},
		{"fields in conflict", "app1", `{ handlers { a: intentId a: name } }`, 400, []string{"GRAPHQL_VALIDATION_FAILED@"}},
		{"arguments in conflict", "app1", `{ x: handler(intentId: "A") { intentId } x: handler(intentId: "B") { intentId } }`, 400, []string{"GRAPHQL_VALIDATION_FAILED@"}},
		{"subfields in conflict", "app1", `{ handlers { content { k: key } } ...F } fragment F on Query { handlers { content { k: handlerResponse } } }`, 400, []string{"GRAPHQL_VALIDATION_FAILED@"}},
		// graphql-go reads inline JSON without variables: one inside would
		// be stored as null.
		{"variable inside a JSON value", "app1", `mutation($p: JSON) { addHandler(handler: {intentId: "V", data: {price: $p}}) { intentId } }`, 400, []string{"GRAPHQL_VALIDATION_FAILED@"}},
		{"fields that merge", "app1", `{ handlers { intentId } ...F } fragment F on Query { handlers { name intentId } }`, 200, nil},
		// graphql-go reads the name after a comment with non-ASCII text
		// twice; the endpoint gives it the query without comments.
		{"comments with accents", "app1", "query { # état\n handlers { #éééééééé\nintentId } }", 200, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := e.store
			_ = before
			a := e.post(tt.token, tt.query, nil)
			if a.status != tt.status || strings.Join(a.codes(), ",") != strings.Join(tt.want, ",") {
				t.Errorf("%d %v, want %d %v\n%s", a.status, a.codes(), tt.status, tt.want, a.raw)
			}
			for _, err := range a.Errors {
				if err.Message == "" {
					t.Errorf("an error without a message: %s", a.raw)
				}
			}
		})
	}
	// Failed mutations wrote nothing and told nobody.
	if len(e.changed) != 0 {
		t.Errorf("failed mutations notified changes to %v", e.changed)
	}
	if e.stored("app-1", content.KindHandler, "X") != nil || e.stored("app-1", content.KindIntent, "I") != nil {
		t.Errorf("a failed mutation wrote a record")
	}
	if got := jsonOf(e.stored("app-1", content.KindEntity, "COLOR")["displayName"]); got != `"Color"` {
		t.Errorf("a failed update changed the entity: %s", got)
	}

	// An ID no record can have is not echoed: it may be as long as the
	// request.
	long := strings.Repeat("x", 5000)
	if a := newEnv(t, Limits{}, nil).post("app1", `mutation { deleteIntent(intentId: "`+long+`") { intentId } }`, nil); strings.Join(a.codes(), "") != "NOT_FOUND@intentId" || strings.Contains(a.raw, long) {
		t.Errorf("deleting an impossible ID: %d %.300s", a.status, a.raw)
	}

	// Request-level errors.
	big := e.send(http.MethodPost, "/cms/graphql", "app1", strings.NewReader(`{"query":"{ handlers { intentId } }","variables":{"x":"`+strings.Repeat("x", 5000)+`"}}`))
	if big.status != http.StatusRequestEntityTooLarge || strings.Join(big.codes(), "") != "REQUEST_TOO_LARGE@" {
		t.Errorf("large body: %d %s", big.status, big.raw)
	}
	for _, tc := range []struct{ name, body, want, msg string }{
		{"broken JSON", `{"query":`, "BAD_REQUEST@", "the body must be a JSON object"},
		{"batch", `[{"query":"{ handlers { intentId } }"},{"query":"{ intents { intentId } }"}]`, "BAD_REQUEST@", "batched requests (a JSON array) are not supported"},
		{"query not a string", `{"query":1}`, "BAD_REQUEST@query", "query: must be a string, not a number"},
		{"variables not an object", `{"query":"{ handlers { intentId } }","variables":[1]}`, "BAD_REQUEST@variables", "variables: must be an object, not an array"},
		{"not an object", `"{ handlers { intentId } }"`, "BAD_REQUEST@", "not a string"},
	} {
		a := e.send(http.MethodPost, "/cms/graphql", "app1", strings.NewReader(tc.body))
		if a.status != 400 || strings.Join(a.codes(), "") != tc.want || len(a.Errors) != 1 || !strings.Contains(a.Errors[0].Message, tc.msg) {
			t.Errorf("%s: %d %s, want 400 %s %q", tc.name, a.status, a.raw, tc.want, tc.msg)
		}
	}

	// Errors are placed in the query as sent, though graphql-go is given
	// it one token per line.
	for _, tc := range []struct {
		name, query string
		line, col   int
	}{
		{"validation", "{\n  handlers {\n    nope\n  }\n}", 3, 5},
		{"syntax", "{\n  handlers {\n    intentId ) }", 3, 14},
		{"end of the query", "{\r\n  handlers { intentId }\r\n  ", 3, 3},
		{"after text with accents", `{ handler(intentId: "été") { intentId } handlers { x } }`, 1, 52},
		{"lexer", "{ handlers { intentId } }\n\n  \"\\q\"", 3, 5},
	} {
		a := e.post("app1", tc.query, nil)
		if a.status != 400 || len(a.Errors) != 1 || jsonOf(a.Errors[0].Locations) != fmt.Sprintf(`[{"column":%d,"line":%d}]`, tc.col, tc.line) {
			t.Errorf("%s: %d, want an error at %d:%d: %.300s", tc.name, a.status, tc.line, tc.col, a.raw)
		}
	}
	get := e.send(http.MethodGet, "/cms/graphql?query="+url.QueryEscape(`mutation { deleteIntent(intentId: "OrderStatus") { intentId } }`), "app1", nil)
	if get.status != http.StatusMethodNotAllowed || strings.Join(get.codes(), "") != "MUTATION_NOT_ALLOWED@" || e.stored("app-1", content.KindIntent, "OrderStatus") == nil {
		t.Errorf("mutation over GET: %d %s", get.status, get.raw)
	}
	q := e.send(http.MethodGet, "/cms/graphql?query="+url.QueryEscape(`query Q($id: ID!) { intent(intentId: $id) { intentId } }`)+"&variables="+url.QueryEscape(`{"id":"OrderStatus"}`)+"&operationName=Q", "app1", nil)
	if q.status != 200 || jsonOf(q.Data) != `{"intent":{"intentId":"OrderStatus"}}` {
		t.Errorf("query over GET: %d %s", q.status, q.raw)
	}
}

// TestOtherAppsUnreachable tries to read and change other apps' records
// by ID, through aliases, fragments, variables and introspection: every
// attempt is refused or finds nothing, answers hold nothing of those
// records, and nothing changes.
func TestOtherAppsUnreachable(t *testing.T) {
	e := newEnv(t, Limits{}, nil)
	foreign := map[string]map[string]any{}
	for _, app := range []string{"app-2", "app-3"} {
		for kind, id := range map[content.Kind]string{content.KindIntent: "OtherIntent", content.KindEntity: "OtherEntity", content.KindHandler: "OtherApp"} {
			if app == "app-3" && kind == content.KindHandler {
				id = "OtherOrg"
			}
			if foreign[app+"/"+id] = e.stored(app, kind, id); foreign[app+"/"+id] == nil {
				t.Fatalf("the fixture has no %s %s/%s", kind, app, id)
			}
		}
	}
	for _, tt := range []struct {
		name, token, query string
		vars               map[string]any
		want               []string // code@field of each error
	}{
		{"another app by ID", "app1", `{ intent(appId: "app-2", intentId: "OtherIntent") { document } }`, nil, []string{"FORBIDDEN@appId"}},
		{"another organization's app", "org1", `{ entity(appId: "app-3", entityId: "OtherEntity") { values { name } } }`, nil, []string{"FORBIDDEN@appId"}},
		{"another app's IDs in one's own app", "app1", `{ intent(intentId: "OtherIntent") { document } handler(intentId: "OtherApp") { document } entity(entityId: "OtherEntity") { document } }`, nil, nil},
		{"aliases", "app1", `{ mine: intent(intentId: "OrderStatus") { intentId } a: handler(appId: "app-2", intentId: "OtherApp") { document } b: handler(appId: "app-3", intentId: "OtherOrg") { data } }`, nil,
			[]string{"FORBIDDEN@appId", "FORBIDDEN@appId"}},
		// Lists are non-null: the first refusal nulls the answer and ends it.
		{"lists through aliases", "org2", `{ a: handlers(appId: "app-1") { document } b: entities(appId: "app-2") { entityId } }`, nil, []string{"FORBIDDEN@appId"}},
		{"fragments", "app1", `{ handler(appId: "app-2", intentId: "OtherApp") { ...H ... on Handler { name } } } fragment H on Handler { intentId document }`, nil, []string{"FORBIDDEN@appId"}},
		{"variables", "org2", `query($app: ID, $id: ID!) { entity(appId: $app, entityId: $id) { document } }`, map[string]any{"app": "app-1", "id": "COLOR"}, []string{"FORBIDDEN@appId"}},
		{"introspection beside", "app1", `{ __schema { queryType { name } } __type(name: "Intent") { name fields { name } } intent(appId: "app-2", intentId: "OtherIntent") { document } }`, nil,
			[]string{"FORBIDDEN@appId"}},
		{"update by ID", "app1", `mutation { updateHandler(appId: "app-2", handlerId: "OtherApp", handler: {name: "taken"}) { document } }`, nil, []string{"FORBIDDEN@appId"}},
		{"update in one's own app", "app1", `mutation { updateIntent(intentId: "OtherIntent", intent: {name: "taken"}) { document } }`, nil, []string{"NOT_FOUND@intentId"}},
		{"delete by ID", "org1", `mutation { deleteEntity(appId: "app-3", entityId: "OtherEntity") { values { name } } }`, nil, []string{"FORBIDDEN@appId"}},
		{"delete in one's own app", "app1", `mutation { deleteHandler(handlerId: "OtherApp") { document } }`, nil, []string{"NOT_FOUND@handlerId"}},
		// Mutations run in turn and stop at the first refused.
		{"aliased deletes", "app1", `mutation { a: deleteIntent(appId: "app-2", intentId: "OtherIntent") { intentId } b: deleteHandler(appId: "app-3", handlerId: "OtherOrg") { intentId } }`, nil,
			[]string{"FORBIDDEN@appId"}},
		{"aliased deletes, the other first", "app1", `mutation { b: deleteHandler(appId: "app-3", handlerId: "OtherOrg") { intentId } a: deleteIntent(appId: "app-2", intentId: "OtherIntent") { intentId } }`, nil,
			[]string{"FORBIDDEN@appId"}},
		{"replace values through variables", "app1", `mutation($app: ID, $v: [EntityValueInput!]!) { replaceEntityValues(appId: $app, entityId: "OtherEntity", values: $v) { values { name } } }`,
			map[string]any{"app": "app-2", "v": []any{map[string]any{"name": "taken"}}}, []string{"FORBIDDEN@appId"}},
		{"add to another app", "org2", `mutation { addEntity(entity: {appId: "app-1", entityId: "OtherEntity"}) { document } }`, nil, []string{"FORBIDDEN@appId"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := e.post(tt.token, tt.query, tt.vars)
			if a.status != 200 || strings.Join(a.codes(), ",") != strings.Join(tt.want, ",") {
				t.Errorf("%d %v, want 200 %v\n%s", a.status, a.codes(), tt.want, a.raw)
			}
			for _, m := range foreignMarkers() {
				if strings.Contains(a.raw, string(m)) {
					t.Errorf("the answer shows another app's record: %s", a.raw)
				}
			}
			if strings.Contains(tt.query, "__schema") && !strings.Contains(a.raw, `"queryType":{"name":"Query"}`) {
				t.Errorf("introspection did not answer: %s", a.raw)
			}
			if strings.Contains(tt.query, "mine:") && !strings.Contains(a.raw, `"mine":{"intentId":"OrderStatus"}`) {
				t.Errorf("the caller's own record is missing: %s", a.raw)
			}
		})
	}
	for key, want := range foreign {
		app, id, _ := strings.Cut(key, "/")
		kind := content.KindIntent
		switch id {
		case "OtherEntity":
			kind = content.KindEntity
		case "OtherApp", "OtherOrg":
			kind = content.KindHandler
		}
		if got := e.stored(app, kind, id); jsonOf(got) != jsonOf(want) {
			t.Errorf("%s %s changed: %s, was %s", kind, key, jsonOf(got), jsonOf(want))
		}
	}
	if len(e.changed) != 0 {
		t.Errorf("refused mutations notified changes to %v", e.changed)
	}

	// Another organization's app and an app that does not exist are
	// refused alike, so app IDs cannot be probed.
	other := e.post("org1", `{ intents(appId: "app-3") { intentId } }`, nil)
	ghost := e.post("org1", `{ intents(appId: "app-4") { intentId } }`, nil)
	if other.status != ghost.status || strings.ReplaceAll(other.raw, "app-3", "app-4") != ghost.raw {
		t.Errorf("another organization's app answers\n%s\nan unknown one\n%s", other.raw, ghost.raw)
	}
}

func TestComplexityLimits(t *testing.T) {
	e := newEnv(t, Limits{}, nil)
	if a := e.post("app1", "{"+aliasBomb(300)+" }", nil); a.status != 400 || strings.Join(a.codes(), "") != "QUERY_TOO_COMPLEX@" {
		t.Errorf("600 fields through aliases: %d %s", a.status, a.raw)
	}
	// Fragments spread into each other multiply the fields selected.
	bomb := `{ handlers { ...F3 } }
	fragment F0 on Handler { intentId name type createdAt updatedAt }
	fragment F1 on Handler { ...F0 a: content { key } b: forward { key } ...F0 }
	fragment F2 on Handler { ...F1 ...F1 ...F1 ...F1 ...F1 ...F1 ...F1 ...F1 }
	fragment F3 on Handler { ...F2 ...F2 ...F2 ...F2 ...F2 ...F2 ...F2 ...F2 ...F2 ...F2 }`
	if a := e.post("app1", bomb, nil); a.status != 400 || strings.Join(a.codes(), "") != "QUERY_TOO_COMPLEX@" {
		t.Errorf("fragment bomb: %d %s", a.status, a.raw)
	}
	// Introspection, as the SDL test and GraphiQL send it, passes.
	for _, q := range []string{introspection, graphiQLIntrospection} {
		if a := e.post("app1", q, nil); a.status != 200 || len(a.Errors) > 0 || !strings.Contains(a.raw, `"name":"Handler"`) {
			t.Errorf("introspection: %d %s", a.status, a.raw[:min(len(a.raw), 300)])
		}
	}

	// Requests built to take the server down or hold it: each is refused
	// with a message (before, fragment cycles and deep nesting overflowed
	// the stack, killing the process; the others held a core for
	// seconds to hours).
	var ops, typenames, tokens strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&ops, "query Q%d { handlers { intentId } }\n", i)
	}
	typenames.WriteString("{ ...F40 }\nfragment F0 on Query { __typename }\n")
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&typenames, "fragment F%d on Query { ...F%d ...F%d }\n", i, i-1, i-1)
	}
	tokens.WriteString(`mutation { replaceEntityValues(entityId: "COLOR", values: [`)
	for range 40_000 {
		tokens.WriteString(`{name: "x"} `)
	}
	tokens.WriteString(`]) { entityId } }`)
	for _, tc := range []struct {
		name, query string
		status      int
		code, msg   string
	}{
		{"fragment spreading itself", `{ handlers { ...A } } fragment A on Handler { intentId ...A }`, 400, "GRAPHQL_VALIDATION_FAILED", `Cannot spread fragment "A" within itself.`},
		{"fragment cycle", `{ handlers { ...A } } fragment A on Handler { content { key } ... on Handler { ...B } } fragment B on Handler { ...C } fragment C on Handler { ...A }`,
			400, "GRAPHQL_VALIDATION_FAILED", `Cannot spread fragment "A" within itself via B, C.`},
		{"fragment cycle, unused", `{ handlers { intentId } } fragment A on Handler { ...B } fragment B on Handler { ...A }`, 400, "GRAPHQL_VALIDATION_FAILED", "within itself"},
		{"selection sets nested 10,000 deep", strings.Repeat("{ handlers ", 10_000) + strings.Repeat("}", 10_000), 400, "QUERY_TOO_DEEP", "nests brackets more than 256 deep"},
		{"a value nested 100,000 deep", `mutation { addHandler(handler: {intentId: "D", data: ` + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + `}) { intentId } }`,
			400, "QUERY_TOO_DEEP", "nests brackets more than 256 deep"},
		{"5,000 aliases", "{" + aliasBomb(5000) + "}", 400, "QUERY_TOO_COMPLEX", "more than 3000"},
		{"2,000 operations", ops.String(), 400, "QUERY_TOO_COMPLEX", "more than 3000"},
		{"introspection through 2^40 fragment spreads", typenames.String(), 400, "QUERY_TOO_COMPLEX", "once its fragments are spread"},
		{"a field 2,900 times", "{ handlers { " + strings.Repeat("intentId ", 2900) + "} }", 400, "QUERY_TOO_COMPLEX", "more than 500 fields"},
		{"__typename 2,900 times", "{ " + strings.Repeat("__typename ", 2900) + "}", 200, "", ""},
		{"an introspection field 600 times", "{ __schema { types { " + strings.Repeat("name ", 600) + "} } }", 400, "QUERY_TOO_COMPLEX", "more than 500 fields"},
		{"200,000 tokens", tokens.String(), 413, "REQUEST_TOO_LARGE", "send large values as variables"},
		{"a 3 MiB string", `{ handler(intentId: "` + strings.Repeat("x", 3<<20) + `") { intentId } }`, 200, "", ""},
		{"a syntax error far along a line", strings.Repeat(" ", 1<<20) + "{ handlers { intentId }", 400, "GRAPHQL_PARSE_FAILED", fmt.Sprintf("(1:%d) Expected Name, found EOF", 1<<20+24)},
	} {
		a := e.post("app1", tc.query, nil)
		code, msg := "", ""
		if len(a.Errors) > 0 {
			code, _ = a.Errors[0].Extensions["code"].(string)
			msg = a.Errors[0].Message
		}
		if a.status != tc.status || code != tc.code || !strings.Contains(msg, tc.msg) || len(a.Errors) > 1 {
			t.Errorf("%s: %d %.300s, want %d %s %q", tc.name, a.status, a.raw, tc.status, tc.code, tc.msg)
		}
	}
	// The same over GET.
	get := e.send(http.MethodGet, "/cms/graphql?query="+url.QueryEscape(`{ handlers { ...A } } fragment A on Handler { ...A }`), "app1", nil)
	if get.status != 400 || strings.Join(get.codes(), "") != "GRAPHQL_VALIDATION_FAILED@" {
		t.Errorf("fragment cycle over GET: %d %s", get.status, get.raw)
	}

	// Variables: JSON nested deeper than encoding/json reads is a bad
	// request; a value nested deeper than a record may is refused with its
	// path, and nothing is stored.
	deepJSON := `{"query":"{ handlers { intentId } }","variables":{"d":` + strings.Repeat("[", 20_000) + strings.Repeat("]", 20_000) + `}}`
	if a := e.send(http.MethodPost, "/cms/graphql", "app1", strings.NewReader(deepJSON)); a.status != 400 || strings.Join(a.codes(), "") != "BAD_REQUEST@" {
		t.Errorf("variables nested 20,000 deep: %d %.300s", a.status, a.raw)
	}
	var deep any = "x"
	for range 300 {
		deep = []any{deep}
	}
	a := e.post("app1", `mutation($d: JSON) { addHandler(handler: {intentId: "Deep", data: $d}) { intentId } }`, map[string]any{"d": map[string]any{"d": deep}})
	if a.status != 200 || len(a.Errors) != 1 || !strings.HasPrefix(a.codes()[0], "BAD_USER_INPUT@handler.data.d[0][0]") ||
		!strings.Contains(a.Errors[0].Message, "nests arrays and objects more than 128 deep") || e.stored("app-1", content.KindHandler, "Deep") != nil {
		t.Errorf("a value nested 300 deep: %d %.300s", a.status, a.raw)
	}

	// Depth counts through fragments and inline fragments.
	two := newEnv(t, Limits{MaxDepth: 2}, nil)
	if a := two.post("app1", `{ handlers { ...A } } fragment A on Handler { ... on Handler { content { key } } }`, nil); a.status != 400 || strings.Join(a.codes(), "") != "QUERY_TOO_DEEP@" {
		t.Errorf("depth 3 through fragments with a limit of 2: %d %s", a.status, a.raw)
	}
	if a := two.post("app1", `{ handlers { ...A } } fragment A on Handler { ... on Handler { intentId } }`, nil); a.status != 200 || len(a.Errors) > 0 {
		t.Errorf("depth 2 through fragments with a limit of 2: %d %s", a.status, a.raw)
	}

	shallow := newEnv(t, Limits{MaxDepth: 1}, nil)
	if a := shallow.post("app1", `{ handlers { content { key } } }`, nil); a.status != 400 || strings.Join(a.codes(), "") != "QUERY_TOO_DEEP@" {
		t.Errorf("depth 2 with a limit of 1: %d %s", a.status, a.raw)
	}
	if a := shallow.post("app1", `{ handlers { intentId } }`, nil); a.status != 400 {
		t.Errorf("depth 2 (handlers, intentId) with a limit of 1 passed: %d %s", a.status, a.raw)
	}
}

// aliasBomb selects handlers under n aliases.
func aliasBomb(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, " a%d: handlers { intentId }", i)
	}
	return b.String()
}

// graphiQLIntrospection is the introspection query the GraphiQL served
// here sends (getIntrospectionQuery of graphql-js, in
// assets/graphiql.min.js.gz, with its defaults).
const graphiQLIntrospection = `
    query IntrospectionQuery {
      __schema {
        queryType { name }
        mutationType { name }
        subscriptionType { name }
        types { ...FullType }
        directives { name description locations args { ...InputValue } }
      }
    }
    fragment FullType on __Type {
      kind name description
      fields(includeDeprecated: true) { name description args { ...InputValue } type { ...TypeRef } isDeprecated deprecationReason }
      inputFields { ...InputValue }
      interfaces { ...TypeRef }
      enumValues(includeDeprecated: true) { name description isDeprecated deprecationReason }
      possibleTypes { ...TypeRef }
    }
    fragment InputValue on __InputValue { name description type { ...TypeRef } defaultValue }
    fragment TypeRef on __Type {
      kind name
      ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name
        ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } } } } } } }
    }`

func TestRateLimitAndUnavailable(t *testing.T) {
	e := newEnv(t, Limits{}, ratelimit.New(1, 2, nil))
	var last answer
	for range 4 {
		last = e.post("app1", `{ intents { intentId } }`, nil)
	}
	if last.status != http.StatusTooManyRequests || strings.Join(last.codes(), "") != "RATE_LIMITED@" {
		t.Errorf("over the limit: %d %s", last.status, last.raw)
	}

	d := newEnv(t, Limits{}, nil)
	d.post("org1", `{ intents(appId: "app-1") { intentId } }`, nil) // caches the token and the app
	d.store.Close()
	a := d.post("org1", `{ intents(appId: "app-1") { intentId } }`, nil)
	if strings.Join(a.codes(), "") != "UNAVAILABLE@" {
		t.Errorf("store closed: %d %s", a.status, a.raw)
	}
}

func TestGraphiQL(t *testing.T) {
	e := newEnv(t, Limits{}, nil)
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/cms/graphql", nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(page), AssetsPath+"graphiql.min.js") {
		t.Fatalf("GraphiQL page: %d %s", resp.StatusCode, page)
	}
	// Every file the page loads is served, compressed or not.
	for _, name := range []string{"graphiql.min.js", "graphiql.min.css", "react.production.min.js", "react-dom.production.min.js"} {
		if !strings.Contains(string(page), AssetsPath+name) {
			t.Errorf("the page does not load %s", name)
		}
		for _, gz := range []bool{true, false} {
			req, _ := http.NewRequest(http.MethodGet, e.srv.URL+AssetsPath+name, nil)
			req.Header.Set("Accept-Encoding", map[bool]string{true: "gzip", false: "identity"}[gz])
			tr := &http.Transport{DisableCompression: true}
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var r io.Reader = resp.Body
			if resp.Header.Get("Content-Encoding") == "gzip" {
				if r, err = gzip.NewReader(resp.Body); err != nil {
					t.Fatal(err)
				}
			}
			body, err := io.ReadAll(r)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || len(body) < 1000 || (resp.Header.Get("Content-Encoding") == "gzip") != gz {
				t.Errorf("%s (gzip %v): %d, %d bytes, %v", name, gz, resp.StatusCode, len(body), err)
			}
		}
	}
	if resp, _ := http.Get(e.srv.URL + AssetsPath + "nope.js"); resp.StatusCode != 404 {
		t.Errorf("unknown asset: %d", resp.StatusCode)
	}
}

// TestConflictingWrites: two writers update one handler from the same
// read. One wins; the other is refused with CONFLICT naming the current
// revision, and nothing it sent is stored. The audit log names the token
// (never its secret) and the mutation.
func TestConflictingWrites(t *testing.T) {
	e := newEnv(t, Limits{}, nil)
	read := e.post("app1", `{ handler(intentId: "LaunchRequest") { revision } }`, nil)
	rev, ok := read.Data["handler"].(map[string]any)["revision"].(float64)
	if !ok || rev <= 0 {
		t.Fatalf("read: %s", read.raw)
	}
	const update = `mutation($rev: Revision, $name: String) { updateHandler(handlerId: "LaunchRequest", ifRevision: $rev, handler: {name: $name}) { name revision } }`
	answers := make([]answer, 2)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			answers[i] = e.post("app1", update, map[string]any{"rev": rev, "name": fmt.Sprint("writer ", i)})
		})
	}
	wg.Wait()
	won, lost := answers[0], answers[1]
	if won.Data["updateHandler"] == nil {
		won, lost = lost, won
	}
	winner, _ := won.Data["updateHandler"].(map[string]any)
	if winner == nil || len(won.Errors) > 0 {
		t.Fatalf("neither writer won: %s / %s", answers[0].raw, answers[1].raw)
	}
	if len(lost.Errors) != 1 || lost.Errors[0].Extensions["code"] != CodeConflict || lost.Errors[0].Extensions["currentRevision"] != winner["revision"] {
		t.Fatalf("the other writer: %s; want CONFLICT at revision %v", lost.raw, winner["revision"])
	}
	stored := e.post("app1", `{ handler(intentId: "LaunchRequest") { name revision } }`, nil)
	if got := stored.Data["handler"].(map[string]any); got["name"] != winner["name"] || got["revision"] != winner["revision"] {
		t.Errorf("stored %v; the winner wrote %v", got, winner)
	}
	// Without ifRevision a write applies to whatever is there.
	if a := e.post("app1", update, map[string]any{"name": "last"}); len(a.Errors) > 0 {
		t.Errorf("unconditional update: %s", a.raw)
	}

	log, err := e.store.AuditLog(t.Context(), content.AuditFilter{AppID: "app-1", Kind: content.KindHandler, ID: "LaunchRequest"})
	// The refused write left no entry: it rolled back with its change.
	if err != nil || len(log) != 3 || log[2].Operation != "import" {
		t.Fatalf("audit log of the handler: %+v, %v; want the two updates made, then the import that created it", log, err)
	}
	for _, entry := range log[:2] {
		if entry.Operation != "updateHandler" || entry.Actor.TokenID == "" || entry.Actor.LocalUser != "" {
			t.Errorf("entry %+v; want updateHandler by a token", entry)
		}
		if strings.Contains(fmt.Sprintf("%+v", entry), e.tokens["app1"]) {
			t.Errorf("an audit entry holds the token's secret: %+v", entry)
		}
	}
}
