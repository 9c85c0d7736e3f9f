package search

import (
	"cmp"
	"slices"
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
}

// folded is a text folded for matching, with each folded rune's offset
// in the original text (UTF-16).
type folded struct {
	runes []rune
	at    []int // at[i] is where folded rune i starts; at[len] is the end
	// starts are where words begin in runes.
	starts []int32
}

func foldMap(s string) folded {
	var f folded
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
			f.at = append(f.at, u)
		}
		u += utf16.RuneLen(r)
	}
	for len(f.runes) > 0 && f.runes[len(f.runes)-1] == ' ' {
		f.runes, f.at = f.runes[:len(f.runes)-1], f.at[:len(f.at)-1]
	}
	f.at = append(f.at, u)
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
	// skipped holds the same entries keyed by their text without its
	// second letter: matches with an edit at the second letter are one
	// range of it.
	skipped map[string][]entry
}

// entry is one word start of a candidate: the folded text from there to
// the end. Entries are sorted by text, so the candidates with a word that
// begins with the typed text are one range of them.
type entry struct {
	text  []rune
	cand  int32
	start int32
	// key is what the entry is sorted by: text, or in skipped, text
	// without its second letter.
	key []rune
}

// NewSuggester indexes candidates.
func NewSuggester(cands []Candidate) *Suggester {
	s := &Suggester{cands: cands, folds: make([]folded, len(cands)), byKind: map[string][]entry{}, skipped: map[string][]entry{}}
	for i, c := range cands {
		s.folds[i] = foldMap(c.Text)
		f := &s.folds[i]
		for _, st := range f.starts {
			text := f.runes[st:]
			s.byKind[c.Kind] = append(s.byKind[c.Kind], entry{text: text, cand: int32(i), start: st, key: text})
			if len(text) >= 2 {
				key := append([]rune{text[0]}, text[2:]...)
				s.skipped[c.Kind] = append(s.skipped[c.Kind], entry{text: text, cand: int32(i), start: st, key: key})
			}
		}
	}
	for _, m := range []map[string][]entry{s.byKind, s.skipped} {
		for _, es := range m {
			slices.SortFunc(es, func(a, b entry) int { return slices.Compare(a.key, b.key) })
		}
	}
	return s
}

// prefixRange is the range of es whose key begins with p.
func prefixRange(es []entry, p []rune) []entry {
	lo, _ := slices.BinarySearchFunc(es, p, func(e entry, p []rune) int { return slices.Compare(e.key, p) })
	hi := lo
	for hi < len(es) && len(es[hi].key) >= len(p) && slices.Equal(es[hi].key[:len(p)], p) {
		hi++
	}
	return es[lo:hi]
}

// minTypoRunes is the shortest typed text matched with one edit: one
// edit in a shorter one matches too much.
const minTypoRunes = 5

// Match returns the candidates of the given kinds (all when kinds is
// empty) that q begins: candidates that start with q first, then those
// with a word that does, exact matches before those with one edit, then
// by weight and text. typos allows matches with one edit after the first
// letter (people rarely mistype the first letter, and requiring it keeps
// the search to one range of the index).
func (s *Suggester) Match(q string, kinds map[string]bool, limit int, typos bool) []Suggestion {
	fq := foldMap(q).runes
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
		// The ranges that can hold a match with one edit after the first
		// letter: an edit after the second letter; the second letter
		// replaced, or one left out there; the second letter typed too
		// many, or swapped with the third.
		q0 := fq[:1]
		swapped := append([]rune{fq[0], fq[2], fq[1]}, fq[3:]...)
		for _, r := range [][]entry{
			prefixRange(es, fq[:2]),
			prefixRange(s.skipped[kind], append(slices.Clip(q0), fq[2:]...)),
			prefixRange(s.skipped[kind], append(slices.Clip(q0), fq[1:]...)),
			prefixRange(es, append(slices.Clip(q0), fq[2:]...)),
			prefixRange(es, swapped),
		} {
			for _, e := range r {
				if n, ok := oneEditPrefix(fq, e.text); ok {
					add(e.cand, hit{int(e.start), int(e.start) + n, false})
				}
			}
		}
	}
	type scored struct {
		Suggestion
		rank int
	}
	out := make([]scored, 0, len(hits))
	for c, h := range hits {
		f := &s.folds[c]
		rank := 0
		if h.start > 0 {
			rank += 2
		}
		if !h.exact {
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
