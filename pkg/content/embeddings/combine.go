package embeddings

import (
	"cmp"
	"math"
	"slices"
)

// Fused is one item of Combine's result with its score.
type Fused struct {
	Item  int
	Score float64
}

// Evidence is what is known of one item for Combine: how it ranks
// lexically and how near it means.
type Evidence struct {
	Item int
	// Lexical is the item's lexical score over the best lexical score of
	// the question: 1 for the lexical top, 0 for an item not found
	// lexically.
	Lexical float64
	// Similarity is the cosine similarity of the item to the question.
	Similarity float64
}

// Weighting sets how Combine weighs lexical evidence against meaning.
type Weighting struct {
	// Lexical is the weight of the lexical score when the lexical top
	// matched the whole question.
	Lexical float64
	// Power is how steeply that weight falls as the lexical top matches
	// less of the question (confidence^Power).
	Power float64
}

// DefaultWeighting was measured on the labelled evaluation set (go run
// ./dev/searcheval) with the Universal Sentence Encoder: at 0.5 a lexical
// top that matched the whole question outweighs the usual differences in
// similarity among related texts (hundredths to a tenth), so keyword,
// typo and cut-short questions keep their lexical answer; squared, the
// weight is an eighth of that when half the question matched, and
// meaning decides what the user's own words missed. Weights from 0.4 to
// 0.6 with powers 2 and 3 scored within 0.01 of each other; this is the
// middle of that plateau. Choosing the weighting by five-fold
// cross-validation instead scored 0.01 to 0.02 lower on the held-out
// questions than on those it was chosen on.
var DefaultWeighting = Weighting{Lexical: 0.5, Power: 2}

// Combine ranks items by their evidence: score = Lexical weight ×
// confidence^Power × item.Lexical + item.Similarity, where confidence
// (0 to 1) is how much of the question the lexical top matched. Unlike
// rank fusion, it keeps how sure each side is: a lexical answer that
// matched the whole question stays on top unless meaning strongly
// prefers another, and a weak lexical match yields to meaning. It returns
// the best items first (ties by lower item), at most limit; limit <= 0
// means all. Non-finite evidence counts as none.
func Combine(items []Evidence, confidence float64, w Weighting, limit int) []Fused {
	if len(items) == 0 {
		return nil
	}
	confidence = finite(min(max(confidence, 0), 1))
	wl := finite(w.Lexical) * math.Pow(confidence, finite(w.Power))
	out := make([]Fused, 0, len(items))
	for _, e := range items {
		out = append(out, Fused{Item: e.Item, Score: wl*finite(e.Lexical) + finite(e.Similarity)})
	}
	slices.SortFunc(out, func(a, b Fused) int {
		return cmp.Or(cmp.Compare(b.Score, a.Score), cmp.Compare(a.Item, b.Item))
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit:limit]
	}
	return out
}

// finite is f, or 0 when f is NaN or infinite.
func finite(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}
