package search

import (
	"cmp"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Candidate is a text that may be suggested.
type Candidate struct {
	Text string
	// Kind tells where it comes from (INTENT, FAQ, HISTORICAL).
	Kind string
	// Answer is an instant answer shown with it, if any.
	Answer string
	// Weight orders candidates that match equally well (how often a
	// query was asked, say).
	Weight float64
}

// Suggestion is a matched candidate with the part that matched.
type Suggestion struct {
	Candidate
	// Bold is the matched part of Text, in UTF-16 code units.
	Bold Span
	// Exact is false when the match needed one edit.
	Exact bool
	// AtStart is true when the text starts with the match, false when a
	// later word does.
	AtStart bool
	// Bolds, when not nil, are the words of a text found by meaning that
	// matched (Bold is then empty).
	Bolds []Span
}

// folded is a text folded for matching, with each folded rune's offset
// in the original text (UTF-16).
type folded struct {
	runes []rune
	at    []int // at[i] is where folded rune i starts; at[len] is the end
	// starts are where words begin in runes.
	starts []int32
}

// foldMap folds s; with offsets false, only runes are filled in (all a
// typed query needs).
func foldMap(s string, offsets bool) folded {
	var f folded
	if !offsets {
		f.runes = make([]rune, 0, len(s))
	}
	u := 0
	space := true
	var one [1]rune
	for _, r := range s {
		var fr []rune
		switch {
		case unicode.IsSpace(r):
			one[0], fr = ' ', one[:]
		case r < utf8.RuneSelf:
			one[0], fr = unicode.ToLower(r), one[:]
		default:
			fr = []rune(fold(string(r)))
		}
		for _, x := range fr {
			if x == ' ' && space {
				continue // leading and repeated spaces
			}
			space = x == ' '
			f.runes = append(f.runes, x)
			if offsets {
				f.at = append(f.at, u)
			}
		}
		u += utf16.RuneLen(r)
	}
	for len(f.runes) > 0 && f.runes[len(f.runes)-1] == ' ' {
		f.runes = f.runes[:len(f.runes)-1]
	}
	if !offsets {
		return f
	}
	f.at = append(f.at[:len(f.runes)], u)
	for i := range f.runes {
		if f.runes[i] != ' ' && (i == 0 || f.runes[i-1] == ' ') {
			f.starts = append(f.starts, int32(i))
		}
	}
	return f
}

// Suggester matches typed text against candidates. It is immutable and
// safe for concurrent use.
type Suggester struct {
	cands  []Candidate
	folds  []folded
	byKind map[string][]entry
}

// entry is one word start of a candidate: the folded text from there to
// the end. Entries are sorted by text, so the candidates with a word that
// begins with the typed text are one range of them.
type entry struct {
	text  []rune
	cand  int32
	start int32
}

// NormalText is the form under which texts count as one: lower case,
// single spaces.
func NormalText(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }

// NewSuggester indexes candidates. Candidates of one kind whose texts are
// the same (see NormalText) are one: the one of highest weight, or else
// the first.
func NewSuggester(cands []Candidate) *Suggester {
	s := &Suggester{byKind: map[string][]entry{}}
	type key struct{ kind, text string }
	first := map[key]int{}
	for _, c := range cands {
		k := key{c.Kind, NormalText(c.Text)}
		if i, ok := first[k]; ok {
			if c.Weight > s.cands[i].Weight {
				s.cands[i] = c
			}
			continue
		}
		first[k] = len(s.cands)
		s.cands = append(s.cands, c)
	}
	s.folds = make([]folded, len(s.cands))
	for i, c := range s.cands {
		s.folds[i] = foldMap(c.Text, true)
		f := &s.folds[i]
		for _, st := range f.starts {
			s.byKind[c.Kind] = append(s.byKind[c.Kind], entry{text: f.runes[st:], cand: int32(i), start: st})
		}
	}
	for _, es := range s.byKind {
		slices.SortFunc(es, func(a, b entry) int { return slices.Compare(a.text, b.text) })
	}
	return s
}

// prefixRange is the range of es whose text begins with p.
func prefixRange(es []entry, p []rune) []entry {
	lo, _ := slices.BinarySearchFunc(es, p, func(e entry, p []rune) int { return slices.Compare(e.text, p) })
	hi := lo + sort.Search(len(es)-lo, func(i int) bool {
		t := es[lo+i].text
		return len(t) < len(p) || !slices.Equal(t[:len(p)], p)
	})
	return es[lo:hi]
}

// minTypoRunes is the shortest typed text matched with one edit: one
// edit in a shorter one matches too much.
const minTypoRunes = 5

// scanRange is the size under which a range's entries are all checked
// for a match with one edit rather than narrowed further.
const scanRange = 16

// oneEditRanges calls visit with ranges of es that hold every entry with
// a prefix one edit from q, the edit after q's first letter (people
// rarely mistype the first letter). The ranges may hold other entries
// too. Entries beginning with q[:p] are one range; in it, the edits at
// letter p are a few narrower ranges: q[p] typed too many, swapped with
// the next letter, replaced by another, or another left out before it.
// Then the search goes on in the range beginning with q[:p+1].
func oneEditRanges(es []entry, q []rune, visit func([]entry)) {
	buf := make([]rune, 0, len(q)+1)
	with := func(parts ...[]rune) []rune {
		buf = buf[:0]
		for _, p := range parts {
			buf = append(buf, p...)
		}
		return buf
	}
	r := prefixRange(es, q[:1])
	for p := 1; p < len(q) && len(r) > 0; p++ {
		if len(r) <= scanRange {
			visit(r)
			return
		}
		visit(prefixRange(r, with(q[:p], q[p+1:]))) // q[p] typed too many
		if p+1 < len(q) {
			visit(prefixRange(r, with(q[:p], q[p+1:p+2], q[p:p+1], q[p+2:]))) // swapped
		}
		// r is sorted by the letter at p; texts that end at p come first.
		i := sort.Search(len(r), func(i int) bool { return len(r[i].text) > p })
		next := r[:0]
		for i < len(r) {
			c := r[i].text[p]
			j := i + sort.Search(len(r)-i, func(k int) bool { return r[i+k].text[p] > c })
			run := r[i:j]
			switch {
			case c == q[p]:
				next = run
			case len(run) <= scanRange:
				visit(run)
			default:
				visit(prefixRange(run, with(q[:p], []rune{c}, q[p+1:]))) // replaced
				visit(prefixRange(run, with(q[:p], []rune{c}, q[p:])))   // c left out of q
			}
			i = j
		}
		r = next
	}
}

// Match returns the candidates of the given kinds (all when kinds is
// empty) that q begins, at most limit: exact matches before those with one
// edit; within each, candidates that start with q before those with a
// later word that does; then by weight and text. typos allows matches
// with one edit after the first letter.
func (s *Suggester) Match(q string, kinds map[string]bool, limit int, typos bool) []Suggestion {
	fq := foldMap(q, false).runes
	if len(fq) == 0 {
		return nil
	}
	type hit struct {
		start, end int
		exact      bool
	}
	hits := map[int32]hit{}
	better := func(a, b hit) bool { // a better than b
		if a.exact != b.exact {
			return a.exact
		}
		return a.start < b.start
	}
	add := func(c int32, h hit) {
		if cur, ok := hits[c]; !ok || better(h, cur) {
			hits[c] = h
		}
	}
	for kind, es := range s.byKind {
		if len(kinds) > 0 && !kinds[kind] {
			continue
		}
		for _, e := range prefixRange(es, fq) {
			add(e.cand, hit{int(e.start), int(e.start) + len(fq), true})
		}
		if !typos || len(fq) < minTypoRunes {
			continue
		}
		oneEditRanges(es, fq, func(r []entry) {
			for _, e := range r {
				if n, ok := oneEditPrefix(fq, e.text); ok {
					add(e.cand, hit{int(e.start), int(e.start) + n, false})
				}
			}
		})
	}
	type scored struct {
		Suggestion
		rank int
	}
	out := make([]scored, 0, len(hits))
	for c, h := range hits {
		f := &s.folds[c]
		rank := 0
		if !h.exact {
			rank += 2
		}
		if h.start > 0 {
			rank++
		}
		out = append(out, scored{Suggestion{Candidate: s.cands[c], Bold: Span{f.at[h.start], f.at[h.end]}, Exact: h.exact, AtStart: h.start == 0}, rank})
	}
	slices.SortFunc(out, func(a, b scored) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(b.Weight, a.Weight), strings.Compare(a.Text, b.Text))
	})
	res := make([]Suggestion, 0, min(len(out), limit))
	for _, o := range out[:min(len(out), limit)] {
		res = append(res, o.Suggestion)
	}
	return res
}

// oneEditPrefix reports whether some prefix of t is one edit from q
// (a letter replaced, added, dropped, or two swapped), and its length. An
// exact prefix is not reported: the exact pass has it.
func oneEditPrefix(q, t []rune) (n int, ok bool) {
	l := 0
	for l < len(q) && l < len(t) && q[l] == t[l] {
		l++
	}
	if l == len(q) {
		return 0, false // exact
	}
	rest := func(a, b []rune) bool { return len(b) >= len(a) && slices.Equal(a, b[:len(a)]) }
	switch {
	case l+1 <= len(t) && rest(q[l+1:], t[l+1:]): // replaced
		return len(q), true
	case l+1 < len(q) && l+1 < len(t) && q[l] == t[l+1] && q[l+1] == t[l] && rest(q[l+2:], t[l+2:]): // swapped
		return len(q), true
	case rest(q[l+1:], t[l:]): // a letter too many typed
		return len(q) - 1, true
	case l+1 <= len(t) && rest(q[l:], t[l+1:]): // a letter left out
		return len(q) + 1, true
	}
	return 0, false
}
