package encoder

import "math"

// weights are the model's parameters in the layout the forward pass uses.
type weights struct {
	emb                  []float32
	timing               []float32 // window rows of dim0: the timing signal of each position
	attScale0, attScale1 float32
	lnEps, l2Eps         float32
	l0                   struct {
		ln1s, ln1b      []float32
		qkv, out, dense matrix
		ffn             ffnWeights
	}
	l1 struct {
		ln1s, ln1b []float32
		qkv, out   matrix
		ffn        ffnWeights
	}
	tanh matrix
}

type ffnWeights struct {
	lns, lnb []float32
	eps      float32
	w1, w2   matrix
}

// matrix is a dense layer: k inputs, n outputs, a bias per output.
type matrix struct {
	k, n int
	w    packedB
	bias []float32
}

func newMatrix(k, n int, w packedB, bias []float32) matrix {
	return matrix{k: k, n: n, w: w, bias: bias}
}

func newWeights(r *rawWeights) *weights {
	w := &weights{
		emb:       r.emb,
		timing:    timingSignal(r.timing),
		attScale0: r.attScale0[0],
		attScale1: r.attScale1[0],
		lnEps:     r.lnEps[0],
		l2Eps:     r.l2Eps[0],
	}
	w.l0.ln1s, w.l0.ln1b = r.l0.ln1s, r.l0.ln1b
	w.l0.qkv = newMatrix(dim0, 3*dim0, r.l0.qkvW, r.l0.qkvB)
	w.l0.out = newMatrix(dim0, dim1, r.l0.outW, r.l0.outB)
	w.l0.dense = newMatrix(dim0, dim1, r.l0.denseW, r.l0.denseB)
	w.l0.ffn = ffnWeights{
		lns: r.l0.ln2s, lnb: r.l0.ln2b, eps: r.lnEps[0],
		w1: newMatrix(dim1, ffnDim, r.l0.ff1W, r.l0.ff1B),
		w2: newMatrix(ffnDim, dim1, r.l0.ff2W, r.l0.ff2B),
	}
	w.l1.ln1s, w.l1.ln1b = r.l1.ln1s, r.l1.ln1b
	w.l1.qkv = newMatrix(dim1, 3*dim1, r.l1.qkvW, r.l1.qkvB)
	w.l1.out = newMatrix(dim1, dim1, r.l1.outW, r.l1.outB)
	w.l1.ffn = ffnWeights{
		lns: r.l1.ln2s, lnb: r.l1.ln2b, eps: r.lnEps[0],
		w1: newMatrix(dim1, ffnDim, r.l1.ff1W, r.l1.ff1B),
		w2: newMatrix(ffnDim, dim1, r.l1.ff2W, r.l1.ff2B),
	}
	w.tanh = newMatrix(dim1, dim1, r.tanhW, r.tanhB)
	return w
}

// apply sets dst (m×n) to a·W + bias, for a of m×k.
func (mx *matrix) apply(g *gemm, dst, a []float32, m int) {
	g.mulBias(dst, mx.n, a, mx.k, m, &mx.w, mx.bias, false)
}

// applyReLU sets dst to max(0, a·W + bias).
func (mx *matrix) applyReLU(g *gemm, dst, a []float32, m int) {
	g.mulBias(dst, mx.n, a, mx.k, m, &mx.w, mx.bias, true)
}

// applyRes sets dst to a·W + bias + res; res may be dst.
func (mx *matrix) applyRes(g *gemm, dst, a []float32, m int, res []float32) {
	n := mx.n
	for i := 0; i < m; i++ {
		d := dst[i*n : (i+1)*n]
		r := res[i*n : (i+1)*n]
		for j := range d {
			d[j] = mx.bias[j] + r[j]
		}
	}
	g.mul(dst, n, a, mx.k, m, &mx.w)
}

// timingSignal tabulates the graph's timing signal for each position t:
// sin(t·inv[j]) then cos(t·inv[j]), the product rounded to float32 first.
func timingSignal(inv []float32) []float32 {
	half := len(inv)
	ts := make([]float32, window*2*half)
	for t := 0; t < window; t++ {
		row := ts[t*2*half : (t+1)*2*half]
		for j, v := range inv {
			a := float64(float32(t) * v)
			row[j] = float32(math.Sin(a))
			row[half+j] = float32(math.Cos(a))
		}
	}
	return ts
}
