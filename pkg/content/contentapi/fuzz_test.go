package contentapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/internal/fixture"
	"github.com/assistantcms/cms/pkg/auth"
)

// fuzzCaller is who sends a fuzzed request, and the markers its answers
// must never hold.
type fuzzCaller struct {
	name, token string
	foreign     []string
}

// FuzzKnowledgeQuery sends arbitrary raw query strings to search, FAQ,
// RAG and suggestions through the real router and store, as an app
// token, an organization token of each organization, and no token. Every
// answer must be JSON and below 500; errors must have the error shape
// with a message (and the parameter at fault for 400); without a token
// the answer is 401 whatever the query holds (tokens there are never
// read); and no 200 holds data of an app the caller cannot reach.
// "{app1}" in an input stands for app-1's real token.
func FuzzKnowledgeQuery(f *testing.F) {
	store, tokens := fixture.Open(f, isolationBundle, isolationTokens())
	id, err := auth.ParseToken(tokens["revoked"])
	if err != nil {
		f.Fatal(err)
	}
	if err := store.RevokeToken(contenttest.Acting(context.Background()), id, time.Now()); err != nil {
		f.Fatal(err)
	}
	svc, err := NewService(ServiceConfig{}, store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		f.Fatal(err)
	}
	h := svc.Handler()
	callers := []fuzzCaller{
		{"app token", tokens["app1"], []string{markerApp2, markerApp3}},
		{"organization token", tokens["org1"], []string{markerApp3}},
		{"no token", "", nil},
		{"other organization's token", tokens["org2"], []string{markerApp1, markerApp2}},
		{"revoked token", tokens["revoked"], nil},
	}
	// Callers by index in callers: 0 app token, 1 organization token, 2 no
	// token, 3 the other organization's token, 4 a revoked token.
	for _, seed := range []struct {
		who int
		raw string
	}{
		{2, ""},
		{0, "question=zebra+crossing"},
		{0, "question=where+is+the+zebra+crossing&temperature=undefined&useRetrievalApi=retrieve&size=3"},
		{1, "question=zebra&locationId=town&appId=app-1"},
		{0, "key=key-1&queryText=zebr&type=intent,FAQ&size=3"},
		{1, "key=key-1&queryText=zebr&type=historical"},
		{0, "key=key-3&queryText=zeb"},
		{1, "key=key-1&queryText=zeb&appId=app-3"},
		{1, "question=zebra&appId=app-2"},
		{1, "question=zebra&appId=app-3"},
		{3, "question=zebra&appId=app-3&key=key-3&queryText=zebra"},
		{1, "question=zebra&appId=%00"},
		{1, "question=zebra&appId="},
		{0, "question=zebra&appId=" + strings.Repeat("a", 300)},
		{0, "question=%ff%fe&locationId=%00"},
		{0, "question=a%00b&key=k%00&queryText=%ff"},
		{0, "question=" + strings.Repeat("%C3%A9", 1001)},
		{0, "question=" + strings.Repeat("%C3%A9", 1000) + "&key=key-1&queryText=" + strings.Repeat("z", 1000)},
		{0, "size=0&question=a"},
		{0, "size=99999999999999999999&question=a&key=key-1&queryText=a"},
		{0, "size=-1&question=a"},
		{0, "type=,,,&key=key-1&queryText=a"},
		{0, "question=a;b&key=key-1;queryText=z"},
		{0, "question=%zz&queryText=%&key=key-1"},
		{2, "question=zebra&token={app1}&access_token={app1}&apiKey={app1}&key=key-1&queryText=z"},
		{4, "question=zebra&key=key-1&queryText=z"},
		{0, "question=zebra&question=second&key=key-2&key=key-1&queryText=z"},
		{0, "temperature=NaN&question=zebra"},
		{0, "temperature=1e309&question=zebra+crossing"},
		{0, "key=key-1&queryText=%E2%80%AE%F0%9F%A6%93"},
		{0, "key=key-1&queryText=%ED%A0%80"},
		{0, "key=key-1&queryText=e%CC%81&type=INTENT"},
		{0, "question=%F0%9F%A6%93+zebra&key=key-1&queryText=zebr%C3%A1"},
		{1, "key=%20key-1%20&queryText=%20z"},
	} {
		f.Add(uint8(seed.who), seed.raw)
	}
	paths := []string{"/cms/search", "/cms/faq/query", "/cms/rag", "/cms/suggestions"}
	f.Fuzz(func(t *testing.T, who uint8, raw string) {
		raw = strings.ReplaceAll(raw, "{app1}", tokens["app1"])
		c := callers[int(who)%len(callers)]
		for _, path := range paths {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			// Set after parsing: the router must take any query at all,
			// including what a client library would have escaped.
			req.URL.RawQuery = raw
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			checkFuzzAnswer(t, c, path, raw, rec)
		}
	})
}

func checkFuzzAnswer(t *testing.T, c fuzzCaller, path, raw string, rec *httptest.ResponseRecorder) {
	t.Helper()
	status, body := rec.Code, rec.Body.String()
	where := c.name + " GET " + path + "?" + raw
	if status >= 500 {
		t.Fatalf("%s: %d %s", where, status, body)
	}
	switch status {
	case 200, 400, 401, 403, 404:
	default:
		t.Fatalf("%s: unexpected status %d %s", where, status, body)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s: Content-Type %q", where, ct)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("%s: body is not a JSON object: %v: %q", where, err, body)
	}
	if (c.token == "" || c.name == "revoked token") && status != http.StatusUnauthorized {
		t.Fatalf("%s: %d without a valid token in the header: %s", where, status, body)
	}
	if status != http.StatusOK {
		var e struct {
			ErrorType  string `json:"errorType"`
			HTTPStatus int    `json:"httpStatus"`
			Message    string `json:"message"`
			Field      string `json:"field"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.ErrorType != "HandledError" || e.HTTPStatus != status || strings.TrimSpace(e.Message) == "" {
			t.Fatalf("%s: error body %s", where, body)
		}
		for k := range m {
			if k != "errorType" && k != "httpStatus" && k != "message" && k != "field" {
				t.Fatalf("%s: error body with %q: %s", where, k, body)
			}
		}
		if status == http.StatusBadRequest && e.Field == "" {
			t.Fatalf("%s: a 400 must name the parameter at fault: %s", where, body)
		}
		// A long question or typed text is cut, never refused.
		if strings.Contains(e.Message, "longer than") {
			t.Fatalf("%s: refused for its length: %s", where, body)
		}
		return
	}
	for _, marker := range c.foreign {
		if strings.Contains(body, marker) {
			t.Fatalf("%s: the answer holds %s, data of an app this caller cannot reach: %s", where, marker, body)
		}
	}
	// The shapes the reference client reads.
	var ok bool
	switch path {
	case "/cms/search":
		var v struct{ Documents, Suggested []json.RawMessage }
		ok = json.Unmarshal(rec.Body.Bytes(), &v) == nil && v.Documents != nil && v.Suggested != nil
	case "/cms/faq/query":
		var v struct {
			Total *int
			FAQ   []json.RawMessage
		}
		ok = json.Unmarshal(rec.Body.Bytes(), &v) == nil && v.Total != nil && v.FAQ != nil && *v.Total >= len(v.FAQ)
	case "/cms/rag":
		var v struct {
			Result    *string
			HasAnswer *bool
			Sources   []json.RawMessage
		}
		ok = json.Unmarshal(rec.Body.Bytes(), &v) == nil && v.Result != nil && v.HasAnswer != nil && v.Sources != nil
	case "/cms/suggestions":
		var v struct{ Suggestions []json.RawMessage }
		ok = json.Unmarshal(rec.Body.Bytes(), &v) == nil && v.Suggestions != nil
	}
	if !ok {
		t.Fatalf("%s: answer not in its shape: %s", where, body)
	}
}
