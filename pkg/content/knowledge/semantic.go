package knowledge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
	// maxEmbedRunes bounds a document's lead (its title and start), which
	// says what the document is about; models read no more than their
	// window of it, and endpoints bound their input.
	maxEmbedRunes = 2000
	// fuseDepth is how many lexical and nearest items each ranking gives
	// the fusion.
	fuseDepth = 50
	// buildChunk is how many texts of the content go to the embedder at
	// once.
	buildChunk = 256
	// turnChunk is how many go at once when embedding takes turns
	// (Options.EmbedInTurns): fewer, so that a turn is held briefly when
	// texts are encoded rather than read.
	turnChunk = 64
	// leadWeight is the share of a document's similarity that is its
	// lead's; the rest is its best passage's. On the evaluation set the
	// lead alone ranked documents better than their best passage alone
	// (titles say what a document is about; a passage may match a detail
	// many documents share), and the two halves together best.
	leadWeight = 0.5
	// answerWeight is how much an FAQ's answer adds to the similarity of
	// its best question: measured from 0 to 0.3, a fifth ranked FAQs
	// best; the answer holds words users ask with that the questions
	// lack.
	answerWeight = 0.2
)

// Fallback reasons: why an answer was found lexically alone although an
// embedder is configured.
var (
	ErrIndexing = errors.New("the app's content is still being embedded")
)

// semantic is the vectors of an app's content, built in the background
// when the base is built, and again after a failure when a question asks
// for them.
type semantic struct {
	emb           Embedder // of questions
	contentEmb    Embedder // of the content
	queryTimeout  time.Duration
	minSimilarity float64
	log           *slog.Logger
	turn          func(ctx context.Context, work func()) error // nil: at once
	embedInTurns  bool
	// The content is planned (cut into passages, its distinct texts
	// listed) by the first build, in the background, as counting tokens
	// takes time: texts are the distinct texts to embed, plan says what
	// each stands for. Only the running build reads or writes them.
	docs, faqs []search.Doc
	answerOf   func(group string) string
	counter    TokenCounter
	texts      []string
	plan       *semIndex

	mu       sync.Mutex
	index    *semIndex // with its vectors; nil until a build succeeds
	err      error     // of the last build, until one succeeds
	next     time.Time
	building chan struct{} // closed when the running build ends; nil when none runs
	// bytes is the memory index holds, set when it is built.
	bytes atomic.Int64
}

// semIndex is the vectors of an app's content and what each stands for.
// Distinct texts are embedded once: documents sharing a paragraph share
// its vector.
type semIndex struct {
	vecs *embeddings.Vectors // one per distinct text; nil in a plan
	// docLead is each document's lead (title and start), -1 for an empty
	// document. passages are the documents' passages in order, in one
	// array as a search reads them all: document i's are from
	// passageFrom[i] to passageFrom[i+1]-1 (see docPassages).
	docLead     []int32
	passages    []passage
	passageFrom []int32
	passageVecs []int32 // of passages, apart for reading them all
	// docTexts is how many texts, the first of all, are the documents':
	// a search measures them all at once.
	docTexts int32
	// faqQuestion is the vector of each FAQ question variant (an item of
	// Base.faqs), faqGroup the number of its FAQ, and groupAnswer the
	// vector of each FAQ's answer (-1 for none).
	faqQuestion []int32
	faqGroup    []int32
	groupAnswer []int32
	groups      int
	// exactDocs and candidateDocs, but for tests that measure the
	// estimates on small content.
	exact, candidates int
	// scratch holds *queryScratch for reuse (see Query.Release): a
	// question's arrays are as long as the content is large.
	scratch *sync.Pool
}

// queryScratch is the arrays one question ranks with.
type queryScratch struct {
	sims     []float32 // by vector
	rough    []float32 // by text of the documents
	docSims  []float64 // by document
	docBest  []int
	released bool
}

// getScratch returns arrays for one question, sims all NaN.
func (sem *semIndex) getScratch() *queryScratch {
	s, _ := sem.scratch.Get().(*queryScratch)
	if s == nil {
		n := len(sem.docLead)
		s = &queryScratch{sims: make([]float32, sem.vecs.Len()), rough: make([]float32, sem.docTexts),
			docSims: make([]float64, n), docBest: make([]int, n)}
	}
	s.released = false
	nan := float32(math.NaN())
	for i := range s.sims {
		s.sims[i] = nan
	}
	return s
}

// docPassages are document i's passages, in order.
func (sem *semIndex) docPassages(i int) []passage {
	return sem.passages[sem.passageFrom[i]:sem.passageFrom[i+1]]
}

// passage is a stretch of a document's body with its vector.
type passage struct {
	vec        int32
	start, end int32 // in bytes of the body
}

// tokenCounter is what counts tokens for cutting documents into
// passages: the embedder's own counter when it has one (behind a cache
// too), else the word estimate.
func tokenCounter(e Embedder) TokenCounter {
	if tc, ok := e.(TokenCounter); ok && tc.Window() > 0 {
		return tc
	}
	if u, ok := e.(interface{ Unwrap() embeddings.Embedder }); ok {
		if tc, ok := u.Unwrap().(TokenCounter); ok && tc.Window() > 0 {
			return tc
		}
	}
	return wordCounter{}
}

// forApp is e embedding for app, apart from every other app when e can.
func forApp(e Embedder, app string) Embedder {
	if ae, ok := e.(AppEmbedder); ok {
		return appEmbedder{app: app, emb: ae}
	}
	return e
}

func newSemantic(o Options, docs, faqs []search.Doc, answerOf func(group string) string) *semantic {
	s := &semantic{emb: forApp(o.Embedder, o.App), contentEmb: forApp(o.ContentEmbedder, o.App), queryTimeout: o.QueryTimeout, minSimilarity: o.MinSimilarity, log: o.Log,
		turn: o.Turn, embedInTurns: o.EmbedInTurns && o.Turn != nil}
	if o.ContentEmbedder == nil {
		s.contentEmb = s.emb
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.queryTimeout <= 0 {
		s.queryTimeout = DefaultQueryTimeout
	}
	s.docs, s.faqs, s.answerOf, s.counter = docs, faqs, answerOf, tokenCounter(o.Embedder)
	s.mu.Lock()
	s.startLocked()
	s.mu.Unlock()
	return s
}

// planIndex lists the distinct texts to embed for docs and the FAQ
// question variants faqs, and what each stands for, counting tokens on
// up to cores goroutines.
func planIndex(tc TokenCounter, docs, faqs []search.Doc, answerOf func(group string) string, cores int) ([]string, *semIndex) {
	var texts []string
	ids := map[string]int32{}
	id := func(text string) int32 {
		if strings.TrimSpace(text) == "" {
			return -1 // nothing to mean; some endpoints refuse empty input
		}
		i, ok := ids[text]
		if !ok {
			i = int32(len(texts))
			ids[text] = i
			texts = append(texts, text)
		}
		return i
	}
	p := &semIndex{docLead: make([]int32, len(docs)), exact: exactDocs, candidates: candidateDocs, scratch: &sync.Pool{}}
	window := tc.Window()
	// Counting tokens is most of the work: documents are cut on the
	// cores given, then numbered in order.
	cuts := make([][]span, len(docs))
	var wg sync.WaitGroup
	workers := max(1, min(cores, len(docs)/64))
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(docs); i += workers {
				cuts[i] = splitPassages(docs[i].Body, tc.Tokens, window)
				runtime.Gosched() // as search.BuildWith does
			}
		})
	}
	wg.Wait()
	p.passageFrom = make([]int32, len(docs)+1)
	for i, d := range docs {
		lead, _ := Cut(strings.TrimSpace(d.Title+"\n"+d.Body), maxEmbedRunes)
		p.docLead[i] = id(lead)
		for _, sp := range cuts[i] {
			if v := id(d.Body[sp.start:sp.end]); v >= 0 {
				p.passages = append(p.passages, passage{vec: v, start: int32(sp.start), end: int32(sp.end)})
				p.passageVecs = append(p.passageVecs, v)
			}
		}
		p.passageFrom[i+1] = int32(len(p.passages))
	}
	p.docTexts = int32(len(texts))
	groups := map[string]int32{}
	p.faqQuestion = make([]int32, len(faqs))
	p.faqGroup = make([]int32, len(faqs))
	for i, f := range faqs {
		p.faqQuestion[i] = id(f.Title)
		g, ok := groups[f.Group]
		if !ok {
			g = int32(len(groups))
			groups[f.Group] = g
			p.groupAnswer = append(p.groupAnswer, id(answerOf(f.Group)))
		}
		p.faqGroup[i] = g
	}
	p.groups = len(groups)
	return texts, p
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
		index, err := s.build(ctx)
		if err != nil {
			s.log.Warn("embedding the app's content failed; search and FAQ answers are lexical until it succeeds",
				"err", err, "retry_after", retryAfter)
		} else {
			s.log.Info("embedded the app's content", "documents", len(index.docLead), "faq_questions", len(index.faqQuestion),
				"texts", index.vecs.Len(), "took", time.Since(start))
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.building = nil
		if err != nil {
			s.err, s.next = err, time.Now().Add(retryAfter)
			return
		}
		s.index, s.err = index, nil
		s.bytes.Store(index.bytes())
		s.texts = nil // needed no more
	}()
}

func (s *semantic) build(ctx context.Context) (*semIndex, error) {
	if s.plan == nil {
		cores := runtime.GOMAXPROCS(0)
		if s.turn != nil {
			cores = 1 // a turn is one core
		}
		if err := s.inTurn(ctx, func() { s.texts, s.plan = planIndex(s.counter, s.docs, s.faqs, s.answerOf, cores) }); err != nil {
			return nil, fmt.Errorf("cut the app's content into passages: %w", err)
		}
		s.docs, s.faqs, s.answerOf = nil, nil, nil // needed no more
	}
	vs := make([][]float32, 0, len(s.texts))
	chunk := buildChunk
	if s.embedInTurns {
		chunk = turnChunk
	}
	// In parts, so that a cache behind the embedder keeps each part as it
	// comes: a build that fails part way resumes there when tried again.
	for from := 0; from < len(s.texts); from += chunk {
		part := s.texts[from:min(from+chunk, len(s.texts))]
		var got [][]float32
		var err error
		embed := func() { got, err = s.contentEmb.Embed(ctx, part) }
		if !s.embedInTurns {
			embed()
		} else if terr := s.inTurn(ctx, embed); terr != nil {
			err = terr
		}
		if err != nil {
			return nil, fmt.Errorf("embed the app's content (texts %d to %d of %d): %w", from+1, from+len(part), len(s.texts), err)
		}
		if len(got) != len(part) {
			return nil, fmt.Errorf("embed the app's content: %d vectors for %d texts", len(got), len(part))
		}
		vs = append(vs, got...)
	}
	var vecs *embeddings.Vectors
	var err error
	if terr := s.inTurn(ctx, func() { vecs, err = embeddings.NewVectors(vs) }); terr != nil {
		err = terr
	}
	if err != nil {
		return nil, fmt.Errorf("content vectors: %w", err)
	}
	index := *s.plan
	index.vecs = vecs
	return &index, nil
}

// inTurn runs work in the app's turn (Options.Turn), or at once.
func (s *semantic) inTurn(ctx context.Context, work func()) error {
	if s.turn == nil {
		work()
		return nil
	}
	return s.turn(ctx, work)
}

// vectors are the content's vectors, or why there are none yet; a failed
// build is tried again once retryAfter has passed.
func (s *semantic) vectors() (*semIndex, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.index != nil {
		return s.index, nil
	}
	if s.building == nil && !time.Now().Before(s.next) {
		s.startLocked()
	}
	if s.building == nil && s.err != nil {
		return nil, s.err
	}
	return nil, ErrIndexing
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
// semantic retrieval is configured and answers, its vector, whose
// similarity to a text of the content is measured when a ranking first
// reads it. One goroutine uses a Query at a time.
type Query struct {
	Text          string
	sem           *semIndex
	probe         embeddings.Probe // the question's vector
	sims          []float32        // by vector of sem; NaN until measured
	scratch       *queryScratch    // holds sims
	minSimilarity float64
	// Fallback, when not nil, says why the question is answered lexically
	// alone although semantic retrieval is configured.
	Fallback error
	// mode ranks by meaning alone (see ByMeaning).
	mode rankMode
}

// rankMode is what a ranking uses.
type rankMode int

const (
	rankHybrid rankMode = iota
	rankVector
)

// ByMeaning returns q to be ranked by meaning alone: SearchQuery and
// FAQsQuery order the items by their similarity to the question, its
// words left out, for a caller that weighs what semantic retrieval finds
// by itself against the words' ranking (Search) and the combined one. A
// Query without the question's vector is ranked by its words still.
func (q Query) ByMeaning() Query {
	q.mode = rankVector
	return q
}

// Semantic reports whether the base combines lexical with semantic
// retrieval (an embedder is configured).
func (b *Base) Semantic() bool { return b.sem != nil }

// Understand prepares question for Search and FAQs: with an embedder
// configured, it embeds the question (bounded by the query timeout) and
// measures its similarity to the content.
func (b *Base) Understand(ctx context.Context, question string) Query {
	q := Query{Text: question}
	if b.sem == nil || strings.TrimSpace(question) == "" {
		return q // nothing to mean; some endpoints refuse empty input
	}
	index, err := b.sem.vectors()
	if err != nil {
		q.Fallback = err
		return q
	}
	ctx, cancel := context.WithTimeout(ctx, b.sem.queryTimeout)
	defer cancel()
	// A model reads no more than its window; the start says what the
	// question is about, and endpoints bound their input.
	text, _ := Cut(question, maxEmbedRunes)
	vs, err := b.sem.emb.Embed(ctx, []string{text})
	if err == nil && len(vs) != 1 {
		err = fmt.Errorf("%d vectors for one question", len(vs))
	}
	if err != nil {
		q.Fallback = fmt.Errorf("embed the question: %w", err)
		return q
	}
	var probe embeddings.Probe
	var scratch *queryScratch // none for content with nothing to mean
	if index.vecs.Len() > 0 {
		var ok bool
		if probe, ok = index.vecs.Probe(vs[0]); !ok {
			q.Fallback = fmt.Errorf("the question's vector (%d dimensions) does not compare with the content's (%d)", len(vs[0]), index.vecs.Dim())
			return q
		}
		scratch = index.getScratch()
		q.sims = scratch.sims
	}
	q.sem, q.probe, q.scratch, q.minSimilarity = index, probe, scratch, b.sem.minSimilarity
	return q
}

// Release gives q's arrays back for the next question; q, and what its
// rankings returned that refer to it, must not be used after. A Query
// never released costs only garbage.
func (q Query) Release() {
	if q.scratch != nil && !q.scratch.released {
		q.scratch.released = true
		q.sem.scratch.Put(q.scratch)
	}
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

// semantic reports whether q is ranked by meaning: it has the
// question's similarities.
func (q Query) semantic() bool { return q.sims != nil }

// floor is the least similarity an item found by meaning alone needs.
func (q Query) floor() float64 {
	if q.minSimilarity == 0 {
		return math.Inf(-1) // the nearest, whatever they are
	}
	return q.minSimilarity
}

// sim is the question's similarity to vector v, 0 for none (-1).
func (q Query) sim(v int32) float64 {
	if v < 0 || int(v) >= len(q.sims) {
		return 0
	}
	s := q.sims[v]
	if s != s { // not measured yet
		s = q.sem.vecs.Similarity(int(v), q.probe)
		q.sims[v] = s
	}
	return float64(s)
}

// Documents measured by meaning: up to exactDocs, a search measures every
// text of every document; above, it estimates them all from their
// sketches (see embeddings.Vectors.EstimatesTo) and measures the texts of
// the candidateDocs documents nearest by estimate, and of any other
// document a ranking reads (the lexical side's). At 10,000 documents that
// reads about a twentieth of the bytes.
const (
	exactDocs     = 2048
	candidateDocs = 256
)

// docSims are how near each document means to the question: its lead and
// its best passage, weighed by leadWeight, or -Inf when it has nothing to
// mean; and that passage (-1 for none). Those of candidates are measured;
// the others when first read.
type docSims struct {
	q     Query
	sims  []float64 // NaN until measured
	best  []int
	cands []int // nil: every document
}

// at is document i's similarity and best passage.
func (d docSims) at(i int) (float64, int) {
	if s := d.sims[i]; s == s {
		return s, d.best[i]
	}
	sem := d.q.sem
	if lead := sem.docLead[i]; lead >= 0 {
		d.q.sim(lead)
	}
	for _, p := range sem.docPassages(i) {
		d.q.sim(p.vec)
	}
	d.sims[i], d.best[i] = sem.combine(i, d.q.sims)
	return d.sims[i], d.best[i]
}

// candidates calls yield with the documents a ranking by meaning reads.
func (d docSims) candidates(yield func(int) bool) {
	if d.cands == nil {
		for i := range d.sims {
			if !yield(i) {
				return
			}
		}
		return
	}
	for _, i := range d.cands {
		if !yield(i) {
			return
		}
	}
}

// combine is document i's similarity from those of its texts, sims (by
// vector, all of the document's measured), and its best passage.
func (sem *semIndex) combine(i int, sims []float32) (float64, int) {
	lead := sem.docLead[i]
	top, at := float32(math.Inf(-1)), -1
	for j, p := range sem.docPassages(i) {
		if s := sims[p.vec]; s > top {
			top, at = s, j
		}
	}
	switch {
	case at < 0 && lead < 0:
		return math.Inf(-1), -1 // nothing to mean
	case at < 0:
		return float64(sims[lead]), -1
	case lead < 0:
		return float64(top), at
	}
	return leadWeight*float64(sims[lead]) + (1-leadWeight)*float64(top), at
}

// docSimilarities measures the documents a ranking by meaning reads
// (those keep accepts; nil keeps all): every text of the documents in
// one pass, or, above exactDocs, the candidates' texts.
func (q Query) docSimilarities(keep func(int) bool) docSims {
	sem := q.sem
	n := len(sem.docLead)
	d := docSims{q: q, sims: q.scratch.docSims[:n], best: q.scratch.docBest[:n]}
	texts := q.sims[:sem.docTexts]
	if n <= sem.exact {
		sem.vecs.SimilaritiesTo(q.probe, 0, len(texts), texts)
		for i := range n {
			d.sims[i], d.best[i] = sem.combine(i, texts)
		}
		return d
	}
	nan := math.NaN()
	for i := range d.sims {
		d.sims[i] = nan
	}
	rough := q.scratch.rough[:len(texts)]
	sem.vecs.EstimatesTo(q.probe, 0, len(texts), rough)
	// Candidates in document order read their texts' rows in about
	// memory order: a document's texts are numbered after the previous
	// document's.
	d.cands = sem.nearestByEstimate(rough, keep)
	for _, i := range d.cands {
		d.at(i)
	}
	return d
}

// nearestByEstimate are the sem.candidates documents that keep accepts
// (nil keeps all) nearest by the estimates of their texts, rough, in
// ascending order; ties go to the earlier document.
func (sem *semIndex) nearestByEstimate(rough []float32, keep func(int) bool) []int {
	k := sem.candidates
	// A heap of the k best so far, the worst on top.
	heap := make([]int, 0, k)
	score := make([]float64, 0, k)
	worse := func(a, b int) bool { // heap[a] below heap[b]
		return score[a] < score[b] || (score[a] == score[b] && heap[a] > heap[b])
	}
	swap := func(a, b int) { heap[a], heap[b], score[a], score[b] = heap[b], heap[a], score[b], score[a] }
	down := func(i int) {
		for {
			l, m := 2*i+1, i
			if l < len(heap) && worse(l, m) {
				m = l
			}
			if r := l + 1; r < len(heap) && worse(r, m) {
				m = r
			}
			if m == i {
				return
			}
			swap(i, m)
			i = m
		}
	}
	none := float32(math.Inf(-1))
	for i, lead := range sem.docLead {
		// combine, without telling which passage: a max has no branch to
		// mispredict, and this loop runs over every document.
		top := none
		for _, v := range sem.passageVecs[sem.passageFrom[i]:sem.passageFrom[i+1]] {
			top = max(top, rough[v])
		}
		var s float64
		switch {
		case lead >= 0 && top != none:
			s = leadWeight*float64(rough[lead]) + (1-leadWeight)*float64(top)
		case lead >= 0:
			s = float64(rough[lead])
		case top != none:
			s = float64(top)
		default:
			continue // nothing to mean
		}
		if keep != nil && !keep(i) {
			continue
		}
		if len(heap) < k {
			heap, score = append(heap, i), append(score, s)
			for c := len(heap) - 1; c > 0 && worse(c, (c-1)/2); c = (c - 1) / 2 {
				swap(c, (c-1)/2)
			}
			continue
		}
		if s > score[0] { // i is later than every item in the heap: ties lose
			heap[0], score[0] = i, s
			down(0)
		}
	}
	slices.Sort(heap)
	return heap
}

// faqSimilarities are how near each FAQ means to the question, by group
// number: its best question variant's similarity plus answerWeight times
// its answer's; and that variant (an item of Base.faqs).
func (q Query) faqSimilarities() (sims []float64, best []int) {
	sims = make([]float64, q.sem.groups)
	best = make([]int, q.sem.groups)
	for g := range sims {
		sims[g], best[g] = math.Inf(-1), -1
	}
	for i, v := range q.sem.faqQuestion {
		g := q.sem.faqGroup[i]
		if v < 0 {
			continue
		}
		if s := q.sim(v); s > sims[g] {
			sims[g], best[g] = s, i
		}
	}
	for g := range sims {
		if best[g] >= 0 {
			sims[g] += answerWeight * q.sim(q.sem.groupAnswer[g])
		}
	}
	return sims, best
}

// nearest are the k items with the highest scores, best first (ties by
// the earlier item), among those items yields that keep accepts (nil
// keeps all) and score at least floor.
func nearest(items func(yield func(int) bool), k int, score func(i int) float64, keep func(i int) bool, floor float64) []int {
	var out []int
	for i := range items {
		s := score(i)
		if math.IsInf(s, -1) || s < floor || (keep != nil && !keep(i)) {
			continue
		}
		if len(out) == k && s <= score(out[k-1]) {
			continue
		}
		at, _ := slices.BinarySearchFunc(out, s, func(j int, s float64) int { return cmp.Compare(s, score(j)) })
		for at < len(out) && score(out[at]) == s {
			at++ // equal scores keep the lower item first
		}
		out = slices.Insert(out, at, i)
		if len(out) > k {
			out = out[:k]
		}
	}
	return out
}

// all calls yield with 0 to n-1.
func all(n int) func(yield func(int) bool) {
	return func(yield func(int) bool) {
		for i := range n {
			if !yield(i) {
				return
			}
		}
	}
}
