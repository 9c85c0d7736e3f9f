package search

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
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
	// words are the folded words seen, sorted, each with its stem: for
	// prefix matching of an unfinished last word.
	words []wordStem
	// deletions maps every term with one letter deleted to the terms it
	// came from: for matching with one typo.
	deletions map[string][]string
	// termIDs number the indexed terms; bodySpans are where each item's
	// body words stand, by start, so that highlights and passages need not
	// read the text again.
	termIDs   map[string]uint32
	bodySpans [][]tokSpan
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

// Build indexes docs.
func Build(docs []Doc) *Index {
	memo := &stems{m: map[string]string{}}
	ix := &Index{docs: docs, titleLen: make([]uint16, len(docs)), bodyLen: make([]uint32, len(docs)),
		postings: map[string][]posting{}, deletions: map[string][]string{},
		termIDs: map[string]uint32{}, bodySpans: make([][]tokSpan, len(docs)), paras: make([][]chunk, len(docs))}
	words := map[string]string{}
	var titleSum, bodySum int
	for i := range docs {
		counts := map[string]*posting{}
		add := func(toks []token, title bool) {
			for _, t := range toks {
				words[t.word] = t.term
				p := counts[t.term]
				if p == nil {
					p = &posting{doc: int32(i)}
					counts[t.term] = p
				}
				if title {
					p.title = min(p.title+1, math.MaxUint16)
				} else {
					p.body = min(p.body+1, math.MaxUint16)
				}
			}
		}
		tt, bt := tokensWith(docs[i].Title, memo), tokensWith(docs[i].Body, memo)
		spans := make([]tokSpan, 0, len(bt))
		for _, t := range bt {
			id, ok := ix.termIDs[t.term]
			if !ok {
				id = uint32(len(ix.termIDs))
				ix.termIDs[t.term] = id
			}
			spans = append(spans, tokSpan{term: id, start: uint32(t.start), end: uint32(t.end)})
		}
		slices.SortStableFunc(spans, func(a, b tokSpan) int { return cmp.Compare(a.start, b.start) })
		ix.bodySpans[i] = spans
		ix.paras[i] = paragraphs(docs[i].Body)
		add(tt, true)
		add(bt, false)
		ix.titleLen[i], ix.bodyLen[i] = uint16(min(len(tt), math.MaxUint16)), uint32(len(bt))
		titleSum, bodySum = titleSum+len(tt), bodySum+len(bt)
		for term, p := range counts {
			ix.postings[term] = append(ix.postings[term], *p)
		}
	}
	if n := len(docs); n > 0 {
		ix.avgTitle, ix.avgBody = math.Max(1, float64(titleSum)/float64(n)), math.Max(1, float64(bodySum)/float64(n))
	}
	for w, t := range words {
		ix.words = append(ix.words, wordStem{w, t})
	}
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
	ix.scratch.New = func() any {
		n := len(docs)
		gb := make([]int32, ix.groups)
		for i := range gb {
			gb[i] = -1
		}
		return &scratch{acc: make([]acc, n), groupBest: gb}
	}
	slices.SortFunc(ix.words, func(a, b wordStem) int { return strings.Compare(a.word, b.word) })
	for _, ps := range ix.postings {
		for i := range ps {
			p, d := &ps[i], ps[i].doc
			tf := titleWeight*float64(p.title)/(1-bParam+bParam*float64(ix.titleLen[d])/ix.avgTitle) +
				float64(p.body)/(1-bParam+bParam*float64(ix.bodyLen[d])/ix.avgBody)
			p.w = float32(tf * (k1 + 1) / (tf + k1))
		}
	}
	for term := range ix.postings {
		for _, d := range deletes(term) {
			ix.deletions[d] = append(ix.deletions[d], term)
		}
	}
	return ix
}

// deletes lists s with each one of its letters removed.
func deletes(s string) []string {
	r := []rune(s)
	if len(r) < 4 { // short words have too many neighbours to guess
		return nil
	}
	out := make([]string, 0, len(r))
	for i := range r {
		out = append(out, string(r[:i])+string(r[i+1:]))
	}
	return out
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
}

// Weights of inexact matches.
const (
	typoWeight   = 0.9
	prefixWeight = 0.8
	maxPrefixes  = 30
)

// expand finds the indexed terms a query term matches: itself, or else
// terms one edit away; the unfinished last word also matches the words it
// begins.
func (ix *Index) expand(term string, partial string) []expansion {
	var out []expansion
	if _, ok := ix.postings[term]; ok {
		out = append(out, expansion{term, 1})
	} else {
		seen := map[string]bool{}
		for _, cand := range append([]string{term}, deletes(term)...) {
			for _, t := range ix.deletions[cand] {
				if !seen[t] && damerau1(term, t) {
					seen[t] = true
					out = append(out, expansion{t, typoWeight})
				}
			}
			if _, ok := ix.postings[cand]; ok && !seen[cand] && cand != term {
				seen[cand] = true
				out = append(out, expansion{cand, typoWeight})
			}
		}
	}
	if partial != "" && len([]rune(partial)) >= 2 {
		i := sort.Search(len(ix.words), func(i int) bool { return ix.words[i].word >= partial })
		n := 0
		for ; i < len(ix.words) && strings.HasPrefix(ix.words[i].word, partial) && n < maxPrefixes; i++ {
			t := ix.words[i].term
			if !slices.ContainsFunc(out, func(e expansion) bool { return e.term == t }) {
				out = append(out, expansion{t, prefixWeight})
				n++
			}
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
	// Terms are the indexed terms that matched, for highlights.
	Terms map[string]bool
}

// Search ranks the items for q. Items of one group count once, by their
// best member.
func (ix *Index) Search(q string, o Options) []Result {
	if o.Limit <= 0 {
		o.Limit = 10
	}
	pq := parseQuery(q)
	if len(pq.terms) == 0 || len(ix.docs) == 0 {
		return nil
	}
	n := len(ix.docs)
	// Dense per-item accumulators: cheaper than maps when common words
	// match most items.
	sc := ix.scratch.Get().(*scratch)
	as := sc.acc
	var allExps []string
	var touched []int32
	var total float64
	expsOf := make([][]expansion, len(pq.terms))
	rare := false // some term is in at most half the items
	for i, term := range pq.terms {
		partial := ""
		if i == len(pq.terms)-1 && pq.partial != "" && stem(pq.partial) == term {
			partial = pq.partial
		}
		expsOf[i] = ix.expand(term, partial)
		for _, e := range expsOf[i] {
			rare = rare || 2*len(ix.postings[e.term]) <= n
		}
	}
	for i, term := range pq.terms {
		exps := expsOf[i]
		weight := ix.idf(term)
		if _, ok := ix.postings[term]; !ok {
			// An unknown word weighs what its best stand-in weighs.
			weight = 0
			for _, e := range exps {
				weight = math.Max(weight, ix.idf(e.term))
			}
			if weight == 0 {
				weight = math.Log(1 + float64(n)) // matched nowhere
			}
		}
		total += weight
		var termDocs []int32
		for _, e := range exps {
			bit := uint64(0)
			if len(allExps) < 64 {
				bit = 1 << len(allExps)
			}
			allExps = append(allExps, e.term)
			idf := ix.idf(e.term)
			ew, cover := e.weight*idf, e.weight*weight
			if rare && 2*len(ix.postings[e.term]) > n {
				// A word in most items adds little to any score, and
				// reading its postings costs the most; with rarer words
				// in the query, it is left out (and not highlighted).
				continue
			}
			for _, p := range ix.postings[e.term] {
				d := p.doc
				if o.Location != "" && ix.docs[d].Location != o.Location {
					continue
				}
				a := &as[d]
				if a.bestCover == 0 {
					termDocs = append(termDocs, d)
				}
				a.best = max(a.best, ew*float64(p.w))
				a.bestCover = max(a.bestCover, cover)
				a.matched |= bit
			}
		}
		for _, d := range termDocs {
			a := &as[d]
			a.score += a.best
			a.covered += a.bestCover
			a.best, a.bestCover = 0, 0
			if !a.seen {
				a.seen = true
				touched = append(touched, d)
			}
		}
	}
	// Best member per group. Ranking is plain BM25F: weighting it further
	// by the share of the query matched scored worse on the evaluation set.
	gb := sc.groupBest
	top := make([]int32, 0, len(touched))
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
	less := func(a, b int32) int {
		if c := cmp.Compare(as[b].score, as[a].score); c != 0 {
			return c
		}
		return strings.Compare(ix.docs[a].group(), ix.docs[b].group())
	}
	top = topK(top, o.Limit, less)
	out := make([]Result, 0, len(top))
	for _, d := range top {
		terms := map[string]bool{}
		for i, t := range allExps[:min(len(allExps), 64)] {
			if as[d].matched&(1<<i) != 0 {
				terms[t] = true
			}
		}
		out = append(out, Result{Index: int(d), Doc: &ix.docs[d], Score: as[d].score, Confidence: math.Min(1, as[d].covered/total), Terms: terms})
	}
	// Clean only what this search touched before the next one.
	for _, d := range touched {
		as[d] = acc{}
		gb[ix.groupOf[d]] = -1
	}
	ix.scratch.Put(sc)
	return out
}

// topK returns the k best of items, in order, without sorting them all.
func topK(items []int32, k int, cmpFn func(a, b int32) int) []int32 {
	if len(items) > 4*k {
		// Keep a sorted window of the k best seen so far.
		window := make([]int32, 0, k+1)
		for _, it := range items {
			if len(window) == k && cmpFn(it, window[k-1]) >= 0 {
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

// termSet turns matched terms into the index's term numbers.
func (ix *Index) termSet(terms map[string]bool) map[uint32]bool {
	out := make(map[uint32]bool, len(terms))
	for t := range terms {
		if id, ok := ix.termIDs[t]; ok {
			out[id] = true
		}
	}
	return out
}

// spansIn returns the words of item doc's body that start in [from, to).
func (ix *Index) spansIn(doc int, from, to int) []tokSpan {
	sp := ix.bodySpans[doc]
	lo, _ := slices.BinarySearchFunc(sp, uint32(from), func(s tokSpan, v uint32) int { return cmp.Compare(s.start, v) })
	hi, _ := slices.BinarySearchFunc(sp, uint32(to), func(s tokSpan, v uint32) int { return cmp.Compare(s.start, v) })
	return sp[lo:hi]
}

// HighlightsIn are where the matched terms stand in item doc's body
// between from and to (UTF-16), relative to from, not overlapping.
func (ix *Index) HighlightsIn(doc int, terms map[string]bool, from, to int) []Span {
	ids := ix.termSet(terms)
	var out []Span
	for _, s := range ix.spansIn(doc, from, to) {
		if !ids[s.term] || int(s.end) > to {
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
