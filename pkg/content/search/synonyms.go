package search

import (
	"slices"
)

// synonymWeight is how much a match on a synonym of a query word counts:
// well below an exact match, so that the words the user typed still rank
// first.
const synonymWeight = 0.4

// maxSynonyms bounds the synonyms a term expands to, so that a word in
// many sets does not make every query on it read many posting lists.
const maxSynonyms = 8

// Alternatives finds words used interchangeably across texts that say the
// same thing (the question variants of one FAQ, the utterance patterns of
// one intent): two texts of the same length that differ in exactly one
// word give that pair. Texts differing in more places prove little about
// any one word, so they give nothing.
func Alternatives(texts []string) [][]string {
	split := make([][]token, 0, len(texts))
	for _, t := range texts {
		split = append(split, words(t, nil))
	}
	var out [][]string
	for i := range split {
		for j := i + 1; j < len(split); j++ {
			a, b := split[i], split[j]
			if len(a) != len(b) || len(a) < 2 {
				continue
			}
			diff := -1
			for k := range a {
				if a[k].term == b[k].term {
					continue
				}
				if diff >= 0 {
					diff = -2
					break
				}
				diff = k
			}
			if diff < 0 || a[diff].stop || b[diff].stop {
				continue
			}
			out = append(out, []string{a[diff].word, b[diff].word})
		}
	}
	return out
}

// synonymTable maps each stemmed term to the other terms of its sets,
// sorted, at most maxSynonyms. Entries of more than one word are left
// out: a phrase cannot stand for a single query word.
func synonymTable(sets [][]string) map[string][]string {
	if len(sets) == 0 {
		return nil
	}
	memo := &stems{m: map[string]string{}}
	all := map[string]map[string]bool{}
	for _, set := range sets {
		var terms []string
		for _, s := range set {
			toks := words(s, memo)
			if len(toks) != 1 || toks[0].stop {
				continue
			}
			if t := toks[0].term; !slices.Contains(terms, t) {
				terms = append(terms, t)
			}
		}
		for _, a := range terms {
			for _, b := range terms {
				if a == b {
					continue
				}
				if all[a] == nil {
					all[a] = map[string]bool{}
				}
				all[a][b] = true
			}
		}
	}
	if len(all) == 0 {
		return nil
	}
	out := make(map[string][]string, len(all))
	for t, syn := range all {
		list := make([]string, 0, len(syn))
		for s := range syn {
			list = append(list, s)
		}
		slices.Sort(list)
		out[t] = list[:min(len(list), maxSynonyms)]
	}
	return out
}
