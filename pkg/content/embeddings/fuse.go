package embeddings

import (
	"cmp"
	"math"
	"slices"
)

// DefaultRRFK is the customary reciprocal rank fusion constant: it damps the
// difference between the very top ranks so no single list dominates.
const DefaultRRFK = 60

// Ranking is one ranked list for Fuse: item numbers, best first, and the
// list's weight.
type Ranking struct {
	Items  []int
	Weight float64
}

// Fused is one item of Fuse's result with its fused score.
type Fused struct {
	Item  int
	Score float64
}

// Fuse combines rankings by reciprocal rank fusion: score(item) = sum over
// lists of weight/(k + rank), rank from 1. It returns items best first (ties
// broken by lower item number), at most limit of them; limit <= 0 means all.
//
// k <= 0 or non-finite means DefaultRRFK. Lists with a weight that is not
// positive and finite are skipped, so a list can be switched off by its
// weight. An item repeated within a list counts at its best rank only.
func Fuse(k float64, limit int, rankings []Ranking) []Fused {
	if !(k > 0) || math.IsInf(k, 0) {
		k = DefaultRRFK
	}
	n := 0
	for _, r := range rankings {
		n += len(r.Items)
	}
	if n == 0 {
		return nil
	}
	scores := make(map[int]float64, n)
	seen := make(map[int]struct{})
	for _, r := range rankings {
		if !(r.Weight > 0) || math.IsInf(r.Weight, 0) {
			continue
		}
		clear(seen)
		for i, item := range r.Items {
			if _, dup := seen[item]; dup {
				continue
			}
			seen[item] = struct{}{}
			scores[item] += r.Weight / (k + float64(i+1))
		}
	}
	out := make([]Fused, 0, len(scores))
	for item, s := range scores {
		out = append(out, Fused{Item: item, Score: s})
	}
	slices.SortFunc(out, func(a, b Fused) int {
		// Equal rank sets summed in another order may differ in the last
		// bit; treat those as the ties they are.
		if math.Abs(a.Score-b.Score) > 1e-12*max(a.Score, b.Score) {
			return cmp.Compare(b.Score, a.Score)
		}
		return cmp.Compare(a.Item, b.Item)
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit:limit]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
