package knowledge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/assistantcms/cms/pkg/content/embeddings"
	"github.com/assistantcms/cms/pkg/content/search"
)

// Embedder turns texts into vectors whose cosine similarity says how
// alike they mean (an OpenAI-compatible embeddings endpoint, through
// package embeddings' cache).
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// AppEmbedder is an Embedder shared by apps that keeps what it caches of
// each app apart, so that no app is answered from another's vectors.
type AppEmbedder interface {
	EmbedApp(ctx context.Context, app string, texts []string) ([][]float32, error)
}

// appEmbedder embeds for one app.
type appEmbedder struct {
	app string
	emb AppEmbedder
}

func (a appEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return a.emb.EmbedApp(ctx, a.app, texts)
}

// Tuning of semantic retrieval.
const (
	// DefaultQueryTimeout bounds the embedding of one question: past it,
	// the lexical answer is served.
	DefaultQueryTimeout = 2 * time.Second
	// buildTimeout bounds the embedding of an app's content.
	buildTimeout = 10 * time.Minute
	// retryAfter is how long a failed embedding of the content waits
	// before a question tries it again.
	retryAfter = 30 * time.Second
	// maxEmbedRunes is how much of a document is embedded: its start says
	// what it is about, and endpoints bound their input.
	maxEmbedRunes = 2000
	// fuseDepth is how many lexical and nearest items each ranking gives
	// the fusion.
	fuseDepth = 50
	// buildChunk is how many texts of the content go to the embedder at
	// once.
	buildChunk = 256
)

// Fallback reasons: why an answer was found lexically alone although an
// embedder is configured.
var (
	ErrIndexing = errors.New("the app's content is still being embedded")
)

// semantic is the vectors of an app's documents and FAQ questions, built
// in the background when the base is built, and again after a failure
// when a question asks for them.
type semantic struct {
	emb           Embedder
	queryTimeout  time.Duration
	minSimilarity float64
	log           *slog.Logger
	docTexts      []string
	faqTexts      []string

	mu       sync.Mutex
	docs     *embeddings.Vectors
	faqs     *embeddings.Vectors
	err      error // of the last build, until one succeeds
	next     time.Time
	building chan struct{} // closed when the running build ends; nil when none runs
}

func newSemantic(o Options, docs, faqs []search.Doc) *semantic {
	s := &semantic{emb: o.Embedder, queryTimeout: o.QueryTimeout, minSimilarity: o.MinSimilarity, log: o.Log}
	if ae, ok := o.Embedder.(AppEmbedder); ok {
		s.emb = appEmbedder{app: o.App, emb: ae}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.queryTimeout <= 0 {
		s.queryTimeout = DefaultQueryTimeout
	}
	for _, d := range docs {
		text, _ := Cut(d.Title+"\n"+d.Body, maxEmbedRunes)
		s.docTexts = append(s.docTexts, text)
	}
	for _, d := range faqs {
		s.faqTexts = append(s.faqTexts, d.Title)
	}
	s.mu.Lock()
	s.startLocked()
	s.mu.Unlock()
	return s
}

// startLocked starts a build; s.mu is held.
func (s *semantic) startLocked() {
	done := make(chan struct{})
	s.building = done
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
		defer cancel()
		start := time.Now()
		docs, faqs, err := s.build(ctx)
		if err != nil {
			s.log.Warn("embedding the app's content failed; search and FAQ answers are lexical until it succeeds",
				"err", err, "retry_after", retryAfter)
		} else {
			s.log.Info("embedded the app's content", "documents", docs.Len(), "faq_questions", faqs.Len(), "took", time.Since(start))
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.building = nil
		if err != nil {
			s.err, s.next = err, time.Now().Add(retryAfter)
			return
		}
		s.docs, s.faqs, s.err = docs, faqs, nil
		s.docTexts, s.faqTexts = nil, nil // needed no more
	}()
}

func (s *semantic) build(ctx context.Context) (docs, faqs *embeddings.Vectors, err error) {
	texts := append(append([]string{}, s.docTexts...), s.faqTexts...)
	vs := make([][]float32, 0, len(texts))
	// In parts, so that a cache behind the embedder keeps each part as it
	// comes: a build that fails part way resumes there when tried again.
	for from := 0; from < len(texts); from += buildChunk {
		part := texts[from:min(from+buildChunk, len(texts))]
		got, err := s.emb.Embed(ctx, part)
		if err != nil {
			return nil, nil, fmt.Errorf("embed the app's content (texts %d to %d of %d): %w", from+1, from+len(part), len(texts), err)
		}
		if len(got) != len(part) {
			return nil, nil, fmt.Errorf("embed the app's content: %d vectors for %d texts", len(got), len(part))
		}
		vs = append(vs, got...)
	}
	if docs, err = embeddings.NewVectors(vs[:len(s.docTexts)]); err != nil {
		return nil, nil, fmt.Errorf("document vectors: %w", err)
	}
	if faqs, err = embeddings.NewVectors(vs[len(s.docTexts):]); err != nil {
		return nil, nil, fmt.Errorf("FAQ vectors: %w", err)
	}
	return docs, faqs, nil
}

// vectors are the content's vectors, or why there are none yet; a failed
// build is tried again once retryAfter has passed.
func (s *semantic) vectors() (docs, faqs *embeddings.Vectors, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.docs != nil {
		return s.docs, s.faqs, nil
	}
	if s.building == nil && !time.Now().Before(s.next) {
		s.startLocked()
	}
	if s.building == nil && s.err != nil {
		return nil, nil, s.err
	}
	return nil, nil, ErrIndexing
}

// wait waits for the running build, if any, and reports how the last one
// ended.
func (s *semantic) wait(ctx context.Context) error {
	s.mu.Lock()
	done := s.building
	s.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Query is a question as a Base understands it: its text and, when
// semantic retrieval is configured and answers, its vector.
type Query struct {
	Text          string
	vec           []float32
	docs, faqs    *embeddings.Vectors
	minSimilarity float64
	// Fallback, when not nil, says why the question is answered lexically
	// alone although semantic retrieval is configured.
	Fallback error
}

// Semantic reports whether the base combines lexical with semantic
// retrieval (an embedder is configured).
func (b *Base) Semantic() bool { return b.sem != nil }

// Understand prepares question for Search and FAQs: with an embedder
// configured, it embeds the question (bounded by the query timeout).
func (b *Base) Understand(ctx context.Context, question string) Query {
	q := Query{Text: question}
	if b.sem == nil {
		return q
	}
	docs, faqs, err := b.sem.vectors()
	if err != nil {
		q.Fallback = err
		return q
	}
	ctx, cancel := context.WithTimeout(ctx, b.sem.queryTimeout)
	defer cancel()
	vs, err := b.sem.emb.Embed(ctx, []string{question})
	if err == nil && len(vs) != 1 {
		err = fmt.Errorf("%d vectors for one question", len(vs))
	}
	if err != nil {
		q.Fallback = fmt.Errorf("embed the question: %w", err)
		return q
	}
	q.vec, q.docs, q.faqs, q.minSimilarity = vs[0], docs, faqs, b.sem.minSimilarity
	return q
}

// WaitSemantic waits until the content's vectors are built (or their
// build failed), for callers that need semantic answers from the start.
// It returns nil at once without an embedder.
func (b *Base) WaitSemantic(ctx context.Context) error {
	if b.sem == nil {
		return nil
	}
	return b.sem.wait(ctx)
}

// fuse combines a lexical ranking with the nearest items of q's vector
// among vs, by reciprocal rank fusion, grouping items by group (each
// group counts once, by its best item). It returns the best items, at
// most limit, with their fused scores.
func fuse(q Query, vs *embeddings.Vectors, lexical []search.Result, group func(i int) string, keep func(i int) bool, limit int) []embeddings.Fused {
	ids := map[string]int{} // group -> its representative item
	rank := func(items []int) []int {
		out := make([]int, 0, len(items))
		seen := map[string]bool{}
		for _, i := range items {
			g := group(i)
			if seen[g] {
				continue
			}
			seen[g] = true
			if _, ok := ids[g]; !ok {
				ids[g] = i
			}
			out = append(out, ids[g])
		}
		return out
	}
	lex := make([]int, 0, len(lexical))
	for _, r := range lexical {
		lex = append(lex, r.Index)
	}
	var near []int
	for _, h := range vs.Nearest(q.vec, fuseDepth, keep) {
		if float64(h.Score) < q.minSimilarity {
			break // best first
		}
		near = append(near, h.Index)
	}
	return embeddings.Fuse(embeddings.DefaultRRFK, limit, []embeddings.Ranking{{Items: rank(lex), Weight: 1}, {Items: rank(near), Weight: 1}})
}
