package embeddings

import (
	"fmt"
	"math"
	"slices"
)

// Vectors is an immutable set of unit-normalised vectors for nearest-neighbour
// search by cosine similarity. Search is an exhaustive scan: apps have
// thousands to tens of thousands of items, where a scan takes a few
// milliseconds and needs no index to build or tune. Safe for concurrent use.
type Vectors struct {
	n, dim int
	data   []float32 // n rows of dim, normalised
	zero   []bool    // rows that were zero vectors and never match
}

// Hit is one result of Nearest: the item's position in the slice given to
// NewVectors and its cosine similarity to the query.
type Hit struct {
	Index int
	Score float32
}

// NewVectors copies and normalises vs. All vectors must have one dimension
// and finite values; zero vectors are allowed and never match.
func NewVectors(vs [][]float32) (*Vectors, error) {
	v := &Vectors{n: len(vs)}
	if len(vs) == 0 {
		return v, nil
	}
	v.dim = len(vs[0])
	if v.dim == 0 {
		return nil, fmt.Errorf("embeddings: vectors: vector 0 is empty")
	}
	v.data = make([]float32, v.n*v.dim)
	v.zero = make([]bool, v.n)
	for i, x := range vs {
		if len(x) != v.dim {
			return nil, fmt.Errorf("embeddings: vectors: vector %d has %d dimensions, vector 0 has %d", i, len(x), v.dim)
		}
		var ss float64
		for j, f := range x {
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				return nil, fmt.Errorf("embeddings: vectors: vector %d, value %d: %w", i, j, errNonFinite)
			}
			ss += float64(f) * float64(f)
		}
		if ss == 0 {
			v.zero[i] = true
			continue
		}
		inv := 1 / math.Sqrt(ss)
		row := v.data[i*v.dim : (i+1)*v.dim]
		for j, f := range x {
			row[j] = float32(float64(f) * inv)
		}
	}
	return v, nil
}

// Len is the number of vectors.
func (v *Vectors) Len() int { return v.n }

// Dim is their dimension (0 when there are none).
func (v *Vectors) Dim() int { return v.dim }

// Nearest returns the k most similar items to q, best first (equal scores by
// lower index), among those keep accepts (nil keeps all). It returns nil for
// k <= 0, a query of another dimension, or a zero or non-finite query.
func (v *Vectors) Nearest(q []float32, k int, keep func(i int) bool) []Hit {
	if k <= 0 || v.n == 0 || len(q) != v.dim {
		return nil
	}
	var ss float64
	for _, f := range q {
		ss += float64(f) * float64(f)
	}
	if ss == 0 || math.IsNaN(ss) || math.IsInf(ss, 0) {
		return nil
	}
	// Scale scores instead of normalising q, which would need a copy.
	inv := float32(1 / math.Sqrt(ss))

	h := topK{hits: make([]Hit, 0, min(k, v.n)), k: min(k, v.n)}
	for i := range v.n {
		if v.zero[i] || (keep != nil && !keep(i)) {
			continue
		}
		s := dot(v.data[i*v.dim:(i+1)*v.dim], q) * inv
		h.offer(Hit{Index: i, Score: s})
	}
	return h.sorted()
}

// Similarities is the cosine similarity of q to every vector, in order,
// written into dst (grown when short); zero vectors score 0. It returns
// nil for a query of another dimension, or a zero or non-finite query.
func (v *Vectors) Similarities(q []float32, dst []float32) []float32 {
	if len(q) != v.dim || v.n == 0 {
		return nil
	}
	var ss float64
	for _, f := range q {
		ss += float64(f) * float64(f)
	}
	if ss == 0 || math.IsNaN(ss) || math.IsInf(ss, 0) {
		return nil
	}
	inv := float32(1 / math.Sqrt(ss))
	dst = slices.Grow(dst[:0], v.n)[:v.n]
	for i := range v.n {
		if v.zero[i] {
			dst[i] = 0
			continue
		}
		dst[i] = dot(v.data[i*v.dim:(i+1)*v.dim], q) * inv
	}
	return dst
}

// dot is the inner product of two slices of equal length, with independent
// accumulators so the additions pipeline.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		aa, bb := a[i:i+8:i+8], b[i:i+8:i+8]
		s0 += aa[0] * bb[0]
		s1 += aa[1] * bb[1]
		s2 += aa[2] * bb[2]
		s3 += aa[3] * bb[3]
		s4 += aa[4] * bb[4]
		s5 += aa[5] * bb[5]
		s6 += aa[6] * bb[6]
		s7 += aa[7] * bb[7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3) + (s4 + s5) + (s6 + s7)
}

// topK keeps the k best hits seen in a min-heap whose root is the worst kept.
type topK struct {
	hits []Hit
	k    int
}

// worse orders hits: lower score, then higher index, is worse.
func worse(a, b Hit) bool {
	if a.Score != b.Score {
		return a.Score < b.Score
	}
	return a.Index > b.Index
}

func (t *topK) offer(x Hit) {
	if len(t.hits) < t.k {
		t.hits = append(t.hits, x)
		t.up(len(t.hits) - 1)
		return
	}
	if !worse(t.hits[0], x) {
		return
	}
	t.hits[0] = x
	t.down(0, len(t.hits))
}

func (t *topK) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !worse(t.hits[i], t.hits[p]) {
			return
		}
		t.hits[i], t.hits[p] = t.hits[p], t.hits[i]
		i = p
	}
}

func (t *topK) down(i, n int) {
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && worse(t.hits[c+1], t.hits[c]) {
			c++
		}
		if !worse(t.hits[c], t.hits[i]) {
			return
		}
		t.hits[i], t.hits[c] = t.hits[c], t.hits[i]
		i = c
	}
}

// sorted empties the heap into best-first order in place.
func (t *topK) sorted() []Hit {
	for n := len(t.hits) - 1; n > 0; n-- {
		t.hits[0], t.hits[n] = t.hits[n], t.hits[0]
		t.down(0, n)
	}
	if len(t.hits) == 0 {
		return nil
	}
	return t.hits
}
