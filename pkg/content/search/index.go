package search

import (
	"cmp"
	"hash/maphash"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Doc is one searchable item.
type Doc struct {
	ID, Title, Body, URI, Location string
	// Group names the result an item counts for, when several items stand
	// for one (the question variants of a FAQ); empty means ID.
	Group string
}

func (d *Doc) group() string { return cmp.Or(d.Group, d.ID) }

type posting struct {
	doc         int32
	title, body uint16
	// w is the item's BM25F term weight, tf*(k1+1)/(tf+k1) with tf the
	// length-normalised title and body counts: fixed once built.
	w float32
}

// Index is an immutable BM25F index over docs; it is safe for concurrent
// searches.
type Index struct {
	docs     []Doc
	titleLen []uint16
	bodyLen  []uint32
	avgTitle float64
	avgBody  float64
	postings map[string][]posting
	// maxW is each term's highest posting weight: with the term's IDF, the
	// most it can add to any item's score.
	maxW map[string]float32
	// stems are the stems of the words seen, read at query time.
	stems *stems
	// words are the folded words seen, sorted, each with its stem: for
	// prefix matching of an unfinished last word.
	words []wordStem
	// typos maps the hash of every term with one letter deleted to the
	// term it came from (its ID), and typosMore to any others: for
	// matching with one typo. Hashes and IDs, not strings: this is an
	// index's largest table, and a map without pointers is one the
	// collector never reads, however many apps are held. A collision
	// costs nothing, as every candidate is checked (damerau1).
	typos     map[uint64]uint32
	typosMore map[uint64][]uint32
	typoSeed  maphash.Seed
	// synonyms are the indexed terms each term stands for in the app's
	// own content, read as weaker matches; nil when it has none.
	synonyms map[string][]string
	// lexicon gives words related in general English, read as weaker
	// matches still; nil for none. relatedCache holds what it gave, by
	// query word ([]expansion), relatedCached counts its entries.
	lexicon       Lexicon
	relatedCache  sync.Map
	relatedCached atomic.Int64
	// termIDs number the indexed terms; bodySpans and titleSpans are where
	// each item's words stand, by start, so that highlights and passages
	// need not read the text again.
	termIDs    map[string]uint32
	termText   []string
	bodySpans  [][]tokSpan
	titleSpans [][]tokSpan
	// paras are each body's passages, split once.
	paras [][]chunk
	// groupOf numbers each item's group, for ranking a group once.
	groupOf []int32
	groups  int
	// scratch holds per-search arrays for reuse: a search allocates
	// nothing in proportion to the index.
	scratch sync.Pool
}

// tokSpan is one word of a body: its term and where it stands (UTF-16).
type tokSpan struct {
	term       uint32
	start, end uint32
}

// scratch is the working memory of one search: one accumulator per
// item, together so that an item's fields share a cache line.
type scratch struct {
	acc       []acc
	groupBest []int32
	// touched, termDocs and top are lists of item numbers.
	touched, termDocs, top []int32
	best                   []float64
}

type acc struct {
	score, covered  float64 // over the query's terms so far
	best, bestCover float64 // of the current term's expansions
	// matched has bit i set when expansion i matched the item; the terms
	// are spelled out for the results only.
	matched uint64
	seen    bool
}

type wordStem struct{ word, term string }

// BM25F parameters; titles weigh more than bodies.
const (
	k1          = 1.2
	bParam      = 0.75
	titleWeight = 3.0
)

// Lexicon gives words related to a word in general English (package
// lexicon reads them from WordNet), best first, each with a weight in
// (0, 1]. word is folded (lower case, no accents) and may be inflected.
type Lexicon interface {
	Related(word string, visit func(related string, weight float64))
}

// Config is what an index understands of words beyond their spelling.
type Config struct {
	// Synonyms are sets of words that mean the same in the app's content:
	// a query word also matches the others of its sets, with less weight.
	Synonyms [][]string
	// Lexicon, when set, expands query words with related words of
	// general English, with less weight still.
	Lexicon Lexicon
}

// Build indexes docs.
func Build(docs []Doc) *Index { return BuildWith(docs, Config{}) }

// BuildWith indexes docs with what cfg tells of words. Synonym sets are
// resolved once here, so that a search only looks them up.
func BuildWith(docs []Doc, cfg Config) *Index {
	memo := &stems{m: map[string]string{}}
	ix := &Index{lexicon: cfg.Lexicon, docs: docs, titleLen: make([]uint16, len(docs)), bodyLen: make([]uint32, len(docs)),
		postings: map[string][]posting{}, maxW: map[string]float32{}, typos: map[uint64]uint32{}, typoSeed: maphash.MakeSeed(),
		termIDs: map[string]uint32{}, bodySpans: make([][]tokSpan, len(docs)), titleSpans: make([][]tokSpan, len(docs)), paras: make([][]chunk, len(docs))}
	words := map[string]string{}
	var titleSum, bodySum int
	toks := &tokenScratch{counts: map[string]int{}}
	for i := range docs {
		tl, bl := ix.indexDoc(i, memo, words, toks)
		titleSum, bodySum = titleSum+tl, bodySum+bl
		// A build runs beside rankings on few cores: giving up the core
		// between documents lets a waiting question run now, not when the
		// scheduler preempts the build (after 10 ms).
		runtime.Gosched()
	}
	if n := len(docs); n > 0 {
		ix.avgTitle, ix.avgBody = math.Max(1, float64(titleSum)/float64(n)), math.Max(1, float64(bodySum)/float64(n))
	}
	for w, t := range words {
		ix.words = append(ix.words, wordStem{w, t})
	}
	ix.stems = &stems{m: words, readOnly: true}
	ix.groupDocs()
	ix.scratch.New = func() any {
		n := len(docs)
		gb := make([]int32, ix.groups)
		for i := range gb {
			gb[i] = -1
		}
		return &scratch{acc: make([]acc, n), groupBest: gb}
	}
	slices.SortFunc(ix.words, func(a, b wordStem) int { return strings.Compare(a.word, b.word) })
	ix.weighPostings()
	ix.linkTerms(cfg.Synonyms)
	return ix
}

// tokenScratch holds the tokens and postings of the document being
// indexed, reused for the next: they are read only while it is.
type tokenScratch struct {
	title, body []token
	counts      map[string]int // term to its place in postings
	postings    []posting
}

// indexDoc adds item i's words to the postings, records its spans and
// paragraphs, and returns how many words its title and body have. seen
// maps each word seen to its term.
func (ix *Index) indexDoc(i int, memo *stems, seen map[string]string, scratch *tokenScratch) (titleLen, bodyLen int) {
	docs := ix.docs
	// Each term's posting, by its place in ps; both reused for the next
	// document, as builds run while others rank and the collector's work
	// is their latency.
	clear(scratch.counts)
	counts, ps := scratch.counts, scratch.postings[:0]
	add := func(toks []token, title bool) {
		for _, t := range toks {
			seen[t.word] = t.term
			j, ok := counts[t.term]
			if !ok {
				j = len(ps)
				counts[t.term] = j
				ps = append(ps, posting{doc: int32(i)})
			}
			p := &ps[j]
			if title {
				p.title = min(p.title+1, math.MaxUint16)
			} else {
				p.body = min(p.body+1, math.MaxUint16)
			}
		}
	}
	// The title's words, then the joined forms appendTokens would add.
	scratch.title = appendWords(scratch.title[:0], docs[i].Title, memo)
	titleWords := len(scratch.title)
	scratch.title = appendJoined(scratch.title, 0, docs[i].Title, memo)
	scratch.body = appendTokens(scratch.body[:0], docs[i].Body, memo)
	tt, bt := scratch.title, scratch.body
	for _, t := range tt {
		ix.termID(t.term) // so that title matches can be told (TitleHighlights)
	}
	// The title's words alone, not the joined forms tokensWith adds.
	if tw := tt[:titleWords]; len(tw) > 0 {
		ix.titleSpans[i] = make([]tokSpan, len(tw))
		for j, t := range tw {
			ix.titleSpans[i][j] = tokSpan{term: ix.termID(t.term), start: uint32(t.start), end: uint32(t.end)}
		}
	}
	spans := make([]tokSpan, 0, len(bt))
	for _, t := range bt {
		spans = append(spans, tokSpan{term: ix.termID(t.term), start: uint32(t.start), end: uint32(t.end)})
	}
	slices.SortStableFunc(spans, func(a, b tokSpan) int { return cmp.Compare(a.start, b.start) })
	ix.bodySpans[i] = spans
	ix.paras[i] = paragraphs(docs[i].Body)
	add(tt, true)
	add(bt, false)
	ix.titleLen[i], ix.bodyLen[i] = uint16(min(len(tt), math.MaxUint16)), uint32(len(bt))
	for term, j := range counts {
		ix.postings[term] = append(ix.postings[term], ps[j])
	}
	scratch.postings = ps
	return len(tt), len(bt)
}

// groupDocs numbers the groups of the items.
func (ix *Index) groupDocs() {
	docs := ix.docs
	groupIDs := map[string]int32{}
	ix.groupOf = make([]int32, len(docs))
	for i := range docs {
		g := docs[i].group()
		id, ok := groupIDs[g]
		if !ok {
			id = int32(len(groupIDs))
			groupIDs[g] = id
		}
		ix.groupOf[i] = id
	}
	ix.groups = len(groupIDs)
}

// weighPostings weighs each posting by BM25F and keeps each term's
// greatest weight, the bound a search prunes by.
func (ix *Index) weighPostings() {
	for term, ps := range ix.postings {
		var maxW float32
		for i := range ps {
			p, d := &ps[i], ps[i].doc
			tf := titleWeight*float64(p.title)/(1-bParam+bParam*float64(ix.titleLen[d])/ix.avgTitle) +
				float64(p.body)/(1-bParam+bParam*float64(ix.bodyLen[d])/ix.avgBody)
			p.w = float32(tf * (k1 + 1) / (tf + k1))
			maxW = max(maxW, p.w)
		}
		ix.maxW[term] = maxW
	}
}

// linkTerms records the deletions of each term, for matching misspelt
// words, and the synonyms of sets some item holds.
func (ix *Index) linkTerms(sets [][]string) {
	var buf []byte
	for term := range ix.postings {
		id := ix.termIDs[term]
		buf = eachDeletion(term, buf, func(d []byte) {
			h := maphash.Bytes(ix.typoSeed, d)
			if first, ok := ix.typos[h]; !ok {
				ix.typos[h] = id
			} else if first != id && !slices.Contains(ix.typosMore[h], id) {
				if ix.typosMore == nil {
					ix.typosMore = map[uint64][]uint32{}
				}
				ix.typosMore[h] = append(ix.typosMore[h], id)
			}
		})
	}
	for term, syn := range synonymTable(sets) {
		// Only synonyms some item holds can match.
		syn = slices.DeleteFunc(syn, func(s string) bool { _, ok := ix.postings[s]; return !ok })
		if len(syn) > 0 {
			if ix.synonyms == nil {
				ix.synonyms = map[string][]string{}
			}
			ix.synonyms[term] = syn
		}
	}
}

// termID numbers term, the first time it is seen.
func (ix *Index) termID(term string) uint32 {
	id, ok := ix.termIDs[term]
	if !ok {
		id = uint32(len(ix.termIDs))
		ix.termIDs[term] = id
		ix.termText = append(ix.termText, term)
	}
	return id
}

// maxTypoRunes is the longest word given typo matches: the deletions of a
// word cost the square of its length, and a query of one very long word
// must not cost milliseconds; no real word is that long.
const maxTypoRunes = 32

// deletes lists s with each one of its letters removed.
func deletes(s string) []string {
	var out []string
	eachDeletion(s, nil, func(d []byte) { out = append(out, string(d)) })
	return out
}

// eachDeletion calls f with s with each one of its letters removed, in
// buf (returned for reuse; f must not keep it), when s is a word given
// typo matches.
func eachDeletion(s string, buf []byte, f func([]byte)) []byte {
	if len(s) > 4*maxTypoRunes {
		return buf // longer in runes too, and not worth counting
	}
	if n := utf8.RuneCountInString(s); n < 4 || n > maxTypoRunes { // short words have too many neighbours to guess
		return buf
	}
	for i := 0; i < len(s); {
		_, w := utf8.DecodeRuneInString(s[i:])
		buf = append(append(buf[:0], s[:i]...), s[i+w:]...)
		f(buf)
		i += w
	}
	return buf
}

// eachTypoTerm calls f with the indexed terms of which d may be a
// deletion (its hash's).
func (ix *Index) eachTypoTerm(d string, f func(term string)) {
	h := maphash.String(ix.typoSeed, d)
	first, ok := ix.typos[h]
	if !ok {
		return
	}
	f(ix.termText[first])
	for _, id := range ix.typosMore[h] {
		f(ix.termText[id])
	}
}

func (ix *Index) idf(term string) float64 {
	n, df := float64(len(ix.docs)), float64(len(ix.postings[term]))
	return math.Log(1 + (n-df+0.5)/(df+0.5))
}

// expansion is an indexed term standing for a query term, with how much
// a match on it counts.
type expansion struct {
	term   string
	weight float64
	// synonym is set for a synonym of the query term: it counts at most
	// the query term's own IDF, so that a rare synonym cannot outweigh
	// the word typed.
	synonym bool
}

// minCutRunes is the shortest unknown word taken as cut short.
const minCutRunes = 3

// Weights of inexact matches.
const (
	typoWeight   = 0.9
	prefixWeight = 0.8
	maxPrefixes  = 30
)

// Weights of related words: below synonymWeight, as general English
// knows less of what the app means than the app's own content does.
const (
	lexiconWeight = 0.3
	// maxRelated bounds the related words a query word adds that some
	// item holds: each is one more posting list read.
	maxRelated = 8
)

// expand finds the indexed terms a query term matches: itself, or else
// terms one edit away; the unfinished last word also matches the words it
// begins. word is the folded word the term came from.
func (ix *Index) expand(term, word string, partial string) []expansion {
	var out []expansion
	if _, ok := ix.postings[term]; ok {
		out = append(out, expansion{term: term, weight: 1})
	} else {
		seen := map[string]bool{}
		for _, cand := range append([]string{term}, deletes(term)...) {
			ix.eachTypoTerm(cand, func(t string) {
				if !seen[t] && damerau1(term, t) {
					seen[t] = true
					out = append(out, expansion{term: t, weight: typoWeight})
				}
			})
			if _, ok := ix.postings[cand]; ok && !seen[cand] && cand != term {
				seen[cand] = true
				out = append(out, expansion{term: cand, weight: typoWeight})
			}
		}
	}
	for _, s := range ix.synonyms[term] {
		if !slices.ContainsFunc(out, func(e expansion) bool { return e.term == s }) {
			out = append(out, expansion{term: s, weight: synonymWeight, synonym: true})
		}
	}
	for _, e := range ix.related(term, word) {
		if !slices.ContainsFunc(out, func(x expansion) bool { return x.term == e.term }) {
			out = append(out, e)
		}
	}
	if _, known := ix.postings[term]; partial == "" && !known && len([]rune(word)) >= minCutRunes {
		// A word no item holds may be cut short ("batt" for battery)
		// anywhere in the query, not only at its end.
		partial = word
	}
	if partial != "" && len([]rune(partial)) >= 2 {
		i := sort.Search(len(ix.words), func(i int) bool { return ix.words[i].word >= partial })
		n := 0
		for ; i < len(ix.words) && strings.HasPrefix(ix.words[i].word, partial) && n < maxPrefixes; i++ {
			t := ix.words[i].term
			if !slices.ContainsFunc(out, func(e expansion) bool { return e.term == t }) {
				out = append(out, expansion{term: t, weight: prefixWeight})
				n++
			}
		}
	}
	return out
}

// maxRelatedCached bounds the words whose related terms an index keeps:
// past it, lookups are made afresh, so that queries of made-up words do
// not grow the memory without end.
const maxRelatedCached = 50_000

// related are the indexed terms the lexicon relates to word (whose term
// is term), as expansions; looked up once per word, as people ask with
// the same words again and again.
func (ix *Index) related(term, word string) []expansion {
	if ix.lexicon == nil {
		return nil
	}
	if v, ok := ix.relatedCache.Load(word); ok {
		return v.([]expansion)
	}
	var out []expansion
	known := false
	ix.lexicon.Related(word, func(rel string, w float64) {
		known = true
		if len(out) >= maxRelated || strings.IndexByte(rel, ' ') >= 0 {
			return // a phrase cannot stand for one word
		}
		// "e-mail" is indexed joined, as "email" (see tokensWith).
		t := ix.stems.of(strings.ReplaceAll(rel, "-", ""))
		if _, ok := ix.postings[t]; !ok || t == term || slices.ContainsFunc(out, func(e expansion) bool { return e.term == t }) {
			return
		}
		out = append(out, expansion{term: t, weight: lexiconWeight * w, synonym: true})
	})
	// Words the lexicon lacks (made-up ones among them) are not kept: they
	// cost a look-up, and would crowd out the words people use. A word it
	// knows is kept even when none of its related words is in the
	// content, as finding that out stems each of them.
	if known && ix.relatedCached.Load() < maxRelatedCached {
		if _, loaded := ix.relatedCache.LoadOrStore(word, out); !loaded {
			ix.relatedCached.Add(1)
		}
	}
	return out
}

// damerau1 reports whether a and b are at most one insertion, deletion,
// substitution or transposition apart.
func damerau1(a, b string) bool { return damerau1Runes([]rune(a), []rune(b)) }

// damerau1Runes is damerau1 on runes, without allocating.
func damerau1Runes(x, y []rune) bool {
	if len(x) > len(y) {
		x, y = y, x
	}
	if len(y)-len(x) > 1 {
		return false
	}
	i := 0
	for i < len(x) && x[i] == y[i] {
		i++
	}
	switch {
	case i == len(x):
		return true // equal, or one letter added at the end
	case len(x) < len(y):
		return slices.Equal(x[i:], y[i+1:])
	case slices.Equal(x[i+1:], y[i+1:]):
		return true // one letter replaced
	}
	return i+1 < len(x) && x[i] == y[i+1] && x[i+1] == y[i] && slices.Equal(x[i+2:], y[i+2:])
}

// expWeight is what a match on e counts per unit of BM25F term weight,
// for a query term of IDF termIDF.
func (ix *Index) expWeight(e expansion, termIDF float64) float64 {
	idf := ix.idf(e.term)
	if e.synonym {
		idf = math.Min(idf, termIDF)
	}
	return e.weight * idf
}

// Options narrow a search.
type Options struct {
	// Limit bounds the results; zero means 10.
	Limit int
	// Location keeps only items whose location is exactly this; items
	// without a location are left out when it is set.
	Location string
}

// Result is one item found.
type Result struct {
	Index int
	Doc   *Doc
	Score float64
	// Confidence is the share of the query's weight (its terms' IDF) the
	// item matched, from 0 to 1; typos and prefixes count partly.
	Confidence float64
	// terms are the numbers of the indexed terms that matched, for
	// highlights and passages.
	terms []uint32
}

// termPlan is how one query term is looked up: the indexed terms standing
// for it, its weight in the query, and the most it can add to any score.
type termPlan struct {
	exps          []expansion
	weight, bound float64
}

// Search ranks the items for q. Items of one group count once, by their
// best member.
//
// Terms are read most weighty first. Once the k-th best score so far is
// above the most the remaining terms could give an item not yet seen, no
// new item can reach the results, and the remaining (common, long) terms
// only update the items already seen.
func (ix *Index) Search(q string, o Options) []Result {
	res, _ := ix.search(q, o, false)
	return res
}

// SearchCount is Search that also counts every group that matches q,
// however many Limit leaves out. The count needs every posting of the
// query's terms read, which ranking the first few alone can skip.
func (ix *Index) SearchCount(q string, o Options) ([]Result, int) {
	return ix.search(q, o, true)
}

func (ix *Index) search(q string, o Options, countAll bool) ([]Result, int) {
	if o.Limit <= 0 {
		o.Limit = 10
	}
	pq := parseQuery(q, ix.stems)
	if len(pq.terms) == 0 || len(ix.docs) == 0 {
		return nil, 0
	}
	// Dense per-item accumulators: cheaper than maps when common words
	// match most items.
	sc := ix.scratch.Get().(*scratch)
	plans, total, rest := ix.plan(pq)
	allExps, touched := ix.accumulate(sc, plans, rest, o, countAll)
	out, matched := ix.rank(sc, touched, allExps, total, o.Limit)
	// Clean only what this search touched before the next one. (A search
	// that panicked does not return its scratch.)
	for _, d := range touched {
		sc.acc[d] = acc{}
	}
	ix.scratch.Put(sc)
	return out, matched
}

// plan expands each query term and weighs it, best bound first; total is
// the weight of the whole query, rest the sum of the terms' bounds.
func (ix *Index) plan(pq query) (plans []termPlan, total, rest float64) {
	n := len(ix.docs)
	plans = make([]termPlan, len(pq.terms))
	rare := false // some term is in at most half the items
	for i, term := range pq.terms {
		partial := ""
		if i == len(pq.terms)-1 && pq.partial != "" && stem(pq.partial) == term {
			partial = pq.partial
		}
		plans[i].exps = ix.expand(term, pq.words[i], partial)
		for _, e := range plans[i].exps {
			// A rare synonym alone must not leave out the words typed.
			rare = rare || (!e.synonym && 2*len(ix.postings[e.term]) <= n)
		}
	}
	for i, term := range pq.terms {
		p := &plans[i]
		p.weight = ix.idf(term)
		if _, ok := ix.postings[term]; !ok {
			// An unknown word weighs what its best stand-in weighs.
			p.weight = 0
			for _, e := range p.exps {
				p.weight = math.Max(p.weight, ix.idf(e.term))
			}
			if p.weight == 0 {
				p.weight = math.Log(1 + float64(n)) // matched nowhere
			}
		}
		total += p.weight
		// A word in most items adds little to any score, and reading its
		// postings costs the most; with rarer words in the query, it is
		// left out (and not highlighted).
		p.exps = slices.DeleteFunc(p.exps, func(e expansion) bool { return rare && 2*len(ix.postings[e.term]) > n })
		for _, e := range p.exps {
			p.bound = math.Max(p.bound, ix.expWeight(e, p.weight)*float64(ix.maxW[e.term]))
		}
		rest += p.bound
	}
	slices.SortStableFunc(plans, func(a, b termPlan) int { return cmp.Compare(b.bound, a.bound) })
	return plans, total, rest
}

// accumulate adds each planned term's best expansion to the score of the
// items it is in, and returns the expansions read, in order, and the items
// touched. Once no new item can reach the results, only items already
// touched are scored.
func (ix *Index) accumulate(sc *scratch, plans []termPlan, rest float64, o Options, countAll bool) (allExps []string, touched []int32) {
	as := sc.acc
	touched = sc.touched[:0]
	var maxScore float64
	closed := false // no new item can reach the results
	for _, p := range plans {
		if !countAll && !closed && rest < maxScore && len(touched) >= o.Limit {
			closed = ix.kthBest(sc, touched, o.Limit) > rest
		}
		rest -= p.bound
		termDocs := sc.termDocs[:0]
		for _, e := range p.exps {
			bit := uint64(0)
			if len(allExps) < 64 {
				bit = 1 << len(allExps)
			}
			allExps = append(allExps, e.term)
			ew, cover := ix.expWeight(e, p.weight), e.weight*p.weight
			add := func(d int32, w float32) {
				a := &as[d]
				if a.bestCover == 0 {
					termDocs = append(termDocs, d)
				}
				a.best = max(a.best, ew*float64(w))
				a.bestCover = max(a.bestCover, cover)
				a.matched |= bit
			}
			ps := ix.postings[e.term]
			if closed && len(touched)*bits.Len(uint(len(ps))) < len(ps) {
				// Few items are still in the running: look them up.
				for _, d := range touched {
					if i, ok := slices.BinarySearchFunc(ps, d, func(p posting, d int32) int { return cmp.Compare(p.doc, d) }); ok {
						add(d, ps[i].w)
					}
				}
				continue
			}
			for _, p := range ps {
				d := p.doc
				if (closed && !as[d].seen) || (o.Location != "" && ix.docs[d].Location != o.Location) {
					continue
				}
				add(d, p.w)
			}
		}
		for _, d := range termDocs {
			a := &as[d]
			a.score += a.best
			a.covered += a.bestCover
			a.best, a.bestCover = 0, 0
			maxScore = max(maxScore, a.score)
			if !a.seen {
				a.seen = true
				touched = append(touched, d)
			}
		}
		sc.termDocs = termDocs
	}
	sc.touched = touched
	return allExps, touched
}

// rank keeps the best item of each group among those touched, and returns
// the limit best as results with the number of groups matched.
func (ix *Index) rank(sc *scratch, touched []int32, allExps []string, total float64, limit int) ([]Result, int) {
	as := sc.acc
	top := ix.groupBests(sc, touched)
	matched := len(top)
	less := func(a, b int32) int {
		if as[a].score != as[b].score {
			if as[a].score > as[b].score {
				return -1
			}
			return 1
		}
		return strings.Compare(ix.docs[a].group(), ix.docs[b].group())
	}
	top = topK(top, limit, func(d int32) float64 { return as[d].score }, less)
	out := make([]Result, 0, len(top))
	for _, d := range top {
		var terms []uint32
		for i, t := range allExps[:min(len(allExps), 64)] {
			if as[d].matched&(1<<i) != 0 {
				if id, ok := ix.termIDs[t]; ok && !slices.Contains(terms, id) {
					terms = append(terms, id)
				}
			}
		}
		out = append(out, Result{Index: int(d), Doc: &ix.docs[d], Score: as[d].score, Confidence: math.Min(1, as[d].covered/total), terms: terms})
	}
	return out, matched
}

// Item is item i as a result that matched no query term (found another
// way, by meaning), or a zero Result when there is no such item.
func (ix *Index) Item(i int) Result {
	if i < 0 || i >= len(ix.docs) {
		return Result{}
	}
	return Result{Index: i, Doc: &ix.docs[i]}
}

// Len is the number of items.
func (ix *Index) Len() int { return len(ix.docs) }

// groupBests returns the best item of each group among touched, in the
// scratch's top list. Ranking is plain BM25F: weighting it further by the
// share of the query matched scored worse on the evaluation set.
func (ix *Index) groupBests(sc *scratch, touched []int32) []int32 {
	as, gb := sc.acc, sc.groupBest
	top := sc.top[:0]
	if ix.groups == len(ix.docs) { // every item is its own group
		sc.top = append(top, touched...)
		return sc.top
	}
	for _, d := range touched {
		g := ix.groupOf[d]
		switch cur := gb[g]; {
		case cur < 0:
			gb[g] = d
			top = append(top, d)
		case as[d].score > as[cur].score || (as[d].score == as[cur].score && d < cur):
			gb[g] = d
		}
	}
	for i, d := range top {
		top[i] = gb[ix.groupOf[d]]
	}
	for _, d := range top {
		gb[ix.groupOf[d]] = -1
	}
	sc.top = top
	return top
}

// kthBest is the k-th best score among the groups of touched, or zero
// when fewer groups were touched.
func (ix *Index) kthBest(sc *scratch, touched []int32, k int) float64 {
	best := sc.best[:0] // the k best, best first
	for _, d := range ix.groupBests(sc, touched) {
		s := sc.acc[d].score
		if len(best) == k && s <= best[k-1] {
			continue
		}
		i, _ := slices.BinarySearchFunc(best, s, func(a, b float64) int { return cmp.Compare(b, a) })
		best = slices.Insert(best, i, s)
		if len(best) > k {
			best = best[:k]
		}
	}
	sc.best = best
	if len(best) < k {
		return 0
	}
	return best[k-1]
}

// topK returns the k best of items, in order, without sorting them all.
// cmpFn orders items best first; score is what it orders by first.
func topK(items []int32, k int, score func(int32) float64, cmpFn func(a, b int32) int) []int32 {
	if len(items) > 4*k {
		// Keep a sorted window of the k best seen so far.
		window := make([]int32, 0, k+1)
		for _, it := range items {
			if len(window) == k && (score(it) < score(window[k-1]) || cmpFn(it, window[k-1]) >= 0) {
				continue
			}
			i, _ := slices.BinarySearchFunc(window, it, cmpFn)
			window = slices.Insert(window, i, it)
			if len(window) > k {
				window = window[:k]
			}
		}
		return window
	}
	slices.SortFunc(items, cmpFn)
	return items[:min(len(items), k)]
}

// Span is a stretch of text in UTF-16 code units.
type Span struct{ Start, End int }

// termMask has bit t%64 set for each term t: most words of a text are
// ruled out by it without a search of the terms.
func termMask(terms []uint32) uint64 {
	var m uint64
	for _, t := range terms {
		m |= 1 << (t & 63)
	}
	return m
}

// spansIn returns the words of item doc's body that start in [from, to).
func (ix *Index) spansIn(doc int, from, to int) []tokSpan {
	sp := ix.bodySpans[doc]
	lo, _ := slices.BinarySearchFunc(sp, uint32(from), func(s tokSpan, v uint32) int { return cmp.Compare(s.start, v) })
	hi, _ := slices.BinarySearchFunc(sp, uint32(to), func(s tokSpan, v uint32) int { return cmp.Compare(s.start, v) })
	return sp[lo:hi]
}

// HighlightsIn are where the terms r matched stand in its body between
// from and to (UTF-16), relative to from, not overlapping.
func (ix *Index) HighlightsIn(r Result, from, to int) []Span {
	var out []Span
	mask := termMask(r.terms)
	for _, s := range ix.spansIn(r.Index, from, to) {
		if mask&(1<<(s.term&63)) == 0 || !slices.Contains(r.terms, s.term) || int(s.end) > to {
			continue
		}
		sp := Span{int(s.start) - from, int(s.end) - from}
		if n := len(out); n > 0 && sp.Start < out[n-1].End {
			out[n-1].End = max(out[n-1].End, sp.End)
			continue
		}
		out = append(out, sp)
	}
	return out
}

// TitleHighlights are where the terms r matched stand in its title
// (UTF-16).
func (ix *Index) TitleHighlights(r Result) []Span {
	if r.Doc == nil {
		return nil
	}
	if r.Index < 0 || r.Index >= len(ix.titleSpans) {
		return nil
	}
	var out []Span
	for _, t := range ix.titleSpans[r.Index] {
		if slices.Contains(r.terms, t.term) {
			out = append(out, Span{int(t.start), int(t.end)})
		}
	}
	return out
}

// Meaningful reports whether q holds a finished word that is not a stop
// word: "how do I" says nothing of what it is about, and "wher" may become
// any word.
func Meaningful(q string) bool {
	ws := words(q, &stems{none: true}) // stop words are told apart unstemmed
	if r, _ := utf8.DecodeLastRuneInString(q); isWordRune(r) && len(ws) > 0 {
		ws = ws[:len(ws)-1] // unfinished
	}
	for _, t := range ws {
		if !t.stop {
			return true
		}
	}
	return false
}
