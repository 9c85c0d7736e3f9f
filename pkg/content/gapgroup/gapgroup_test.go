package gapgroup

import (
	"fmt"
	"testing"
)

func TestPairwise(t *testing.T) {
	for _, tc := range []struct {
		name      string
		groups    [][]int
		labels    []string
		prec, rec float64
	}{
		{"perfect", [][]int{{0, 1}, {2, 3}}, []string{"a", "a", "b", "b"}, 1, 1},
		{"all apart", [][]int{{0}, {1}, {2}, {3}}, []string{"a", "a", "b", "b"}, 1, 0},
		{"all together", [][]int{{0, 1, 2, 3}}, []string{"a", "a", "b", "b"}, 2.0 / 6, 1},
		{"one wrong", [][]int{{0, 1, 2}, {3}}, []string{"a", "a", "b", "b"}, 1.0 / 3, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, r := Pairwise(tc.groups, tc.labels)
			if fmt.Sprintf("%.4f %.4f", p, r) != fmt.Sprintf("%.4f %.4f", tc.prec, tc.rec) {
				t.Errorf("precision %.4f recall %.4f, want %.4f %.4f", p, r, tc.prec, tc.rec)
			}
		})
	}
}

func TestByWords(t *testing.T) {
	got := fmt.Sprint(ByWords([]string{"do you sell skateboards", "Skateboards: do you sell them?", "opening hours", "what are your opening hours", "parking"}, 0.5))
	if want := "[[0 1] [2 3] [4]]"; got != want {
		t.Errorf("groups %s, want %s", got, want)
	}
}

func TestByMeaning(t *testing.T) {
	// Two directions and their neighbours, a zero vector, and a vector
	// halfway: the leaders are the first of each, most asked first.
	vs := [][]float32{{1, 0, 0}, {0, 1, 0}, {0.95, 0.05, 0}, {0, 0, 0}, {0.05, 0.9, 0.1}, {0.5, 0.5, 0}}
	groups, err := ByMeaning(vs, nil, 0.8)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(groups), "[[0 2] [1 4] [3] [5]]"; got != want {
		t.Errorf("groups %s, want %s", got, want)
	}
	if _, err := ByMeaning([][]float32{{1, 0}, {1}}, nil, 0.5); err == nil {
		t.Error("vectors of two dimensions grouped")
	}
	if groups, err := ByMeaning(nil, nil, 0.5); err != nil || len(groups) != 0 {
		t.Errorf("no vectors: %v, %v", groups, err)
	}
}
