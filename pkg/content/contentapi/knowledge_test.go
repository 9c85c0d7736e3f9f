package contentapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/internal/embedstandin"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/bundle"
	"github.com/assistantcms/cms/pkg/content/embeddings"
	"github.com/assistantcms/cms/pkg/content/knowledge"
	"github.com/assistantcms/cms/pkg/tenancy"
)

func TestSearchEndpoint(t *testing.T) {
	e := newEnv(t, ServiceConfig{})
	r := e.get("/cms/search?question=how+to+patch+an+innr+tube", "app1") // with a typo
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var res knowledge.SearchResult
	if err := json.Unmarshal([]byte(r.body), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Documents) == 0 || res.Documents[0].Title != "Fixing a puncture" || len(res.Documents[0].Highlights) == 0 {
		t.Fatalf("documents %+v", res.Documents)
	}
	d := res.Documents[0]
	var words []string
	for _, h := range d.Highlights {
		words = append(words, d.Document[h.BeginOffset:h.EndOffset]) // ASCII: UTF-16 offsets are byte offsets
	}
	if strings.Join(words, ",") != "Patch,inner,tube,tube" {
		t.Errorf("highlights cover %q", words)
	}
	for _, doc := range res.Documents {
		if doc.Title == "Only app two" {
			t.Errorf("a document of another app was found")
		}
	}
	if len(res.Suggested) == 0 || res.Suggested[0].TopAnswer == "" || res.Suggested[0].MatchConfidence <= 0 {
		t.Errorf("suggested %+v", res.Suggested)
	}
	// The location filter keeps only documents of that location.
	var loc knowledge.SearchResult
	_ = json.Unmarshal([]byte(e.get("/cms/search?question=parking&locationId=riverside", "app1").body), &loc)
	if len(loc.Documents) != 1 || loc.Documents[0].Title != "Riverside store" || loc.Documents[0].Attributes["location"] != "riverside" {
		t.Errorf("riverside parking: %+v", loc.Documents)
	}
	if r := e.get("/cms/search?question=puncture&locationId=riverside", "app1"); !strings.Contains(r.body, `"documents":[]`) {
		t.Errorf("documents without a location are left out when filtering: %s", r.body)
	}
	for _, path := range []string{"/cms/search", "/cms/search?question=+", "/cms/search?question=a%00b", "/cms/search?question=%ff"} {
		if r := e.get(path, "app1"); r.status != 400 || !strings.Contains(r.body, `"field":"question"`) {
			t.Errorf("%s: %d %s", path, r.status, r.body)
		}
	}
	if r := e.get("/cms/search?question=x", "org1"); r.status != 400 {
		t.Errorf("org token without appId: %d", r.status)
	}
	if r := e.get("/cms/search?question=puncture&appId=app-2", "org1"); !strings.Contains(r.body, "Only app two") {
		t.Errorf("org token with appId: %s", r.body)
	}
}

func TestFAQEndpoint(t *testing.T) {
	e := newEnv(t, ServiceConfig{})
	r := e.get("/cms/faq/query?question=whats+your+returns+policy", "app1")
	var res knowledge.FAQResult
	if err := json.Unmarshal([]byte(r.body), &res); err != nil || r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if res.Total < 1 || res.FAQ[0].Name != "Return policy" || len(res.FAQ[0].Questions) != 2 || res.FAQ[0].Score <= 0 || res.FAQ[0].Created == "" {
		t.Errorf("faq %+v", res)
	}
	if r := e.get("/cms/faq/query?question=zebra", "app1"); r.body != `{"total":0,"faq":[]}` {
		t.Errorf("no match: %s", r.body)
	}
	if r := e.get("/cms/faq/query?question=return&size=0", "app1"); r.status != 400 {
		t.Errorf("size=0: %d", r.status)
	}
}

// knowledgeBundle has enough FAQs for a word in two of them to count as
// rare, which a search needs to match on it alone, and a FAQ answer long
// enough to be truncated.
const knowledgeBundle = `{
 "organizations": [{"id": "org-1", "name": "One"}],
 "apps": [{"appId": "app-1", "organizationId": "org-1", "name": "App one", "channels": [{"id": "web", "type": "CHAT", "key": "k1"}]}],
 "documents": [
  {"appId": "app-1", "id": "puncture", "title": "Fixing a puncture", "document": "Patch the inner tube, or fit a new tube."},
  {"appId": "app-1", "id": "riverside", "title": "Riverside store", "location": "riverside", "document": "The riverside store has free parking behind the building."}
 ],
 "faqs": [
  {"appId": "app-1", "id": "gift-cards", "name": "Gift cards", "questions": ["Do you sell gift cards?"],
   "answer": "Yes: <b>\"gift\" cards</b> & e-vouchers from £10 to £500 😀, sold in both stores and online; they never expire, can be topped up at any till, and are accepted for servicing, parts and new bikes alike."},
  {"appId": "app-1", "id": "gift-wrap", "name": "Gift wrapping", "questions": ["Can you gift wrap a present?"], "answer": "Yes, for £2."},
  {"appId": "app-1", "id": "repairs", "name": "Repairs", "questions": ["Do you repair bikes?"], "answer": "Our workshop repairs every make."},
  {"appId": "app-1", "id": "hours", "name": "Opening hours", "questions": ["When do you open?"], "answer": "At nine on weekdays."},
  {"appId": "app-1", "id": "parking", "name": "Parking", "questions": ["Is there parking?"], "answer": "Behind the riverside store."}
 ]
}`

func newKnowledgeEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, knowledgeBundle, map[string]tenancy.Token{"app1": {OrganizationID: "org-1", AppID: "app-1"}}, ServiceConfig{})
}

// TestFAQTotal: total counts every matching FAQ; size limits only the
// list.
func TestFAQTotal(t *testing.T) {
	e := newKnowledgeEnv(t)
	for _, tt := range []struct {
		query         string
		total, listed int
	}{
		{"question=gift", 2, 2},
		{"question=gift&size=1", 2, 1},
		{"question=gift&size=2", 2, 2},
		{"question=gift+repair&size=1", 3, 1},
		{"question=zebra&size=1", 0, 0},
	} {
		r := e.get("/cms/faq/query?"+tt.query, "app1")
		var res knowledge.FAQResult
		if err := json.Unmarshal([]byte(r.body), &res); err != nil || r.status != 200 || res.Total != tt.total || len(res.FAQ) != tt.listed {
			t.Errorf("%s: %d %s; want total %d and %d listed", tt.query, r.status, r.body, tt.total, tt.listed)
		}
	}
}

// TestSuggestionTruncatedAnswer: FAQ suggestions carry the answer and a
// truncated answer, escaped as JSON strings are.
func TestSuggestionTruncatedAnswer(t *testing.T) {
	e := newKnowledgeEnv(t)
	r := e.get("/cms/suggestions?key=k1&queryText=do+you&type=FAQ", "app1")
	var body struct{ Suggestions []knowledge.Suggestion }
	if err := json.Unmarshal([]byte(r.body), &body); err != nil || r.status != 200 || len(body.Suggestions) != 3 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	const cut = `Yes: <b>"gift" cards</b> & e-vouchers from £10 to £500 😀, sold in both stores and online; they never expire, can be topped up at any till, and are…`
	for _, s := range body.Suggestions {
		switch s.Suggestion {
		case "Do you sell gift cards?":
			if s.TruncatedAnswer != cut || !strings.HasPrefix(s.Answer, strings.TrimSuffix(cut, "…")) {
				t.Errorf("long answer: %q truncated to %q", s.Answer, s.TruncatedAnswer)
			}
		case "Do you repair bikes?", "When do you open?":
			if s.TruncatedAnswer != s.Answer || s.Answer == "" {
				t.Errorf("short answer: %+v", s)
			}
		default:
			t.Errorf("suggestion %+v", s)
		}
	}
	if !strings.Contains(r.body, `"truncatedAnswer":"Yes: \u003cb\u003e\"gift\" cards\u003c/b\u003e \u0026 e-vouchers`) {
		t.Errorf("truncatedAnswer not escaped as the other strings are: %s", r.body)
	}
	// Intent and historical suggestions have no answer to truncate.
	if r := e.get("/cms/suggestions?key=k1&queryText=do&type=INTENT", "app1"); strings.Contains(r.body, "truncatedAnswer") {
		t.Errorf("INTENT: %s", r.body)
	}
}

// TestLongQuestionsAreCut: a question or typed text over the limit is
// answered from its first maxQuestionRunes characters, cut at a word
// boundary, instead of refused.
func TestLongQuestionsAreCut(t *testing.T) {
	e := newKnowledgeEnv(t)
	// The first word is within the limit, the last beyond it; the filler
	// is words no record has.
	filler := strings.Repeat("lorem ", maxQuestionRunes/6) // 996 characters
	get := func(path string, v any) {
		t.Helper()
		r := e.get(path, "app1")
		if r.status != 200 {
			t.Fatalf("%.60s...: %d %s", path, r.status, r.body)
		}
		if err := json.Unmarshal([]byte(r.body), v); err != nil {
			t.Fatalf("%.60s...: %v: %s", path, err, r.body)
		}
	}

	var docs knowledge.SearchResult
	get("/cms/search?question="+url.QueryEscape("puncture "+filler+"parking"), &docs)
	if len(docs.Documents) != 1 || docs.Documents[0].Title != "Fixing a puncture" {
		t.Errorf("search: %+v", docs.Documents)
	}

	var faqs knowledge.FAQResult
	get("/cms/faq/query?question="+url.QueryEscape("gift "+filler+"repair"), &faqs)
	if faqs.Total != 2 {
		t.Errorf("FAQ: %+v", faqs)
	}
	// Within the limit, the last word counts.
	get("/cms/faq/query?question="+url.QueryEscape("gift "+filler[:6*17]+"repair"), &faqs)
	if faqs.Total != 3 {
		t.Errorf("FAQ within the limit: %+v", faqs)
	}

	var ans knowledge.Answer
	get("/cms/rag?question="+url.QueryEscape(strings.Repeat("riverside parking ", 100)), &ans)
	if !ans.HasAnswer {
		t.Errorf("RAG: %+v", ans)
	}

	var sugg struct{ Suggestions []knowledge.Suggestion }
	get("/cms/suggestions?key=k1&queryText="+url.QueryEscape(strings.Repeat("é", maxQuestionRunes+1)), &sugg)
	if sugg.Suggestions == nil {
		t.Errorf("suggestions: %+v", sugg)
	}
	// Cut on a rune boundary: a question of two-byte letters and emoji.
	get("/cms/faq/query?question="+url.QueryEscape(strings.Repeat("é😀", maxQuestionRunes)), &faqs)

	// Other mistakes are still refused.
	for _, path := range []string{
		"/cms/faq/query?question=" + strings.Repeat("%C3%A9", maxQuestionRunes) + "%00",
		"/cms/rag?question=" + strings.Repeat("x", 2000) + "%ff",
		"/cms/suggestions?key=k1&queryText=" + strings.Repeat("x", 2000) + "%00",
		"/cms/search?question=" + strings.Repeat("+", 2000),
	} {
		if r := e.get(path, "app1"); r.status != 400 {
			t.Errorf("%.40s...: %d %s", path, r.status, r.body)
		}
	}
}

func TestShorten(t *testing.T) {
	words := strings.Repeat("ab ", maxQuestionRunes) // 3000 characters
	for _, tt := range []struct {
		name, in, want string
	}{
		{"short", "where is my order", "where is my order"},
		{"at the limit", strings.Repeat("é", maxQuestionRunes), strings.Repeat("é", maxQuestionRunes)},
		{"one over, no spaces", strings.Repeat("é", maxQuestionRunes+1), strings.Repeat("é", maxQuestionRunes)},
		{"at a word boundary", words, strings.TrimSpace(words[:maxQuestionRunes-1])},
		{"emoji", strings.Repeat("😀", 2*maxQuestionRunes), strings.Repeat("😀", maxQuestionRunes)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := shorten(tt.in); got != tt.want {
				t.Errorf("shorten: %d runes %.30q..., want %d runes %.30q...", utf8.RuneCountInString(got), got, utf8.RuneCountInString(tt.want), tt.want)
			}
		})
	}
}

func TestRAGEndpoint(t *testing.T) {
	var calls int
	gen := generatorFunc(func(ctx context.Context, q string, ps []knowledge.Passage, temp float64) (string, error) {
		calls++
		if temp != 0.5 {
			t.Errorf("temperature %v, want the default for 'undefined'", temp)
		}
		return "Generated from " + ps[0].Title + " [1]", nil
	})
	e := newEnv(t, ServiceConfig{API: Config{Generator: gen}})
	r := e.get("/cms/rag?question=can+i+return+a+bike&temperature=undefined&useRetrievalApi=retrieve", "app1")
	var ans knowledge.Answer
	if err := json.Unmarshal([]byte(r.body), &ans); err != nil || r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if !ans.HasAnswer || ans.Result != "Generated from Return policy [1]" || len(ans.Sources) == 0 || ans.Sources[0].URL != "https://example.com/returns" || calls != 1 {
		t.Errorf("answer %+v", ans)
	}
	// Nothing relevant: no answer, and the generator is not asked.
	r = e.get("/cms/rag?question=zebra+migration", "app1")
	if err := json.Unmarshal([]byte(r.body), &ans); err != nil || ans.HasAnswer || calls != 1 {
		t.Errorf("irrelevant question: %s (generator called %d times)", r.body, calls)
	}

	// A failing generator falls back to the extractive answer.
	failing := newEnv(t, ServiceConfig{API: Config{Generator: generatorFunc(func(context.Context, string, []knowledge.Passage, float64) (string, error) {
		return "", context.DeadlineExceeded
	})}})
	r = failing.get("/cms/rag?question=where+is+riverside+parking&temperature=0.2", "app1")
	if err := json.Unmarshal([]byte(r.body), &ans); err != nil || !ans.HasAnswer || !strings.Contains(ans.Result, "free parking") || r.header.Get("X-Answer-Generator") != "fallback" {
		t.Errorf("fallback: %s %v", r.body, r.header)
	}
}

type generatorFunc func(ctx context.Context, q string, ps []knowledge.Passage, temp float64) (string, error)

func (f generatorFunc) Generate(ctx context.Context, q string, ps []knowledge.Passage, temp float64) (string, error) {
	return f(ctx, q, ps, temp)
}

func TestSuggestionsEndpoint(t *testing.T) {
	e := newEnv(t, ServiceConfig{})
	get := func(query, token string) (response, []knowledge.Suggestion) {
		r := e.get("/cms/suggestions?"+query, token)
		var body struct{ Suggestions []knowledge.Suggestion }
		_ = json.Unmarshal([]byte(r.body), &body)
		return r, body.Suggestions
	}
	r, s := get("key=k1&queryText=wher", "app1")
	if r.status != 200 || len(s) != 1 || s[0].Suggestion != "where is my order" || s[0].Type != "INTENT" || s[0].Format[0]["bold"] != (knowledge.Bold{Start: 0, End: 4}) {
		t.Errorf("INTENT: %d %s", r.status, r.body)
	}
	if r.header.Get(OmittedHeader) != "HISTORICAL" {
		t.Errorf("without a history store HISTORICAL must be reported missing: %v", r.header)
	}
	r, s = get("key=k1&queryText=can+i+ret&type=faq", "app1")
	if len(s) != 1 || s[0].Type != "FAQ" || s[0].Answer == "" || r.header.Get(OmittedHeader) != "" {
		t.Errorf("FAQ only: %s %v", r.body, r.header)
	}
	if _, s = get("key=k1&queryText=track", "app1"); len(s) != 1 || s[0].Suggestion != "track order" {
		t.Errorf("slot references are dropped from patterns: %+v", s)
	}
	for _, tt := range []struct {
		query, token string
		status       int
		field        string
	}{
		{"key=nope&queryText=a", "app1", 404, "key"},
		{"key=k3&queryText=a", "app1", 404, "key"},
		{"key=k3&queryText=a", "org1", 404, "key"},
		{"key=k1&queryText=a", "org2", 404, "key"},
		{"key=k1&queryText=wher", "org1", 200, ""},
		{"key=k1&queryText=a&type=intent,bogus", "app1", 400, "type"},
		{"key=k1", "app1", 400, "queryText"},
		{"queryText=a", "app1", 400, "key"},
		{"key=k1&queryText=a&size=51", "app1", 400, "size"},
		{"key=k1&queryText=a", "", 401, ""},
	} {
		r, _ := get(tt.query, tt.token)
		if r.status != tt.status || (tt.field != "" && !strings.Contains(r.body, `"field":"`+tt.field+`"`)) {
			t.Errorf("%s as %q: %d %s", tt.query, tt.token, r.status, r.body)
		}
	}
	// Another organization's key and a key nobody has are answered
	// alike, so that trying keys tells nothing of which exist.
	foreign, _ := get("key=k3&queryText=a", "app1")
	unknown, _ := get("key=k9&queryText=a", "app1")
	if foreign.status != unknown.status || foreign.body != unknown.body {
		t.Errorf("a foreign key answers %d %s, an unknown one %d %s", foreign.status, foreign.body, unknown.status, unknown.body)
	}
	if r, _ := get("key=k1&queryText=a&type=intent,bogus", "app1"); !strings.Contains(r.body, "INTENT, FAQ or HISTORICAL") {
		t.Errorf("the 400 must name the valid types: %s", r.body)
	}
}

func TestKnowledgeFollowsContentChanges(t *testing.T) {
	e := newEnv(t, ServiceConfig{API: Config{RefreshInterval: time.Millisecond}})
	if r := e.get("/cms/faq/query?question=gift+cards", "app1"); r.body != `{"total":0,"faq":[]}` {
		t.Fatalf("before: %s", r.body)
	}
	f, err := bundle.Read(strings.NewReader(`{"faqs":[{"appId":"app-1","id":"gift","questions":["Do you sell gift cards?"],"answer":"Yes, from 10 to 500."}],
		"intents":[{"appId":"app-1","intentId":"Gift","utterancePatterns":["buy a gift card"]}]}`), bundle.JSON)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Import(contenttest.Acting(context.Background()), &f.Bundle, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(e.get("/cms/faq/query?question=gift+cards", "app1").body, "Yes, from 10") {
		if time.Now().After(deadline) {
			t.Fatal("the new FAQ was not found within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.Contains(e.get("/cms/suggestions?key=k1&queryText=buy+a", "app1").body, "buy a gift card") {
		t.Errorf("the new intent's pattern is not suggested")
	}
}

func TestLenientParameters(t *testing.T) {
	for in, want := range map[string]float64{"0.2": 0.2, "undefined": 0.5, "": 0.5, "NaN": 0.5, "3": 0.5, "-1": 0.5, " 1.5 ": 1.5, "0": 0} {
		if got := temperature(in); got != want {
			t.Errorf("temperature(%q) = %v, want %v", in, got, want)
		}
	}
	for _, tt := range []struct {
		in   string
		want string
		err  bool
	}{
		{"", "FAQ,HISTORICAL,INTENT", false},
		{"intent", "INTENT", false},
		{" Faq , HISTORICAL ,", "FAQ,HISTORICAL", false},
		{"INTENT,nope", "", true},
		{",", "", true},
	} {
		kinds, err := suggestionKinds(tt.in)
		var got []string
		for _, k := range []string{"FAQ", "HISTORICAL", "INTENT"} {
			if kinds[k] {
				got = append(got, k)
			}
		}
		if (err != nil) != tt.err || strings.Join(got, ",") != tt.want {
			t.Errorf("suggestionKinds(%q) = %v, %v", tt.in, got, err)
		}
	}
}

// countingKeys answers every channel key as unknown and counts lookups.
type countingKeys struct{ n int }

func (c *countingKeys) AppByChannelKey(context.Context, string) (tenancy.App, string, error) {
	c.n++
	return tenancy.App{}, "", content.ErrNotFound
}

// TestKeyCacheKeepsOnlyShortUnknownKeys: callers make up any key they
// like, so long unknown ones are looked up each time rather than kept.
func TestKeyCacheKeepsOnlyShortUnknownKeys(t *testing.T) {
	src := &countingKeys{}
	k := &keyCache{store: src, ttl: time.Hour, entries: map[string]keyEntry{}}
	short, long := strings.Repeat("k", maxCachedUnknownKey), strings.Repeat("k", maxCachedUnknownKey+1)
	for range 2 {
		for _, key := range []string{short, long} {
			if _, _, err := k.lookup(context.Background(), key); !errors.Is(err, content.ErrNotFound) {
				t.Fatalf("lookup: %v", err)
			}
		}
	}
	if _, ok := k.entries[short]; !ok || len(k.entries) != 1 || src.n != 3 {
		t.Errorf("%d entries, %d store lookups: want the short key cached (3 lookups), the long one not", len(k.entries), src.n)
	}
}

// TestRetrievalHeader: with an embeddings endpoint configured, search and
// FAQ answers say they fused lexical and vector ranks; when the endpoint
// fails they are still answered, lexically, and say so; the metric counts
// both. Without an endpoint, no header.
func TestRetrievalHeader(t *testing.T) {
	srv := embedstandin.New(32)
	e := newSemanticEnv(t, srv, embeddings.NewCache(0))
	for path, want := range map[string]string{"/cms/search?question=free+parking": "Riverside store", "/cms/faq/query?question=return+policy": "Return policy"} {
		if r := e.get(path, "app1"); r.status != 200 || r.header.Get(RetrievalHeader) != "hybrid" || !strings.Contains(r.body, want) {
			t.Errorf("%s: %d %v %s", path, r.status, r.header, r.body)
		}
	}
	srv.Fail(http.StatusBadGateway)
	r := e.get("/cms/search?question=parking+at+weekends", "app1")
	if r.status != 200 || r.header.Get(RetrievalHeader) != "lexical-fallback" || !strings.Contains(r.body, "Riverside store") {
		t.Errorf("endpoint down: %d %v %s", r.status, r.header, r.body)
	}
	m := e.get("/metrics", "").body
	for _, want := range []string{`cms_api_retrieval_total{mode="hybrid"} 2`, `cms_api_retrieval_total{mode="lexical_fallback"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if r := newEnv(t, ServiceConfig{}).get("/cms/search?question=parking", "app1"); r.header.Get(RetrievalHeader) != "" {
		t.Errorf("lexical only, yet %s: %q", RetrievalHeader, r.header.Get(RetrievalHeader))
	}
}

// TestEmbeddingsKeptPerApp: the vectors of an app's content are cached as
// that app's, never where another app's question would find them.
func TestEmbeddingsKeptPerApp(t *testing.T) {
	cache := embeddings.NewCache(0)
	e := newSemanticEnv(t, embedstandin.New(32), cache)
	if r := e.get("/cms/search?question=free+parking", "app1"); r.status != 200 || r.header.Get(RetrievalHeader) != "hybrid" {
		t.Fatalf("search: %d %v", r.status, r.header)
	}
	if n := cache.TenantLen("app-1"); n == 0 || n != cache.Len() {
		t.Errorf("app-1 holds %d of the cache's %d vectors; want all of them", n, cache.Len())
	}
}

// newSemanticEnv serves the fixture with semantic retrieval through srv
// and cache, app-1's vectors built.
func newSemanticEnv(t *testing.T, srv *embedstandin.Server, cache *embeddings.Cache) *env {
	t.Helper()
	client, err := embeddings.New(embeddings.Config{URL: srv.Start(t), Model: "standin"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, ServiceConfig{API: Config{Knowledge: knowledge.Options{Embedder: embeddings.Cached{Cache: cache, Embedder: client}}}})
	ctx := context.Background()
	b, err := e.svc.api.base(ctx, "org-1", "app-1", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WaitSemantic(ctx); err != nil {
		t.Fatal(err)
	}
	return e
}
