package embeddings

import (
	"fmt"
	"math"
	"math/bits"
	"unsafe"
)

// Vectors is an immutable set of vectors for measuring cosine similarity
// to a question. Rows are kept normalised, as 8-bit integers with a scale
// per row: a ranking reads every document's vectors for each question,
// and a quarter of the bytes of float32 is what makes that scan fast
// (tens of thousands of 512-dimension rows in about a millisecond). The
// similarities are within about 0.002 of exact, below the differences
// rankings act on. Safe for concurrent use.
type Vectors struct {
	n, dim int
	rows   []int8    // n rows of dim, normalised and scaled to ±127
	scale  []float32 // of each row: its largest magnitude / 127; 0 for a zero vector
	dot    func(a []int8, b []int16) int32
	sketch
}

// sketch is each row as one bit per dimension, for estimating
// similarities from a sixty-fourth of the bytes (see EstimatesTo). The
// bits are the signs of the row less the mean row: the content's vectors
// share a direction, and bits of what they share would say little.
type sketch struct {
	words   int       // uint64 per row
	mean    []float64 // of the normalised rows
	meanSq  float64   // |mean|²
	signs   []uint64  // n rows of words: bit set where row - mean > 0
	spread  []float32 // of each row: |row - mean|
	toMean  []float32 // of each row: row · mean
	cosines []float32 // cos(π h / dim) for h differing bits
}

// NewVectors normalises and quantises vs. All vectors must have one
// dimension and finite values; zero vectors are allowed and score 0.
func NewVectors(vs [][]float32) (*Vectors, error) {
	v := &Vectors{n: len(vs), dot: bestDot()}
	if len(vs) == 0 {
		return v, nil
	}
	v.dim = len(vs[0])
	if v.dim == 0 {
		return nil, fmt.Errorf("embeddings: vectors: vector 0 is empty")
	}
	v.rows = make([]int8, v.n*v.dim)
	v.scale = make([]float32, v.n)
	for i, x := range vs {
		if len(x) != v.dim {
			return nil, fmt.Errorf("embeddings: vectors: vector %d has %d dimensions, vector 0 has %d", i, len(x), v.dim)
		}
		var ss, top float64
		for j, f := range x {
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				return nil, fmt.Errorf("embeddings: vectors: vector %d, value %d: %w", i, j, errNonFinite)
			}
			ss += float64(f) * float64(f)
			top = max(top, math.Abs(float64(f)))
		}
		if ss == 0 {
			continue // scale 0: scores 0
		}
		// Normalised, the largest magnitude is top/norm; it maps to 127.
		k := 127 / top
		v.scale[i] = float32(top / math.Sqrt(ss) / 127)
		row := v.rows[i*v.dim : (i+1)*v.dim]
		for j, f := range x {
			row[j] = int8(math.Round(float64(f) * k))
		}
	}
	v.sketchRows(vs)
	return v, nil
}

// sketchRows fills v.sketch from the rows vs, whose values are finite.
func (v *Vectors) sketchRows(vs [][]float32) {
	sk := sketch{words: (v.dim + 63) / 64, mean: make([]float64, v.dim)}
	norms := make([]float64, v.n)
	for i, x := range vs {
		var ss float64
		for _, f := range x {
			ss += float64(f) * float64(f)
		}
		if ss == 0 {
			continue
		}
		norms[i] = math.Sqrt(ss)
		for j, f := range x {
			sk.mean[j] += float64(f) / norms[i] / float64(v.n)
		}
	}
	for _, m := range sk.mean {
		sk.meanSq += m * m
	}
	sk.signs = make([]uint64, v.n*sk.words)
	sk.spread = make([]float32, v.n)
	sk.toMean = make([]float32, v.n)
	for i, x := range vs {
		if norms[i] == 0 {
			continue // spread 0: its estimate is the question's part alone
		}
		signs := sk.signs[i*sk.words : (i+1)*sk.words]
		var ss, dm float64
		for j, f := range x {
			d := float64(f)/norms[i] - sk.mean[j]
			if d > 0 {
				signs[j/64] |= 1 << (j % 64)
			}
			ss += d * d
			dm += float64(f) / norms[i] * sk.mean[j]
		}
		sk.spread[i], sk.toMean[i] = float32(math.Sqrt(ss)), float32(dm)
	}
	sk.cosines = make([]float32, v.dim+1)
	for h := range sk.cosines {
		sk.cosines[h] = float32(math.Cos(math.Pi * float64(h) / float64(v.dim)))
	}
	v.sketch = sk
}

// Len is the number of vectors.
func (v *Vectors) Len() int { return v.n }

// Dim is their dimension (0 when there are none).
func (v *Vectors) Dim() int { return v.dim }

// Bytes is the memory the vectors hold: their 8-bit rows, scales and
// sketches.
func (v *Vectors) Bytes() int64 {
	if v == nil {
		return 0
	}
	sk := &v.sketch
	return int64(unsafe.Sizeof(*v)) + int64(cap(v.rows)) + 4*int64(cap(v.scale)) +
		8*int64(cap(sk.mean)) + 8*int64(cap(sk.signs)) + 4*int64(cap(sk.spread)+cap(sk.toMean)+cap(sk.cosines))
}

// Probe is a question's vector prepared for measuring its similarity to
// Vectors of its dimension: normalised, as 16-bit integers with a scale.
type Probe struct {
	vals  []int16
	scale float32
	// The question in the terms of the rows' sketch.
	signs  []uint64
	spread float32 // |question - mean|
	toMean float32 // question · mean - |mean|²
}

// Probe prepares q; false for a query of another dimension, or a zero or
// non-finite query.
func (v *Vectors) Probe(q []float32) (Probe, bool) {
	if len(q) != v.dim || v.n == 0 {
		return Probe{}, false
	}
	var ss, top float64
	for _, f := range q {
		ss += float64(f) * float64(f)
		top = max(top, math.Abs(float64(f)))
	}
	if ss == 0 || math.IsNaN(ss) || math.IsInf(ss, 0) {
		return Probe{}, false
	}
	// 16 bits keep the question exact to 1.5e-5 of its largest value;
	// the products of a row fit an int32 for any dimension up to 65536
	// (127 × 32767 × 2 per pair, 8 lanes).
	k := 32767 / top
	p := Probe{vals: make([]int16, len(q)), scale: float32(top / math.Sqrt(ss) / 32767)}
	for i, f := range q {
		p.vals[i] = int16(math.Round(float64(f) * k))
	}
	norm := math.Sqrt(ss)
	p.signs = make([]uint64, v.words)
	var spread, dm float64
	for j, f := range q {
		d := float64(f)/norm - v.mean[j]
		if d > 0 {
			p.signs[j/64] |= 1 << (j % 64)
		}
		spread += d * d
		dm += float64(f) / norm * v.mean[j]
	}
	p.spread, p.toMean = float32(math.Sqrt(spread)), float32(dm-v.meanSq)
	return p, true
}

// Similarity is the cosine similarity of vector i to p; a zero vector
// scores 0.
func (v *Vectors) Similarity(i int, p Probe) float32 {
	return float32(v.dot(v.rows[i*v.dim:(i+1)*v.dim], p.vals[:v.dim])) * v.scale[i] * p.scale
}

// SimilaritiesTo writes the cosine similarity of vectors from to to-1 to
// p into dst[0:to-from]; zero vectors score 0. A ranking that reads them
// all (every document) wants one pass in memory order.
func (v *Vectors) SimilaritiesTo(p Probe, from, to int, dst []float32) {
	dst = dst[:to-from]
	vals := p.vals[:v.dim]
	for i := from; i < to; i++ {
		dst[i-from] = float32(v.dot(v.rows[i*v.dim:(i+1)*v.dim], vals)) * v.scale[i] * p.scale
	}
}

// EstimatesTo writes estimates of the cosine similarity of vectors from
// to to-1 to p into dst[0:to-from], from the rows' sketch: one bit per
// dimension, the sign of the row less the mean row. With a and b the
// question and a row less the mean, a·b is about |a||b|cos(πh/dim) for h
// differing bits, so the estimate is that plus what the mean adds. It
// reads 64 bytes of a row of 512 dimensions where SimilaritiesTo reads
// 512, and errs by a few hundredths: enough to choose which rows to
// measure, not to rank by.
func (v *Vectors) EstimatesTo(p Probe, from, to int, dst []float32) {
	dst = dst[:to-from]
	w := v.words
	q := p.signs[:w]
	spread, toMean, cosines := v.spread[from:to], v.toMean[from:to], v.cosines
	if w == 8 { // 512 dimensions, unrolled
		q := (*[8]uint64)(q)
		for i := range dst {
			r := (*[8]uint64)(v.signs[(from+i)*8:])
			h := bits.OnesCount64(r[0]^q[0]) + bits.OnesCount64(r[1]^q[1]) + bits.OnesCount64(r[2]^q[2]) + bits.OnesCount64(r[3]^q[3]) +
				bits.OnesCount64(r[4]^q[4]) + bits.OnesCount64(r[5]^q[5]) + bits.OnesCount64(r[6]^q[6]) + bits.OnesCount64(r[7]^q[7])
			dst[i] = spread[i]*p.spread*cosines[h] + toMean[i] + p.toMean
		}
		return
	}
	for i := range dst {
		row := v.signs[(from+i)*w : (from+i+1)*w]
		h := 0
		for j, x := range row {
			h += bits.OnesCount64(x ^ q[j])
		}
		dst[i] = spread[i]*p.spread*cosines[h] + toMean[i] + p.toMean
	}
}

// dot is the inner product of a and b[:len(a)] in integers, exact.
func dot(a []int8, b []int16) int32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 int32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		aa, bb := a[i:i+4:i+4], b[i:i+4:i+4]
		s0 += int32(aa[0]) * int32(bb[0])
		s1 += int32(aa[1]) * int32(bb[1])
		s2 += int32(aa[2]) * int32(bb[2])
		s3 += int32(aa[3]) * int32(bb[3])
	}
	for ; i < len(a); i++ {
		s0 += int32(a[i]) * int32(b[i])
	}
	return s0 + s1 + s2 + s3
}
