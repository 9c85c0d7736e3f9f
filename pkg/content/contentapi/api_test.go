package contentapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/internal/fixture"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/bundle"
	"github.com/assistantcms/cms/pkg/content/contentdb"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// The tests run the API on the real SQLite store and the real token
// checks; only the listener is in-process.

const fixtureBundle = `{
 "organizations": [{"id": "org-1", "name": "One"}, {"id": "org-2", "name": "Two"}],
 "apps": [
  {"appId": "app-1", "organizationId": "org-1", "name": "App one", "channels": [{"id": "web", "type": "CHAT", "key": "k1"}], "invocationName": "one"},
  {"appId": "app-2", "organizationId": "org-1", "name": "App two"},
  {"appId": "app-3", "organizationId": "org-2", "name": "App three", "channels": [{"id": "web", "key": "k3"}]}
 ],
 "documents": [
  {"appId": "app-1", "id": "puncture", "title": "Fixing a puncture", "uri": "https://example.com/puncture",
   "document": "Take the wheel out and find the hole.\n\nPatch the inner tube, or fit a new tube, then pump the tyre up to the pressure printed on its sidewall."},
  {"appId": "app-1", "id": "riverside", "title": "Riverside store", "uri": "https://example.com/riverside", "location": "riverside",
   "document": "The riverside store has free parking behind the building. It opens at 8 am at weekends."},
  {"appId": "app-1", "id": "downtown", "title": "Downtown store", "uri": "https://example.com/downtown", "location": "downtown",
   "document": "Parking downtown is in the Market Street garage, two minutes away."},
  {"appId": "app-2", "id": "secret", "title": "Only app two", "document": "Puncture secrets of app two."}
 ],
 "faqs": [
  {"appId": "app-1", "id": "returns", "name": "Return policy", "questions": ["Can I return a bike?", "What is your return policy?"],
   "answer": "You can return an unridden bike within 30 days.", "url": "https://example.com/returns"},
  {"appId": "app-1", "id": "hours", "name": "Opening hours", "questions": ["When do you open?"], "answer": "At nine on weekdays."}
 ],
 "intents": [
  {"appId": "app-1", "intentId": "OrderStatus", "utterancePatterns": ["where is my order", "track order ${number}"]}
 ],
 "handlers": [
  {"appId": "app-1", "intentId": "LaunchRequest", "name": "Launch", "type": "InSessionIntent",
   "content": {"LaunchRequest": [{"outputSpeech": {"displayText": "Hi", "ssml": "<speak>Hi</speak>"}}]},
   "forward": {"HelpIntent": [{"intentId": "HelpIntent", "type": "START"}]}, "data": {"n": 1.50}, "futureField": [true, null]},
  {"appId": "app-1", "intentId": "HelpIntent", "name": "Help"},
  {"appId": "app-2", "intentId": "OtherApp", "name": "Other"}
 ],
 "entities": [
  {"appId": "app-1", "entityId": "COLOR", "displayName": "Color", "type": "VALUE_SYNONYMS", "values": [{"name": "red", "synonyms": ["crimson"]}]}
 ]
}`

type env struct {
	t      *testing.T
	srv    *httptest.Server
	store  *contentdb.DB
	svc    *Service
	tokens map[string]string // name -> secret
}

func newEnv(t *testing.T, cfg ServiceConfig) *env {
	t.Helper()
	return newEnvWith(t, fixtureBundle, map[string]tenancy.Token{
		"app1": {OrganizationID: "org-1", AppID: "app-1"},
		"app2": {OrganizationID: "org-1", AppID: "app-2"},
		"org1": {OrganizationID: "org-1"},
		"org2": {OrganizationID: "org-2"},
	}, cfg)
}

// newEnvWith serves the bundle with the named tokens issued.
func newEnvWith(t *testing.T, bundleJSON string, toks map[string]tenancy.Token, cfg ServiceConfig) *env {
	t.Helper()
	store, tokens := fixture.Open(t, bundleJSON, toks)
	e := &env{t: t, store: store, tokens: tokens}
	var err error
	e.svc, err = NewService(cfg, store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(e.svc.Handler())
	t.Cleanup(e.srv.Close)
	return e
}

type response struct {
	status int
	header http.Header
	body   string
}

func (e *env) get(path, token string, headers ...string) response {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+e.tokens[token])
	}
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

func decodeJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", s, err)
	}
	return m
}

func TestEndpoints(t *testing.T) {
	e := newEnv(t, ServiceConfig{})
	for _, tt := range []struct {
		name, path, token string
		status            int
		want              string // the whole body, compared as JSON
	}{
		{"handler list", "/cms/handler", "app1", 200, ""},
		{"one handler", "/cms/handler/HelpIntent", "app1", 200, ""},
		{"handler of another app", "/cms/handler/OtherApp", "app1", 404,
			`{"errorType":"HandledError","httpStatus":404,"message":"Handler not found."}`},
		{"missing handler", "/cms/handler/Nope", "app1", 404,
			`{"errorType":"HandledError","httpStatus":404,"message":"Handler not found."}`},
		{"missing entity", "/cms/entity/NOPE", "app1", 404,
			`{"errorType":"HandledError","httpStatus":404,"message":"Entity not found."}`},
		{"no token", "/cms/handler", "", 401,
			`{"errorType":"HandledError","httpStatus":401,"message":"Unauthorized"}`},
		{"app token, foreign appId", "/cms/handler?appId=app-2", "app1", 403, ""},
		{"org token without appId", "/cms/handler", "org1", 400, ""},
		{"org token, empty appId", "/cms/handler?appId=", "org1", 400, ""},
		{"org token, app of another org", "/cms/handler/LaunchRequest?appId=app-3", "org1", 403, ""},
		{"org token, unknown app", "/cms/handler?appId=ghost", "org1", 403, ""},
		{"org token, own app", "/cms/handler/OtherApp?appId=app-2", "org1", 200, ""},
		{"unknown route", "/cms/nothing", "app1", 404, `{"errorType":"HandledError","httpStatus":404,"message":"Not found."}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.get(tt.path, tt.token)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d; body %s", r.status, tt.status, r.body)
			}
			m := decodeJSON(t, r.body)
			if r.status >= 400 {
				// Every error has the same fields.
				if m["errorType"] != "HandledError" || m["httpStatus"] != float64(tt.status) || m["message"] == "" {
					t.Errorf("error body %s", r.body)
				}
			}
			if tt.want != "" {
				if w := decodeJSON(t, tt.want); !jsonSame(m, w) {
					t.Errorf("body %s, want %s", r.body, tt.want)
				}
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
}

func jsonSame(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func TestRecordsComeBackAsWritten(t *testing.T) {
	e := newEnv(t, ServiceConfig{})
	r := e.get("/cms/handler/LaunchRequest", "app1")
	got := decodeJSON(t, r.body)["handler"].(map[string]any)
	for _, f := range []string{"createdAt", "updatedAt"} {
		if _, err := time.Parse(time.RFC3339, got[f].(string)); err != nil {
			t.Errorf("%s = %v: %v", f, got[f], err)
		}
		delete(got, f)
	}
	want := decodeJSON(t, `{"appId": "app-1", "organizationId": "org-1", "intentId": "LaunchRequest", "name": "Launch", "type": "InSessionIntent",
	 "content": {"LaunchRequest": [{"outputSpeech": {"displayText": "Hi", "ssml": "<speak>Hi</speak>"}}]},
	 "forward": {"HelpIntent": [{"intentId": "HelpIntent", "type": "START"}]}, "data": {"n": 1.50}, "futureField": [true, null]}`)
	if !jsonSame(got, want) {
		t.Errorf("handler\n got %v\nwant %v", got, want)
	}
	if !strings.Contains(r.body, `"ssml":"<speak>Hi</speak>"`) {
		t.Errorf("markup was escaped: %s", r.body)
	}

	list := decodeJSON(t, e.get("/cms/handler", "app1").body)["handlers"].([]any)
	var ids []string
	for _, h := range list {
		ids = append(ids, h.(map[string]any)["intentId"].(string))
	}
	if strings.Join(ids, ",") != "HelpIntent,LaunchRequest" {
		t.Errorf("handler list order %v, want by intentId", ids)
	}

	app := decodeJSON(t, e.get("/cms/app", "app1").body)["app"].(map[string]any)
	if app["appId"] != "app-1" || app["name"] != "App one" || app["invocationName"] != "one" || app["organizationId"] != "org-1" {
		t.Errorf("app %v", app)
	}
	if ch := app["channels"].([]any); len(ch) != 1 || ch[0].(map[string]any)["key"] != "k1" {
		t.Errorf("app channels %v", app["channels"])
	}
	ents := decodeJSON(t, e.get("/cms/entity", "app1").body)["entities"].([]any)
	if len(ents) != 1 || ents[0].(map[string]any)["entityId"] != "COLOR" {
		t.Errorf("entities %v", ents)
	}
	ent := decodeJSON(t, e.get("/cms/entity/COLOR", "app1").body)["entity"].(map[string]any)
	if v := ent["values"].([]any)[0].(map[string]any); v["name"] != "red" {
		t.Errorf("entity %v", ent)
	}
	// An app with nothing yet lists [] rather than null.
	if b := e.get("/cms/entity?appId=app-2", "org1").body; !jsonSame(decodeJSON(t, b), map[string]any{"entities": []any{}}) {
		t.Errorf("empty entity list %s", b)
	}
}

func TestHeaderSpellings(t *testing.T) {
	e := newEnv(t, ServiceConfig{})
	for _, h := range [][2]string{
		{"Authorization", "Bearer "},
		{"Authorize", "Bearer "},
		{"Authorization", "bearer "},
		{"Authorize", "BEARER "},
	} {
		r := e.get("/cms/handler", "", h[0], h[1]+e.tokens["app1"])
		if r.status != 200 {
			t.Errorf("%s: %s... answered %d", h[0], h[1], r.status)
		}
	}
	if r := e.get("/cms/handler?token="+e.tokens["app1"], ""); r.status != 401 {
		t.Errorf("a token in the query string was accepted: %d", r.status)
	}
	// Both headers: the one holding a Bearer token counts (a proxy may add
	// its own Authorization); with two, Authorization's.
	for _, tt := range []struct {
		name, authorization, authz string
		status                     int
		app                        string
	}{
		{"Basic Authorization, Bearer Authorize", "Basic abc", "Bearer " + e.tokens["app1"], 200, "app-1"},
		{"Bearer Authorization, Basic Authorize", "bearer " + e.tokens["app2"], "Basic abc", 200, "app-2"},
		{"both Bearer", "Bearer " + e.tokens["app2"], "Bearer " + e.tokens["app1"], 200, "app-2"},
		{"both Bearer, Authorization's not a token", "Bearer nope", "Bearer " + e.tokens["app1"], 401, ""},
		{"neither Bearer", "Basic abc", "Token " + e.tokens["app1"], 401, ""},
	} {
		r := e.get("/cms/app", "", "Authorization", tt.authorization, "Authorize", tt.authz)
		if r.status != tt.status || (tt.app != "" && !strings.Contains(r.body, `"appId":"`+tt.app+`"`)) {
			t.Errorf("%s: %d %s", tt.name, r.status, r.body)
		}
	}
}

func TestETagAndCaching(t *testing.T) {
	e := newEnv(t, ServiceConfig{API: Config{RefreshInterval: time.Hour}})
	first := e.get("/cms/handler/HelpIntent", "app1")
	// A record's tag is its revision, as GraphQL's revision field tells.
	etag := first.header.Get("ETag")
	stored, err := e.store.Record(t.Context(), "app-1", content.KindHandler, "HelpIntent")
	if err != nil || etag != fmt.Sprintf(`"r%d"`, stored.Revision) {
		t.Fatalf("ETag %q of revision %d (%v)", etag, stored.Revision, err)
	}
	if cc := first.header.Get("Cache-Control"); cc != "private, max-age=10, must-revalidate" {
		t.Errorf("Cache-Control %q", cc)
	}
	for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
		r := e.get("/cms/handler/HelpIntent", "app1", "If-None-Match", inm)
		if r.status != http.StatusNotModified || r.body != "" || r.header.Get("ETag") != etag {
			t.Errorf("If-None-Match %s: %d %q", inm, r.status, r.body)
		}
	}
	if r := e.get("/cms/handler/HelpIntent", "app1", "If-None-Match", `"stale"`); r.status != 200 {
		t.Errorf("a stale ETag got %d", r.status)
	}
	// Lists have their own tags; the same content gives the same tag.
	l1, l2 := e.get("/cms/handler", "app1"), e.get("/cms/handler", "app1")
	if l1.header.Get("ETag") == etag || l1.header.Get("ETag") != l2.header.Get("ETag") {
		t.Errorf("list ETags %q %q", l1.header.Get("ETag"), l2.header.Get("ETag"))
	}

	// A change shows once the app is invalidated (writes through this
	// process) or after the refresh interval (writes by other processes).
	changed := `{"apps":[{"appId":"app-1","organizationId":"org-1","name":"App one","channels":[{"id":"web","type":"CHAT","key":"k1"}],"invocationName":"one"}],
	 "handlers":[{"appId":"app-1","intentId":"HelpIntent","name":"Help, changed"}]}`
	f, err := bundle.Read(strings.NewReader(changed), bundle.JSON)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Import(contenttest.Acting(context.Background()), &f.Bundle, nil); err != nil {
		t.Fatal(err)
	}
	if r := e.get("/cms/handler/HelpIntent", "app1", "If-None-Match", etag); r.status != http.StatusNotModified {
		t.Errorf("before the refresh the cached copy is served: %d", r.status)
	}
	e.svc.API().Invalidate("app-1")
	r := e.get("/cms/handler/HelpIntent", "app1", "If-None-Match", etag)
	if r.status != 200 || r.header.Get("ETag") == etag || !strings.Contains(r.body, "Help, changed") {
		t.Errorf("after the change: %d %q %s", r.status, r.header.Get("ETag"), r.body)
	}
}

func TestRefreshIntervalPicksUpOtherWriters(t *testing.T) {
	e := newEnv(t, ServiceConfig{API: Config{RefreshInterval: time.Millisecond}})
	before := e.get("/cms/entity/COLOR", "app1")
	f, err := bundle.Read(strings.NewReader(`{"entities":[{"appId":"app-1","entityId":"COLOR","values":[{"name":"blue"}]}]}`), bundle.JSON)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Import(contenttest.Acting(context.Background()), &f.Bundle, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := e.get("/cms/entity/COLOR", "app1")
		if strings.Contains(r.body, `"blue"`) {
			if r.header.Get("ETag") == before.header.Get("ETag") {
				t.Errorf("the ETag did not change with the content")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the change did not show within 5s: %s", r.body)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestRequestIDs(t *testing.T) {
	e := newEnv(t, ServiceConfig{})
	r := e.get("/cms/handler", "app1")
	if id := r.header.Get("X-Request-Id"); len(id) != 24 {
		t.Errorf("generated request ID %q", id)
	}
	if r := e.get("/cms/handler", "app1", "X-Request-Id", "abc-123"); r.header.Get("X-Request-Id") != "abc-123" {
		t.Errorf("the caller's request ID was not kept: %q", r.header.Get("X-Request-Id"))
	}
	if r := e.get("/cms/handler", "app1", "X-Request-Id", "bad id\twith spaces"); r.header.Get("X-Request-Id") == "bad id\twith spaces" {
		t.Errorf("an unsafe request ID was echoed")
	}
}

func TestRateLimit(t *testing.T) {
	e := newEnv(t, ServiceConfig{RateLimitRPS: 1, RateLimitBurst: 3})
	var limited response
	for range 5 {
		if r := e.get("/cms/handler", "app1"); r.status == http.StatusTooManyRequests {
			limited = r
			break
		}
	}
	if limited.status != http.StatusTooManyRequests || limited.header.Get("Retry-After") == "" {
		t.Fatalf("no 429 with Retry-After after the burst: %+v", limited)
	}
	if m := decodeJSON(t, limited.body); m["httpStatus"] != float64(429) {
		t.Errorf("429 body %s", limited.body)
	}
	// Another token keeps its own budget.
	if r := e.get("/cms/handler", "app2"); r.status != 200 {
		t.Errorf("another token was limited too: %d", r.status)
	}
}

func TestMetricsAndHealth(t *testing.T) {
	// No outage grace: readiness follows the database at once (the grace
	// has its own test).
	e := newEnv(t, ServiceConfig{API: Config{OutageGrace: -1}})
	e.get("/cms/handler/HelpIntent", "app1")
	e.get("/cms/handler/Nope", "app1")
	m := e.get("/metrics", "")
	for _, want := range []string{
		`cms_api_requests_total{code="200",method="GET",route="/cms/handler/:id"} 1`,
		`cms_api_requests_total{code="404",method="GET",route="/cms/handler/:id"} 1`,
		`cms_api_request_duration_seconds_count{method="GET",route="/cms/handler/:id"} 2`,
	} {
		if !strings.Contains(m.body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if r := e.get("/healthz", ""); r.status != 200 {
		t.Errorf("/healthz %d", r.status)
	}
	if r := e.get("/readyz", ""); r.status != 200 {
		t.Errorf("/readyz %d %s", r.status, r.body)
	}
	e.store.Close()
	// Readiness results are cached for a second.
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := e.get("/readyz", "")
		if r.status == http.StatusServiceUnavailable && strings.Contains(r.body, "content_db") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz with the database closed: %d %s", r.status, r.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestMethodNotAllowed(t *testing.T) {
	e := newEnv(t, ServiceConfig{})
	req, _ := http.NewRequest(http.MethodDelete, e.srv.URL+"/cms/handler", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("DELETE /cms/handler: %d", resp.StatusCode)
	}
}

func TestETagMatches(t *testing.T) {
	for _, tt := range []struct {
		header string
		want   bool
	}{
		{"", false}, {`"a"`, true}, {`W/"a"`, true}, {`"b", "a"`, true}, {`"b"`, false}, {"*", true}, {`"a`, false},
	} {
		if got := etagMatches(tt.header, `"a"`); got != tt.want {
			t.Errorf("etagMatches(%q) = %v", tt.header, got)
		}
	}
}

func TestStoreDown(t *testing.T) {
	for _, tc := range []struct {
		name          string
		grace         time.Duration
		cached, other int // statuses with the database closed
	}{
		{"cached answers through the grace", 0, http.StatusOK, http.StatusServiceUnavailable},
		{"no grace", -1, http.StatusServiceUnavailable, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, ServiceConfig{API: Config{RefreshInterval: time.Nanosecond, OutageGrace: tc.grace}})
			if r := e.get("/cms/handler/HelpIntent", "app1"); r.status != 200 {
				t.Fatalf("before: %d", r.status)
			}
			e.store.Close()
			for path, want := range map[string]int{"/cms/handler/HelpIntent": tc.cached, "/cms/entity/COLOR": tc.other} {
				r := e.get(path, "app1")
				if r.status != want {
					t.Errorf("%s with the database closed: %d %s, want %d", path, r.status, r.body, want)
				}
				if m := decodeJSON(t, r.body); want == http.StatusServiceUnavailable && m["errorType"] != "ServerError" {
					t.Errorf("%s: body %s", path, r.body)
				}
			}
		})
	}
}

func TestGraphQLChangesShowInRESTAtOnce(t *testing.T) {
	e := newEnv(t, ServiceConfig{API: Config{RefreshInterval: time.Hour}})
	before := e.get("/cms/entity/COLOR", "app1")
	body := `{"query":"mutation { replaceEntityValues(entityId: \"COLOR\", values: [{name: \"blue\"}]) { entityId } }"}`
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/cms/graphql", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e.tokens["app1"])
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.Contains(string(answer), "errors") {
		t.Fatalf("mutation: %d %s", resp.StatusCode, answer)
	}
	after := e.get("/cms/entity/COLOR", "app1", "If-None-Match", before.header.Get("ETag"))
	if after.status != 200 || after.header.Get("ETag") == before.header.Get("ETag") || !strings.Contains(after.body, `"blue"`) {
		t.Errorf("REST after the mutation: %d %q %s", after.status, after.header.Get("ETag"), after.body)
	}
	// The endpoint counts in the request metrics like any route.
	if m := e.get("/metrics", ""); !strings.Contains(m.body, `cms_api_requests_total{code="200",method="POST",route="/cms/graphql"} 1`) {
		t.Errorf("metrics lack the GraphQL request")
	}
}

// TestRequestIDsTellNothing: request IDs are answered to every client, so
// they must not count: no two of many share a prefix (a per-process
// prefix and a counter would), none repeats, and each is a valid ID.
func TestRequestIDsTellNothing(t *testing.T) {
	seen, prefixes := map[string]bool{}, map[string]string{}
	for range 2000 {
		id := newRequestID()
		if len(id) != 24 || !validRequestID(id) || seen[id] {
			t.Fatalf("request ID %q (length %d) is invalid or repeated", id, len(id))
		}
		seen[id] = true
		// 48 random bits: a shared prefix among 2,000 is a 1 in 10^8 chance.
		if other, ok := prefixes[id[:12]]; ok {
			t.Fatalf("request IDs %s and %s share their first half: they count", other, id)
		}
		prefixes[id[:12]] = id
	}
}
