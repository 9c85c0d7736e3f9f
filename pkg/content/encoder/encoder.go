package encoder

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
)

// Shapes of the model.
const (
	vocabRows = 8002 // rows of the embedding table
	dim0      = 256  // width of the embeddings and of layer 0's attention
	dim1      = 512  // width of layer 1 and of the output
	ffnDim    = 1536 // hidden width of the feed-forward blocks
	heads     = 4
	window    = 128 // tokens the model reads
)

// modelName names the model and the version of its weights.
const modelName = "use-lite-en-0.2.0"

// maxRows is how many tokens a worker runs through the dense layers at
// once: several short texts are packed into one matrix product.
const maxRows = 256

// Encoder embeds texts with Universal Sentence Encoder lite. It is safe for
// concurrent use.
type Encoder struct {
	tok *tokenizer
	w   *weights

	tokStates sync.Pool // of *tokState
	workers   sync.Pool // of *worker
}

// Load reads the model from dir (model.json, its weight shards and
// vocab.json). Errors name the file and what is wrong with it.
func Load(dir string) (*Encoder, error) {
	raw, err := loadWeights(dir)
	if err != nil {
		return nil, fmt.Errorf("load encoder: %w", err)
	}
	pieces, scores, err := loadVocab(dir)
	if err != nil {
		return nil, fmt.Errorf("load encoder: %w", err)
	}
	tok, err := newTokenizer(pieces, scores)
	if err != nil {
		return nil, fmt.Errorf("load encoder: %s/%s: %w", dir, vocabFile, err)
	}
	if len(pieces) > vocabRows {
		return nil, fmt.Errorf("load encoder: %s/%s: %d pieces, more than the %d rows of the embedding table", dir, vocabFile, len(pieces), vocabRows)
	}
	// Last, so that a file that does not parse says so: a damaged byte
	// that parses would change every vector without a word.
	if err := checkDigests(dir); err != nil {
		return nil, fmt.Errorf("load encoder: %w", err)
	}
	return newEncoder(tok, newWeights(raw), bestKernel(), bestSoftmax()), nil
}

func newEncoder(tok *tokenizer, w *weights, kernel kernelFunc, softmax func([]float32)) *Encoder {
	e := &Encoder{tok: tok, w: w}
	e.tokStates.New = func() any { return newTokState() }
	e.workers.New = func() any { return newWorker(kernel, softmax) }
	return e
}

// Model names the model and its version; vectors of different names are
// not comparable.
func (e *Encoder) Model() string { return modelName }

// Dims is the length of the vectors.
func (e *Encoder) Dims() int { return dim1 }

// Window is how many tokens of a text the model reads; the rest is
// ignored.
func (e *Encoder) Window() int { return window }

// Tokens returns how many tokens text makes (all of it, not only the
// Window the model reads), so that callers can split long documents into
// passages. It takes time linear in the text and does not allocate.
func (e *Encoder) Tokens(text string) int {
	st := e.tokStates.Get().(*tokState)
	n := e.tok.count(st, text)
	e.tokStates.Put(st)
	return n
}

// Embed returns one unit vector of Dims() per text. The model reads the
// first Window() tokens of each text (of its first MaxRunes runes). Any
// string is accepted, including empty, invalid UTF-8 or binary text. Texts
// are spread over GOMAXPROCS workers; ctx is checked between texts.
func (e *Encoder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	backing := make([]float32, len(texts)*dim1)
	for i := range out {
		out[i] = backing[i*dim1 : (i+1)*dim1 : (i+1)*dim1]
	}
	if len(texts) == 0 {
		return out, nil
	}
	var next atomic.Int64
	var failed atomic.Bool
	run := func() error {
		wk := e.workers.Get().(*worker)
		defer e.workers.Put(wk)
		wk.reset()
		for {
			if failed.Load() {
				return nil
			}
			i := int(next.Add(1)) - 1
			if i >= len(texts) {
				break
			}
			if err := ctx.Err(); err != nil {
				failed.Store(true)
				return err
			}
			ids := e.tok.encode(wk.tok, texts[i], window, MaxRunes)
			// Texts without tokens take no row but a slot each.
			if wk.rows+len(ids) > maxRows || wk.texts == maxRows {
				e.forward(wk)
			}
			wk.add(ids, out[i])
		}
		if wk.texts > 0 {
			e.forward(wk)
		}
		return nil
	}
	n := min(runtime.GOMAXPROCS(0), len(texts))
	if n == 1 {
		if err := run(); err != nil {
			return nil, err
		}
		return out, nil
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[g] = run()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// worker holds the scratch space of one goroutine's forward passes: the
// texts of a group packed row after row, and every intermediate matrix.
type worker struct {
	tok   *tokState
	ids   []int32     // tokens of the group, text after text
	lens  []int       // tokens per text
	dst   [][]float32 // where each text's vector goes
	rows  int
	texts int

	x, h, qkv, att, y, f1 []float32
	scores                []float32 // attention weights, rows padded to a multiple of 8
	softmax               func([]float32)
	kt, v                 packedB // one head's keys and values
	pooled, z             []float32
	g                     gemm
}

func newWorker(kernel kernelFunc, softmax func([]float32)) *worker {
	return &worker{
		g:       gemm{kernel: kernel},
		softmax: softmax,
		kt:      packedB{data: make([]float32, panels(window)*dim1/heads*nr)},
		v:       packedB{data: make([]float32, panels(dim1/heads)*window*nr)},
		tok:     newTokState(),
		ids:     make([]int32, 0, maxRows),
		lens:    make([]int, 0, maxRows),
		dst:     make([][]float32, 0, maxRows),
		x:       make([]float32, maxRows*dim1),
		h:       make([]float32, maxRows*dim1),
		qkv:     make([]float32, maxRows*3*dim1),
		att:     make([]float32, maxRows*dim1),
		y:       make([]float32, maxRows*dim1),
		f1:      make([]float32, maxRows*ffnDim),
		scores:  make([]float32, window*window),
		pooled:  make([]float32, maxRows*dim1),
		z:       make([]float32, maxRows*dim1),
	}
}

func (wk *worker) reset() {
	wk.ids = wk.ids[:0]
	wk.lens = wk.lens[:0]
	clear(wk.dst)
	wk.dst = wk.dst[:0]
	wk.rows = 0
	wk.texts = 0
}

func (wk *worker) add(ids []int32, dst []float32) {
	wk.ids = append(wk.ids, ids...)
	wk.lens = append(wk.lens, len(ids))
	wk.dst = append(wk.dst, dst)
	wk.rows += len(ids)
	wk.texts++
}

// forward runs the packed group of wk through the model, writes each
// text's vector and empties the group.
func (e *Encoder) forward(wk *worker) {
	w := e.w
	m := wk.rows
	x0 := wk.x[:m*dim0]
	// Input: the graph adds the token embedding twice, once directly and
	// once with the timing signal: x = emb + (emb + timing).
	r := 0
	for _, n := range wk.lens {
		for t := 0; t < n; t++ {
			emb := w.emb[int(wk.ids[r])*dim0 : (int(wk.ids[r])+1)*dim0]
			ts := w.timing[t*dim0 : (t+1)*dim0]
			row := x0[r*dim0 : (r+1)*dim0]
			for j := range row {
				row[j] = emb[j] + (emb[j] + ts[j])
			}
			r++
		}
	}

	// Layer 0: attention in 256 dims, the residual projected to 512.
	h := wk.h[:m*dim0]
	layerNorm(h, x0, dim0, w.l0.ln1s, w.l0.ln1b, w.lnEps)
	y := wk.y[:m*dim1]
	w.l0.dense.apply(&wk.g, y, x0, m)
	qkv := wk.qkv[:m*3*dim0]
	w.l0.qkv.apply(&wk.g, qkv, h, m)
	att := wk.att[:m*dim0]
	wk.attention(att, qkv, dim0, w.attScale0)
	w.l0.out.applyRes(&wk.g, y, att, m, y)
	x1 := wk.x[:m*dim1] // x0 is no longer needed
	ffn(x1, y, m, &w.l0.ffn, wk)

	// Layer 1: attention in 512 dims.
	h = wk.h[:m*dim1]
	layerNorm(h, x1, dim1, w.l1.ln1s, w.l1.ln1b, w.lnEps)
	qkv = wk.qkv[:m*3*dim1]
	w.l1.qkv.apply(&wk.g, qkv, h, m)
	att = wk.att[:m*dim1]
	wk.attention(att, qkv, dim1, w.attScale1)
	w.l1.out.applyRes(&wk.g, y, att, m, x1)
	x2 := wk.x[:m*dim1]
	ffn(x2, y, m, &w.l1.ffn, wk)

	// Mean over each text's tokens, then tanh and l2 normalization.
	b := wk.texts
	pooled := wk.pooled[:b*dim1]
	clear(pooled)
	r = 0
	for i, n := range wk.lens {
		p := pooled[i*dim1 : (i+1)*dim1]
		for t := 0; t < n; t++ {
			row := x2[r*dim1 : (r+1)*dim1]
			for j := range p {
				p[j] += row[j]
			}
			r++
		}
		d := float32(max(n, 1))
		for j := range p {
			p[j] /= d
		}
	}
	z := wk.z[:b*dim1]
	w.tanh.apply(&wk.g, z, pooled, b)
	for i := range b {
		zi := z[i*dim1 : (i+1)*dim1]
		var ss float32
		for j, v := range zi {
			v = float32(math.Tanh(float64(v)))
			zi[j] = v
			ss += v * v
		}
		inv := float32(1 / math.Sqrt(float64(max(ss, w.l2Eps))))
		dst := wk.dst[i]
		for j, v := range zi {
			dst[j] = v * inv
		}
	}
	wk.reset()
}

// ffn computes out = W2·relu(W1·LN(y)) + y over m rows of dim1.
func ffn(out, y []float32, m int, f *ffnWeights, wk *worker) {
	h := wk.h[:m*dim1]
	layerNorm(h, y, dim1, f.lns, f.lnb, f.eps)
	f1 := wk.f1[:m*ffnDim]
	f.w1.applyReLU(&wk.g, f1, h, m)
	f.w2.applyRes(&wk.g, out, f1, m, y)
}

// relu sets the negative elements of x to 0, without branches: half of
// them are negative, in no order a branch predictor could learn.
func relu(x []float32) {
	for i, v := range x {
		u := math.Float32bits(v)
		x[i] = math.Float32frombits(u &^ uint32(int32(u)>>31))
	}
}

// layerNorm normalizes each row of x (width n, a multiple of 4) into dst as
// the graph does: (scale·rsqrt(var+eps))·(x-mean) + bias. Sums run in four
// lanes to overlap the additions.
func layerNorm(dst, x []float32, n int, scale, bias []float32, eps float32) {
	inv := 1 / float32(n)
	scale, bias = scale[:n], bias[:n]
	for r := 0; r+n <= len(x); r += n {
		row := x[r : r+n]
		out := dst[r : r+n]
		var s0, s1, s2, s3 float32
		for j := 0; j+4 <= n; j += 4 {
			s0 += row[j]
			s1 += row[j+1]
			s2 += row[j+2]
			s3 += row[j+3]
		}
		mean := ((s0 + s1) + (s2 + s3)) * inv
		s0, s1, s2, s3 = 0, 0, 0, 0
		for j := 0; j+4 <= n; j += 4 {
			d0, d1, d2, d3 := row[j]-mean, row[j+1]-mean, row[j+2]-mean, row[j+3]-mean
			out[j], out[j+1], out[j+2], out[j+3] = d0, d1, d2, d3
			s0 += d0 * d0
			s1 += d1 * d1
			s2 += d2 * d2
			s3 += d3 * d3
		}
		rs := float32(1 / math.Sqrt(float64(((s0+s1)+(s2+s3))*inv+eps)))
		for j := range out {
			out[j] = scale[j]*rs*out[j] + bias[j]
		}
	}
}

// attention computes multi-head self-attention within each text of the
// group. qkv holds rows of [q | k | v], each of width d split into heads;
// out gets rows of width d. Only a text's own tokens are attended to: the
// graph masks padding with -1e9, whose weight is exactly 0 after softmax.
func (wk *worker) attention(out, qkv []float32, d int, scale float32) {
	dh := d / heads
	stride := 3 * d
	// The graph scales q before the product.
	for r := 0; r < wk.rows; r++ {
		q := qkv[r*stride : r*stride+d]
		for j := range q {
			q[j] *= scale
		}
	}
	r0 := 0
	for _, n := range wk.lens {
		if n == 0 {
			continue
		}
		block := qkv[r0*stride:]
		for hd := 0; hd < heads; hd++ {
			off := hd * dh
			// scores = q·kᵀ
			packBT(&wk.kt, block[d+off:], dh, n, stride)
			// Rows are padded with -Inf, whose weight is 0, to a multiple of 8
			// for the vector softmax.
			ls := (n + 7) &^ 7
			s := wk.scores[:n*ls]
			clear(s)
			wk.g.mul(s, ls, block[off:], stride, n, &wk.kt)
			for i := 0; i < n; i++ {
				row := s[i*ls : (i+1)*ls]
				for j := n; j < ls; j++ {
					row[j] = float32(math.Inf(-1))
				}
				wk.softmax(row)
			}
			// out = scores·v
			packB(&wk.v, block[2*d+off:], n, dh, stride)
			o := out[r0*d+off:]
			for i := 0; i < n; i++ {
				clear(o[i*d : i*d+dh])
			}
			wk.g.mul(o, d, s, ls, n, &wk.v)
		}
		r0 += n
	}
}

// softmaxGo replaces p by exp(p - max p) / sum.
func softmaxGo(p []float32) {
	mx := float32(math.Inf(-1))
	for _, v := range p {
		mx = max(mx, v)
	}
	var sum float32
	for j, v := range p {
		e := expf(v - mx)
		p[j] = e
		sum += e
	}
	for j := range p {
		p[j] /= sum
	}
}
