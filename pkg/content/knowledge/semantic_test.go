package knowledge

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/embedstandin"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/embeddings"
)

// semanticBase builds a small base whose content is embedded by a local
// stand-in of an embeddings endpoint, through a cache.
func semanticBase(t *testing.T, srv *embedstandin.Server, cache *embeddings.Cache, docs []content.Record, opts ...func(*Options)) *Base {
	t.Helper()
	client, err := embeddings.New(embeddings.Config{URL: srv.Start(t), Model: "standin"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Embedder: embeddings.Cached{Cache: cache, Embedder: client}}
	for _, f := range opts {
		f(&o)
	}
	b, err := New(Content{Documents: docs, FAQs: []content.Record{
		rec(content.KindFAQ, "battery", `{"name":"Battery","questions":["How long does an e-bike battery last?"],"answer":"About 800 charges."}`),
		rec(content.KindFAQ, "hours", `{"name":"Hours","questions":["When do you open?"],"answer":"At nine."}`),
	}}, o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var semanticDocs = []content.Record{
	rec(content.KindDocument, "battery", `{"title":"Battery care","uri":"u1","document":"Charge the battery indoors and store it half full."}`),
	rec(content.KindDocument, "chain", `{"title":"Chain care","uri":"u2","document":"Clean and oil the chain weekly.","location":"riverside"}`),
}

// TestSemanticRetrieval: with an embeddings endpoint, a question whose
// words match nothing lexically ("batrey" is two edits from "battery")
// finds its document and FAQ by meaning; the location filter holds; the
// lexical answer is served, and the failure reported, when the endpoint
// fails.
func TestSemanticRetrieval(t *testing.T) {
	srv := embedstandin.New(64)
	b := semanticBase(t, srv, embeddings.NewCache(0), semanticDocs)
	ctx := context.Background()
	if err := b.WaitSemantic(ctx); err != nil {
		t.Fatal(err)
	}
	if !b.Semantic() {
		t.Fatal("Semantic() is false with an embedder")
	}
	const question = "batrey storidge"
	if got := b.Search(question, ""); len(got.Documents) != 0 {
		t.Fatalf("lexically, %q should find nothing: %+v", question, got.Documents)
	}
	q := b.Understand(ctx, question)
	if q.Fallback != nil {
		t.Fatal(q.Fallback)
	}
	res := b.SearchQuery(q, "")
	if len(res.Documents) == 0 || res.Documents[0].Title != "Battery care" {
		t.Fatalf("by meaning: %+v", res.Documents)
	}
	if len(res.Documents[0].Highlights) != 0 {
		t.Errorf("a document found by meaning alone has no words to highlight: %+v", res.Documents[0].Highlights)
	}
	if docs := b.SearchQuery(q, "riverside").Documents; len(docs) != 1 || docs[0].Title != "Chain care" {
		t.Errorf("location riverside: %+v, want Chain care alone", docs)
	}
	faqs := b.FAQsQuery(b.Understand(ctx, "how long will the batrey last"), 1)
	if len(faqs.FAQ) != 1 || faqs.FAQ[0].Name != "Battery" || faqs.Total < 1 || faqs.FAQ[0].Score <= 0 {
		t.Errorf("FAQ by meaning: %+v", faqs)
	}
	// A word matched lexically still ranks its document first.
	if res := b.SearchQuery(b.Understand(ctx, "chain"), ""); len(res.Documents) == 0 || res.Documents[0].Title != "Chain care" || len(res.Documents[0].Highlights) == 0 {
		t.Errorf("lexical match with fusion: %+v", res.Documents)
	}

	srv.Fail(503)
	q = b.Understand(ctx, question+" please") // not cached
	var se *embeddings.StatusError
	if !errors.As(q.Fallback, &se) || se.StatusCode != 503 {
		t.Fatalf("a failing endpoint must be the fallback's reason: %v", q.Fallback)
	}
	if res := b.SearchQuery(q, ""); len(res.Documents) != 0 {
		t.Errorf("the fallback answers lexically: %+v", res.Documents)
	}
	srv.Fail(0)
	if q := b.Understand(ctx, "chain"); q.Fallback != nil {
		t.Errorf("after the endpoint recovers: %v", q.Fallback)
	}
}

// TestSemanticBuildRetry: content that could not be embedded is answered
// lexically, with the reason, and embedded again once the wait is over.
func TestSemanticBuildRetry(t *testing.T) {
	srv := embedstandin.New(32)
	srv.Fail(500)
	b := semanticBase(t, srv, embeddings.NewCache(0), semanticDocs)
	ctx := context.Background()
	if err := b.WaitSemantic(ctx); err == nil {
		t.Fatal("the build must fail while the endpoint does")
	}
	if q := b.Understand(ctx, "chain"); q.Fallback == nil || errors.Is(q.Fallback, ErrIndexing) {
		t.Fatalf("fallback reason: %v", q.Fallback)
	}
	srv.Fail(0)
	// Still within the wait: no new build.
	if q := b.Understand(ctx, "chain"); q.Fallback == nil {
		t.Fatal("a build ran again before its wait was over")
	}
	b.sem.mu.Lock()
	b.sem.next = time.Time{} // the wait is over
	b.sem.mu.Unlock()
	if q := b.Understand(ctx, "chain"); !errors.Is(q.Fallback, ErrIndexing) && q.Fallback != nil {
		t.Fatalf("the question that starts the new build: %v", q.Fallback)
	}
	if err := b.WaitSemantic(ctx); err != nil {
		t.Fatal(err)
	}
	if q := b.Understand(ctx, "chain"); q.Fallback != nil {
		t.Fatal(q.Fallback)
	}
}

// TestSemanticCacheByContent: the base of a new revision embeds only the
// texts that changed.
func TestSemanticCacheByContent(t *testing.T) {
	srv := embedstandin.New(32)
	cache := embeddings.NewCache(0)
	ctx := context.Background()
	if err := semanticBase(t, srv, cache, semanticDocs).WaitSemantic(ctx); err != nil {
		t.Fatal(err)
	}
	first := srv.Inputs()
	// Two documents' leads and passages (each document is one passage),
	// two FAQ questions and their answers.
	if first != 8 {
		t.Fatalf("first build embedded %d texts, want 8", first)
	}
	changed := append([]content.Record{}, semanticDocs...)
	changed[1] = rec(content.KindDocument, "chain", `{"title":"Chain care","uri":"u2","document":"Clean the chain every week."}`)
	if err := semanticBase(t, srv, cache, changed).WaitSemantic(ctx); err != nil {
		t.Fatal(err)
	}
	if got := srv.Inputs() - first; got != 2 {
		t.Errorf("the next revision embedded %d texts, want the 2 that changed (the lead and passage of the document)", got)
	}
}

// TestSemanticMinSimilarity: items less similar to the question than the
// floor are not ranked by meaning, so nonsense finds nothing, as it does
// lexically; with no floor, the nearest are ranked whatever they are.
func TestSemanticMinSimilarity(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		floor float64
		found bool
	}{{0, true}, {0.9, false}} {
		b := semanticBase(t, embedstandin.New(64), embeddings.NewCache(0), semanticDocs, func(o *Options) { o.MinSimilarity = tc.floor })
		if err := b.WaitSemantic(ctx); err != nil {
			t.Fatal(err)
		}
		q := b.Understand(ctx, "qqqq zzzz xyzzy")
		docs, faqs := b.SearchQuery(q, "").Documents, b.FAQsQuery(q, 10)
		if (len(docs) > 0) != tc.found || (len(faqs.FAQ) > 0) != tc.found || (faqs.Total > 0) != tc.found {
			t.Errorf("floor %v: %d documents, %d FAQs (total %d); want found %v", tc.floor, len(docs), len(faqs.FAQ), faqs.Total, tc.found)
		}
	}
}
