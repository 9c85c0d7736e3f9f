package embeddings

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestNewVectors(t *testing.T) {
	tests := []struct {
		name    string
		vs      [][]float32
		wantErr string
		len     int
		dim     int
	}{
		{"none", nil, "", 0, 0},
		{"ok", [][]float32{{1, 0}, {0, 2}}, "", 2, 2},
		{"zero vector allowed", [][]float32{{0, 0}, {1, 1}}, "", 2, 2},
		{"mixed dims", [][]float32{{1, 0}, {1, 0, 0}}, "vector 1 has 3 dimensions, vector 0 has 2", 0, 0},
		{"empty", [][]float32{{}}, "vector 0 is empty", 0, 0},
		{"NaN", [][]float32{{1, float32(math.NaN())}}, "value 1", 0, 0},
		{"Inf", [][]float32{{float32(math.Inf(1)), 0}}, "not a finite number", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := NewVectors(tt.vs)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if v.Len() != tt.len || v.Dim() != tt.dim {
				t.Errorf("len %d dim %d, want %d %d", v.Len(), v.Dim(), tt.len, tt.dim)
			}
		})
	}
}

func TestNewVectorsCopies(t *testing.T) {
	in := [][]float32{{3, 4}}
	v, err := NewVectors(in)
	if err != nil {
		t.Fatal(err)
	}
	in[0][0] = -100
	got := v.Nearest([]float32{3, 4}, 1, nil)
	if len(got) != 1 || math.Abs(float64(got[0].Score)-1) > 1e-6 {
		t.Errorf("Nearest after changing the input = %v", got)
	}
}

func TestNearest(t *testing.T) {
	s2 := float32(math.Sqrt2 / 2)
	vs := [][]float32{
		0: {1, 0, 0},
		1: {0, 1, 0},
		2: {1, 1, 0},  // 45° from 0 and 1
		3: {-1, 0, 0}, // opposite 0
		4: {0, 0, 0},  // never matches
		5: {10, 0, 0}, // same direction as 0, longer
		6: {0, 0, 5},
	}
	v, err := NewVectors(vs)
	if err != nil {
		t.Fatal(err)
	}
	even := func(i int) bool { return i%2 == 0 }
	tests := []struct {
		name string
		q    []float32
		k    int
		keep func(int) bool
		want []Hit
	}{
		{"exact, ties by index", []float32{2, 0, 0}, 3, nil, []Hit{{0, 1}, {5, 1}, {2, s2}}},
		{"between", []float32{1, 1, 0}, 3, nil, []Hit{{2, 1}, {0, s2}, {1, s2}}},
		{"keep filter", []float32{0, 1, 0}, 2, even, []Hit{{2, s2}, {0, 0}}},
		{"k beyond n skips zero vector", []float32{1, 0, 0}, 100, nil, []Hit{
			{0, 1}, {5, 1}, {2, s2}, {1, 0}, {6, 0}, {3, -1},
		}},
		{"keep none", []float32{1, 0, 0}, 3, func(int) bool { return false }, nil},
		{"k zero", []float32{1, 0, 0}, 0, nil, nil},
		{"zero query", []float32{0, 0, 0}, 3, nil, nil},
		{"NaN query", []float32{float32(math.NaN()), 0, 0}, 3, nil, nil},
		{"wrong dimension", []float32{1, 0}, 3, nil, nil},
		{"unnormalised query", []float32{0, 0, 0.001}, 1, nil, []Hit{{6, 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := v.Nearest(tt.q, tt.k, tt.keep)
			if len(got) != len(tt.want) {
				t.Fatalf("Nearest = %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i].Index != tt.want[i].Index || math.Abs(float64(got[i].Score-tt.want[i].Score)) > 1e-6 {
					t.Fatalf("Nearest = %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestNearestEmpty(t *testing.T) {
	v, err := NewVectors(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := v.Nearest([]float32{1}, 3, nil); got != nil {
		t.Errorf("Nearest on no vectors = %v", got)
	}
}

// TestNearestAgainstSort checks the heap against a full sort on random data.
func TestNearestAgainstSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	vs := randomVectors(rng, 500, 17)
	v, err := NewVectors(vs)
	if err != nil {
		t.Fatal(err)
	}
	for trial := range 20 {
		q := randomVectors(rng, 1, 17)[0]
		all := v.Nearest(q, v.Len(), nil)
		if len(all) != v.Len() {
			t.Fatalf("k=n gave %d hits", len(all))
		}
		sorted := slices.IsSortedFunc(all, func(a, b Hit) int {
			if a.Score != b.Score {
				if a.Score > b.Score {
					return -1
				}
				return 1
			}
			return a.Index - b.Index
		})
		if !sorted {
			t.Fatalf("trial %d: hits not best first", trial)
		}
		for _, k := range []int{1, 5, 37} {
			if got := v.Nearest(q, k, nil); !slices.Equal(got, all[:k]) {
				t.Fatalf("trial %d: top %d = %v, want %v", trial, k, got, all[:k])
			}
		}
	}
}

func TestNearestAllocations(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	v, err := NewVectors(randomVectors(rng, 2000, 64))
	if err != nil {
		t.Fatal(err)
	}
	q := randomVectors(rng, 1, 64)[0]
	allocs := testing.AllocsPerRun(20, func() { v.Nearest(q, 10, nil) })
	if allocs > 1 {
		t.Errorf("Nearest allocates %v times per query, want at most 1", allocs)
	}
}

func randomVectors(rng *rand.Rand, n, dim int) [][]float32 {
	vs := make([][]float32, n)
	for i := range vs {
		vs[i] = make([]float32, dim)
		for j := range vs[i] {
			vs[i][j] = float32(rng.NormFloat64())
		}
	}
	return vs
}

func BenchmarkNearest(b *testing.B) {
	const n, dim, k = 10_000, 768, 20
	rng := rand.New(rand.NewPCG(5, 6))
	v, err := NewVectors(randomVectors(rng, n, dim))
	if err != nil {
		b.Fatal(err)
	}
	q := randomVectors(rng, 1, dim)[0]
	b.Run("all", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v.Nearest(q, k, nil)
		}
	})
	b.Run("keep half", func(b *testing.B) {
		b.ReportAllocs()
		keep := func(i int) bool { return i%2 == 0 }
		for b.Loop() {
			v.Nearest(q, k, keep)
		}
	})
}

func TestSimilarities(t *testing.T) {
	v, err := NewVectors([][]float32{{1, 0}, {0, 2}, {0, 0}, {3, 4}})
	if err != nil {
		t.Fatal(err)
	}
	got := v.Similarities([]float32{2, 0}, make([]float32, 1)) // a short dst grows
	want := []float32{1, 0, 0, 0.6}
	if len(got) != len(want) {
		t.Fatalf("Similarities = %v, want %v", got, want)
	}
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > 1e-6 {
			t.Fatalf("Similarities = %v, want %v", got, want)
		}
	}
	for _, q := range [][]float32{{1}, {0, 0}, {float32(math.NaN()), 1}, {float32(math.Inf(1)), 0}} {
		if got := v.Similarities(q, nil); got != nil {
			t.Errorf("Similarities(%v) = %v, want nil", q, got)
		}
	}
	empty, _ := NewVectors(nil)
	if got := empty.Similarities([]float32{1}, nil); got != nil {
		t.Errorf("no vectors: %v", got)
	}
}
