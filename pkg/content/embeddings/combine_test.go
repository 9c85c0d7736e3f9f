package embeddings

import (
	"math"
	"testing"
)

func TestCombine(t *testing.T) {
	w := Weighting{Lexical: 0.5, Power: 2}
	tests := []struct {
		name       string
		items      []Evidence
		confidence float64
		w          Weighting
		limit      int
		want       []Fused
	}{
		{"none", nil, 1, w, 0, nil},
		{"a lexical top that matched the whole question stays on top", []Evidence{
			{Item: 1, Lexical: 1, Similarity: 0.50},
			{Item: 2, Lexical: 0.6, Similarity: 0.62},
			{Item: 3, Similarity: 0.70}, // found by meaning alone
		}, 1, w, 0, []Fused{{1, 1.0}, {2, 0.92}, {3, 0.70}}},
		{"a lexical top that matched half of it yields to meaning", []Evidence{
			{Item: 1, Lexical: 1, Similarity: 0.50},
			{Item: 2, Lexical: 0.6, Similarity: 0.62},
			{Item: 3, Similarity: 0.70},
		}, 0.5, w, 0, []Fused{{3, 0.70}, {2, 0.62 + 0.125*0.6}, {1, 0.625}}},
		{"no lexical match: meaning alone", []Evidence{{Item: 4, Similarity: 0.2}, {Item: 5, Similarity: 0.3}}, 0, w, 0,
			[]Fused{{5, 0.3}, {4, 0.2}}},
		{"confidence beyond 0 to 1 is clamped", []Evidence{{Item: 1, Lexical: 1}, {Item: 2, Similarity: 0.6}}, 7, w, 0,
			[]Fused{{2, 0.6}, {1, 0.5}}},
		{"ties by lower item", []Evidence{{Item: 9, Similarity: 0.4}, {Item: 3, Similarity: 0.4}}, 1, w, 0,
			[]Fused{{3, 0.4}, {9, 0.4}}},
		{"non-finite evidence counts as none", []Evidence{
			{Item: 1, Lexical: math.NaN(), Similarity: math.Inf(1)},
			{Item: 2, Similarity: 0.1},
		}, math.NaN(), Weighting{Lexical: math.Inf(1), Power: math.NaN()}, 0, []Fused{{2, 0.1}, {1, 0}}},
		{"limit", []Evidence{{Item: 1, Similarity: 0.1}, {Item: 2, Similarity: 0.3}, {Item: 3, Similarity: 0.2}}, 0, w, 2,
			[]Fused{{2, 0.3}, {3, 0.2}}},
		{"weights off: meaning alone", []Evidence{{Item: 1, Lexical: 1, Similarity: 0.1}, {Item: 2, Similarity: 0.3}}, 1, Weighting{}, 0,
			[]Fused{{2, 0.3}, {1, 0.1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Combine(tt.items, tt.confidence, tt.w, tt.limit)
			if len(got) != len(tt.want) {
				t.Fatalf("Combine = %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i].Item != tt.want[i].Item || math.Abs(got[i].Score-tt.want[i].Score) > 1e-9 {
					t.Fatalf("Combine = %v, want %v", got, tt.want)
				}
			}
		})
	}
}
