package embeddings

import (
	"cmp"
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
	p, ok := v.Probe([]float32{3, 4})
	if got := v.Similarity(0, p); !ok || math.Abs(float64(got)-1) > 1e-3 {
		t.Errorf("similarity after changing the input = %v (probe %v)", got, ok)
	}
}

func TestSimilarity(t *testing.T) {
	v, err := NewVectors([][]float32{{1, 0}, {0, 2}, {0, 0}, {3, 4}, {-3, 4}})
	if err != nil {
		t.Fatal(err)
	}
	p, ok := v.Probe([]float32{2, 0})
	if !ok {
		t.Fatal("no probe of a valid question")
	}
	want := []float32{1, 0, 0, 0.6, -0.6}
	all := make([]float32, v.Len())
	v.SimilaritiesTo(p, 0, v.Len(), all)
	for i, w := range want {
		if got := v.Similarity(i, p); math.Abs(float64(got-w)) > 2e-3 {
			t.Errorf("vector %d: similarity %v, want %v", i, got, w)
		}
		if all[i] != v.Similarity(i, p) {
			t.Errorf("vector %d: %v in one pass, %v alone", i, all[i], v.Similarity(i, p))
		}
	}
	part := make([]float32, 2)
	v.SimilaritiesTo(p, 3, 5, part)
	if part[0] != all[3] || part[1] != all[4] {
		t.Errorf("vectors 3 and 4 from 3: %v, want %v", part, all[3:5])
	}
	for _, q := range [][]float32{{1}, {0, 0}, {float32(math.NaN()), 1}, {float32(math.Inf(1)), 0}} {
		if _, ok := v.Probe(q); ok {
			t.Errorf("Probe(%v) accepted", q)
		}
	}
	empty, _ := NewVectors(nil)
	if _, ok := empty.Probe([]float32{1}); ok {
		t.Error("a probe of no vectors")
	}
}

// TestSimilarityAccuracy holds the 8-bit rows to their purpose: on
// random vectors of the encoder's shape, every similarity is within
// 0.002 of the exact cosine, and the differences rankings act on keep
// their order.
func TestSimilarityAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n, dim = 500, 512
	vs := make([][]float32, n)
	for i := range vs {
		vs[i] = randomVector(rng, dim)
	}
	v, err := NewVectors(vs)
	if err != nil {
		t.Fatal(err)
	}
	var worst float64
	for range 20 {
		// A question near vector 0, so similarities span a useful range.
		q := randomVector(rng, dim)
		for j := range q {
			q[j] = 0.7*q[j] + vs[0][j]*3
		}
		p, ok := v.Probe(q)
		if !ok {
			t.Fatal("no probe")
		}
		for i, x := range vs {
			worst = max(worst, math.Abs(float64(v.Similarity(i, p))-cosine(x, q)))
		}
	}
	if worst > 2e-3 {
		t.Errorf("largest error %.5f, want at most 0.002", worst)
	}
	t.Logf("largest error of %d similarities: %.5f", 20*n, worst)
}

func randomVector(rng *rand.Rand, dim int) []float32 {
	x := make([]float32, dim)
	for j := range x {
		x[j] = float32(rng.NormFloat64())
	}
	return x
}

func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}

// TestDotKernels holds the CPU's dot product to Go's, exactly (integer
// arithmetic), on lengths around its block sizes and at the extremes of
// both types, so a model of any dimension is measured alike.
func TestDotKernels(t *testing.T) {
	fast := bestDot()
	for _, n := range []int{0, 1, 15, 16, 17, 31, 32, 33, 100, 512, 513} {
		for _, extreme := range []bool{false, true} {
			a, b := make([]int8, n), make([]int16, n)
			for i := range a {
				a[i] = int8(i%29 - 14)
				b[i] = int16((i*7919)%2001 - 1000)
				if extreme {
					a[i], b[i] = -128, -32768
				}
			}
			if want, got := dot(a, b), fast(a, b); got != want {
				t.Errorf("length %d (extreme %v): dot %d, Go's %d", n, extreme, got, want)
			}
		}
	}
}

// BenchmarkSimilarities16k measures a question's similarity to 16,000
// vectors of 512 dimensions in one pass: what ranking 10,000 documents
// by meaning reads.
func BenchmarkSimilarities16k(b *testing.B) {
	v, p, dst := vectors16k(b)
	b.SetBytes(int64(len(v.rows)))
	for b.Loop() {
		v.SimilaritiesTo(p, 0, v.Len(), dst)
	}
}

// TestEstimates holds the sketch's estimates to what choosing rows needs:
// on vectors that share a direction, as a model's do, the estimates are
// within a few hundredths of the cosine on average, and the rows nearest
// by estimate hold the nearest by measure.
func TestEstimates(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const n, dim, topics = 4000, 512, 40
	shared := randomVector(rng, dim)
	centres := make([][]float32, topics)
	for i := range centres {
		centres[i] = randomVector(rng, dim)
	}
	vs := make([][]float32, n)
	for i := range vs {
		vs[i] = randomVector(rng, dim)
		for j := range vs[i] {
			vs[i][j] = 0.8*vs[i][j] + centres[i%topics][j] + 1.5*shared[j]
		}
	}
	vs[7] = make([]float32, dim) // a zero vector
	v, err := NewVectors(vs)
	if err != nil {
		t.Fatal(err)
	}
	var sumErr float64
	var missed int
	const questions, top, chosen = 20, 10, 100
	est, exact := make([]float32, n), make([]float32, n)
	for k := range questions {
		q := randomVector(rng, dim)
		for j := range q {
			q[j] = 0.9*q[j] + centres[k][j] + 1.5*shared[j]
		}
		p, ok := v.Probe(q)
		if !ok {
			t.Fatal("no probe")
		}
		v.EstimatesTo(p, 0, n, est)
		v.SimilaritiesTo(p, 0, n, exact)
		for i := range n {
			sumErr += math.Abs(float64(est[i] - exact[i]))
		}
		byEst, byExact := order(est), order(exact)
		near := map[int]bool{}
		for _, i := range byEst[:chosen] {
			near[i] = true
		}
		for _, i := range byExact[:top] {
			if !near[i] {
				missed++
			}
		}
	}
	meanErr := sumErr / (questions * n)
	t.Logf("mean error %.4f; %d of the %d nearest outside the %d nearest by estimate", meanErr, missed, questions*top, chosen)
	if meanErr > 0.05 {
		t.Errorf("mean error %.4f, want at most 0.05", meanErr)
	}
	if missed > 0 {
		t.Errorf("%d of the %d nearest rows are not among the %d nearest by estimate", missed, questions*top, chosen)
	}
	// Bounds are checked like SimilaritiesTo's: a part of the rows.
	part := make([]float32, 3)
	p, _ := v.Probe(vs[10])
	v.EstimatesTo(p, 9, 12, part)
	if part[1] < 0.9 {
		t.Errorf("a row's estimate of itself is %.3f, want about 1", part[1])
	}
}

// order is the indexes of xs, largest value first.
func order(xs []float32) []int {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(xs[b], xs[a]) })
	return idx
}

// BenchmarkEstimates16k is BenchmarkSimilarities16k from the sketch.
func BenchmarkEstimates16k(b *testing.B) {
	v, p, dst := vectors16k(b)
	b.SetBytes(int64(len(v.signs) * 8))
	for b.Loop() {
		v.EstimatesTo(p, 0, v.Len(), dst)
	}
}

// TestSketchByDimension: a row's estimate of itself is 1, for dimensions
// below, at and between multiples of 64 bits.
func TestSketchByDimension(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, dim := range []int{3, 64, 100, 512} {
		vs := make([][]float32, 50)
		for i := range vs {
			vs[i] = randomVector(rng, dim)
		}
		v, err := NewVectors(vs)
		if err != nil {
			t.Fatal(err)
		}
		for i := range vs {
			p, _ := v.Probe(vs[i])
			est := make([]float32, 1)
			v.EstimatesTo(p, i, i+1, est)
			if math.Abs(float64(est[0])-1) > 1e-3 {
				t.Errorf("dimension %d: row %d estimates itself at %v, want 1", dim, i, est[0])
			}
		}
	}
}

// vectors16k are 16,000 random vectors of 512 dimensions, a question's
// probe and room for its similarities.
func vectors16k(b *testing.B) (*Vectors, Probe, []float32) {
	rng := rand.New(rand.NewPCG(3, 4))
	vs := make([][]float32, 16_000)
	for i := range vs {
		vs[i] = randomVector(rng, 512)
	}
	v, err := NewVectors(vs)
	if err != nil {
		b.Fatal(err)
	}
	p, _ := v.Probe(randomVector(rng, 512))
	return v, p, make([]float32, v.Len())
}
