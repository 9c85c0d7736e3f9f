// Package gapgroup groups the questions an assistant could not answer by
// what they ask, so that an author sees one need with its wordings
// ("do you sell skateboards", "skateboards available?", "can i buy a
// skateboard here") rather than each wording apart.
//
// Vectors are first centred: the encoder's vectors of short questions
// share a large common direction, and similarities of what is left
// separate needs better (on the labelled wordings, precision 0.55 rather
// than 0.20 at the same threshold). The centre is the wordings' mean
// weighed with a reference mean, that of questions of every kind
// (ReferenceQuestions), as if it were ReferenceWeight wordings more: a
// few wordings' own mean would be mostly what tells them apart.
//
// Grouping is by leaders: wordings are taken most asked first; each joins
// the group whose leader (its first, most asked wording) it is most
// similar to, when that similarity reaches the threshold, and otherwise
// leads a group of its own. A wording is compared with the leaders only,
// never with a group's other members, so that a chain of small steps
// cannot carry a group from one need to another ("cancel my order",
// "cancel my subscription"). The cost is the wordings times the groups;
// ByMeaning reads 8-bit vectors for it.
//
// ByWords is the same grouping by shared words, the baseline ByMeaning is
// measured against (Pairwise).
package gapgroup

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/assistantcms/cms/pkg/content/embeddings"
)

// DefaultThreshold is the cosine similarity to a group's leader, of the
// centred vectors, from which a wording joins it, for the built-in
// encoder: it favours precision, as a group that mixes two needs hides
// one of them (the tests measure it on testdata/needs.json).
const DefaultThreshold = 0.5

// ReferenceWeight is how many wordings the reference mean counts for.
const ReferenceWeight = 100

// ReferenceQuestions are the texts whose mean vector (Mean of theirs) is
// the reference ByMeaning centres with.
func ReferenceQuestions() []string { return slices.Clone(referenceQuestions) }

// Mean is the mean of vectors, nil without any.
func Mean(vectors [][]float32) []float32 {
	if len(vectors) == 0 {
		return nil
	}
	sum := make([]float64, len(vectors[0]))
	for _, v := range vectors {
		for j := range min(len(v), len(sum)) {
			sum[j] += float64(v[j])
		}
	}
	out := make([]float32, len(sum))
	for j, x := range sum {
		out[j] = float32(x / float64(len(vectors)))
	}
	return out
}

// DefaultWordsThreshold is ByWords' least share of words in common.
const DefaultWordsThreshold = 0.5

// ByMeaning groups wordings by their vectors, vectors[i] being the i-th
// wording's, most asked first, centred with reference (the Mean of the
// ReferenceQuestions' vectors; nil: the wordings' own mean alone). Each group lists its wordings' indexes in
// order, its leader first; groups come in the order of their leaders. A
// zero vector (a wording the encoder made nothing of) leads a group of
// its own.
func ByMeaning(vectors [][]float32, reference []float32, threshold float32) ([][]int, error) {
	centred, err := centre(vectors, reference)
	if err != nil {
		return nil, fmt.Errorf("group by meaning: %w", err)
	}
	vs, err := embeddings.NewVectors(centred)
	if err != nil {
		return nil, fmt.Errorf("group by meaning: %w", err)
	}
	var groups [][]int
	for i := range centred {
		best, bestSim := -1, threshold
		if p, ok := vs.Probe(centred[i]); ok {
			for g, members := range groups {
				if s := vs.Similarity(members[0], p); s >= bestSim {
					best, bestSim = g, s
				}
			}
		}
		if best < 0 {
			groups = append(groups, []int{i})
			continue
		}
		groups[best] = append(groups[best], i)
	}
	return groups, nil
}

// centre returns vectors less their mean weighed with reference;
// NewVectors normalises them.
func centre(vectors [][]float32, reference []float32) ([][]float32, error) {
	if len(vectors) == 0 {
		return nil, nil
	}
	dim := len(vectors[0])
	mean := make([]float64, dim)
	n := float64(len(vectors))
	if reference != nil {
		if len(reference) != dim {
			return nil, fmt.Errorf("the reference has %d dimensions, the vectors %d", len(reference), dim)
		}
		for j, x := range reference {
			mean[j] = ReferenceWeight * float64(x)
		}
		n += ReferenceWeight
	}
	for i, v := range vectors {
		if len(v) != dim {
			return nil, fmt.Errorf("vector %d has %d dimensions, vector 0 has %d", i, len(v), dim)
		}
		for j, x := range v {
			mean[j] += float64(x)
		}
	}
	out := make([][]float32, len(vectors))
	flat := make([]float32, len(vectors)*dim)
	for i, v := range vectors {
		row := flat[i*dim : (i+1)*dim : (i+1)*dim]
		for j, x := range v {
			row[j] = x - float32(mean[j]/n)
		}
		out[i] = row
	}
	return out, nil
}

// ByWords groups texts by the words they share, in the order ByMeaning
// takes: a text joins the group whose leader shares the largest part of
// the words of both (Jaccard), at least threshold. Words are lower-cased
// runs of letters and digits, less a final "s" and the commonest words of
// English questions.
func ByWords(texts []string, threshold float64) [][]int {
	stop := stopWords()
	sets := make([]map[string]bool, len(texts))
	for i, t := range texts {
		sets[i] = words(t, stop)
	}
	var groups [][]int
	for i := range texts {
		best, bestShare := -1, threshold
		for g, members := range groups {
			if s := jaccard(sets[members[0]], sets[i]); s >= bestShare {
				best, bestShare = g, s
			}
		}
		if best < 0 {
			groups = append(groups, []int{i})
			continue
		}
		groups[best] = append(groups[best], i)
	}
	return groups
}

// stopWords are left out of ByWords' comparison: shared by most
// questions, they say nothing of the need.
func stopWords() map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.Fields("a an the i me my we our you your it its is are was be do doe did can could " +
		"will would should how what when where why who which to of in on at for from with by and or but " +
		"this that there here any some have has get got want need please") {
		out[w] = true
	}
	return out
}

// words are the distinct words of t that ByWords compares, less stop.
func words(t string, stop map[string]bool) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(t), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if len(w) > 3 {
			w = strings.TrimSuffix(w, "s")
		}
		if !stop[w] {
			out[w] = true
		}
	}
	return out
}

func jaccard(a, b map[string]bool) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	shared := 0
	for w := range a {
		if b[w] {
			shared++
		}
	}
	return float64(shared) / float64(len(a)+len(b)-shared)
}

// Pairwise measures groups against labels (labels[i] the need of item i):
// of the pairs of items grouped together, the share with one need
// (precision); of the pairs with one need, the share grouped together
// (recall). Without such pairs, the measure is 1.
func Pairwise(groups [][]int, labels []string) (precision, recall float64) {
	groupOf := make([]int, len(labels))
	for g, members := range groups {
		for _, i := range members {
			groupOf[i] = g
		}
	}
	var together, sameNeed, both int
	for i := range labels {
		for j := i + 1; j < len(labels); j++ {
			g, n := groupOf[i] == groupOf[j], labels[i] == labels[j]
			if g {
				together++
			}
			if n {
				sameNeed++
			}
			if g && n {
				both++
			}
		}
	}
	precision, recall = 1, 1
	if together > 0 {
		precision = float64(both) / float64(together)
	}
	if sameNeed > 0 {
		recall = float64(both) / float64(sameNeed)
	}
	return precision, recall
}
