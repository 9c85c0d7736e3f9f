package search

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"strings"
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
	ix := &Index{docs: docs, titleLen: make([]uint16, len(docs)), bodyLen: make([]uint32, len(docs)),
		postings: map[string][]posting{}, deletions: map[string][]string{}}
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
		tt, bt := tokens(docs[i].Title), tokens(docs[i].Body)
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
	slices.SortFunc(ix.words, func(a, b wordStem) int { return strings.Compare(a.word, b.word) })
	for term := range ix.postings {
		for _, d := range deletes(term) {
			ix.deletions[d] = append(ix.deletions[d], term)
		}
	}
	return ix
}

// Len is the number of indexed items.
func (ix *Index) Len() int { return len(ix.docs) }

// Doc returns the indexed item i.
func (ix *Index) Doc(i int) *Doc { return &ix.docs[i] }

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
func damerau1(a, b string) bool {
	x, y := []rune(a), []rune(b)
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
		return string(x[i:]) == string(y[i+1:])
	case string(x[i+1:]) == string(y[i+1:]):
		return true // one letter replaced
	}
	return i+1 < len(x) && x[i] == y[i+1] && x[i+1] == y[i] && string(x[i+2:]) == string(y[i+2:])
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
	scores := map[int32]float64{}
	covered := map[int32]float64{}
	matched := map[int32]map[string]bool{}
	var total float64
	for i, term := range pq.terms {
		partial := ""
		if i == len(pq.terms)-1 && pq.partial != "" && stem(pq.partial) == term {
			partial = pq.partial
		}
		exps := ix.expand(term, partial)
		weight := ix.idf(term)
		if _, ok := ix.postings[term]; !ok {
			// An unknown word weighs what its best stand-in weighs.
			weight = 0
			for _, e := range exps {
				weight = math.Max(weight, ix.idf(e.term))
			}
			if weight == 0 {
				weight = math.Log(1 + float64(len(ix.docs))) // matched nowhere
			}
		}
		total += weight
		best := map[int32]float64{}
		bestCover := map[int32]float64{}
		for _, e := range exps {
			idf := ix.idf(e.term)
			for _, p := range ix.postings[e.term] {
				d := p.doc
				if o.Location != "" && ix.docs[d].Location != o.Location {
					continue
				}
				tf := titleWeight*float64(p.title)/(1-bParam+bParam*float64(ix.titleLen[d])/ix.avgTitle) +
					float64(p.body)/(1-bParam+bParam*float64(ix.bodyLen[d])/ix.avgBody)
				s := e.weight * idf * tf * (k1 + 1) / (tf + k1)
				if s > best[d] {
					best[d] = s
				}
				bestCover[d] = math.Max(bestCover[d], e.weight*weight)
				if matched[d] == nil {
					matched[d] = map[string]bool{}
				}
				matched[d][e.term] = true
			}
		}
		for d, s := range best {
			scores[d] += s
			covered[d] += bestCover[d]
		}
	}
	// Best member per group.
	byGroup := map[string]Result{}
	for d, s := range scores {
		// Ranking is plain BM25F: weighting it further by the share of the
		// query matched scored worse on the evaluation set.
		conf := covered[d] / total
		g := ix.docs[d].group()
		if cur, ok := byGroup[g]; !ok || s > cur.Score || (s == cur.Score && int(d) < cur.Index) {
			byGroup[g] = Result{Index: int(d), Doc: &ix.docs[d], Score: s, Confidence: math.Min(1, conf), Terms: matched[d]}
		}
	}
	out := make([]Result, 0, len(byGroup))
	for _, r := range byGroup {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Result) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return strings.Compare(a.Doc.group(), b.Doc.group())
	})
	return out[:min(len(out), o.Limit)]
}

// Span is a stretch of text in UTF-16 code units.
type Span struct{ Start, End int }

// Highlights are where the matched terms stand in text, in order, not
// overlapping (a hyphenated pair matched as one word is one highlight).
func Highlights(text string, terms map[string]bool) []Span {
	var out []Span
	for _, t := range tokens(text) {
		if terms[t.term] {
			out = append(out, Span{t.start, t.end})
		}
	}
	slices.SortFunc(out, func(a, b Span) int { return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(b.End, a.End)) })
	merged := out[:0]
	for _, s := range out {
		if n := len(merged); n > 0 && s.Start < merged[n-1].End {
			merged[n-1].End = max(merged[n-1].End, s.End)
			continue
		}
		merged = append(merged, s)
	}
	return merged
}
