package search

import (
	"cmp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf16"
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
}

func foldMap(s string) folded {
	var f folded
	u := 0
	space := true
	for _, r := range s {
		fr := []rune(fold(string(r)))
		if unicode.IsSpace(r) {
			fr = []rune{' '}
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
	return f
}

// Suggester matches typed text against candidates. It is immutable and
// safe for concurrent use.
type Suggester struct {
	cands []Candidate
	folds []folded
}

// NewSuggester indexes candidates.
func NewSuggester(cands []Candidate) *Suggester {
	s := &Suggester{cands: cands, folds: make([]folded, len(cands))}
	for i, c := range cands {
		s.folds[i] = foldMap(c.Text)
	}
	return s
}

// match tells how q matches c: at the start of the text (best), at the
// start of a later word, exactly or with one edit; ok is false when it
// does not. end is the length of c's matched part, in runes.
func match(q, c []rune) (start, end int, exact, ok bool) {
	for start = 0; start < len(c); start++ {
		if start > 0 && c[start-1] != ' ' {
			continue
		}
		rest := c[start:]
		if len(rest) >= len(q) && string(rest[:len(q)]) == string(q) {
			return start, start + len(q), true, true
		}
		if len(q) >= 5 { // one edit in a short prefix matches too much
			for _, n := range []int{len(q) - 1, len(q), len(q) + 1} {
				if n <= len(rest) && damerau1(string(q), string(rest[:n])) {
					return start, start + n, false, true
				}
			}
		}
	}
	return 0, 0, false, false
}

// Match returns the candidates of the given kinds (all when kinds is
// empty) that q begins: candidates that start with q first, then those
// with a word that does, exact matches before those with one edit, then
// by weight and text.
func (s *Suggester) Match(q string, kinds map[string]bool, limit int) []Suggestion {
	fq := foldMap(q).runes
	if len(fq) == 0 {
		return nil
	}
	type scored struct {
		Suggestion
		rank int
	}
	var out []scored
	for i, c := range s.cands {
		if len(kinds) > 0 && !kinds[c.Kind] {
			continue
		}
		f := s.folds[i]
		start, end, exact, ok := match(fq, f.runes)
		if !ok {
			continue
		}
		rank := 0
		if start > 0 {
			rank += 2
		}
		if !exact {
			rank++
		}
		out = append(out, scored{Suggestion{Candidate: c, Bold: Span{f.at[start], f.at[end]}, Exact: exact, AtStart: start == 0}, rank})
	}
	slices.SortStableFunc(out, func(a, b scored) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(b.Weight, a.Weight), strings.Compare(a.Text, b.Text))
	})
	res := make([]Suggestion, 0, min(len(out), limit))
	for _, o := range out[:min(len(out), limit)] {
		res = append(res, o.Suggestion)
	}
	return res
}
