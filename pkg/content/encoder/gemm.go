package encoder

// Matrix products C += A·B, blocked for the cache and computed by a
// microkernel on tiles of mr×nr. B is packed into panels of nr columns (the
// weights once, at load); the kernel reads mr rows of A where they are.
const (
	mr = 6   // rows of A per tile
	nr = 16  // columns of B per tile: two 8-float AVX registers
	kc = 256 // depth of one pass over A, which stays in L2 meanwhile
)

// kernelFunc computes the tile c (mr rows of nr floats, row stride ldc)
// += a·b over k, where a holds mr rows of k floats (row stride lda) and b
// holds k groups of nr floats. With kernelBias in flags each row starts
// from bias[:nr] instead of c; with kernelReLU negative results become 0.
type kernelFunc func(k int, a []float32, lda int, b, c []float32, ldc int, bias []float32, flags int)

const (
	kernelBias = 1 << iota
	kernelReLU
)

// kernelGo is the portable microkernel. Each output element accumulates
// over p in the same order as in the assembly kernel, which differs only
// by rounding once per fused multiply-add where this rounds twice. Eight
// accumulators at a time stay in registers.
func kernelGo(k int, a []float32, lda int, b, c []float32, ldc int, bias []float32, flags int) {
	b = b[:k*nr]
	for r := range mr {
		ar := a[r*lda : r*lda+k]
		for h := 0; h < nr; h += 8 {
			cr := (*[8]float32)(c[r*ldc+h:])
			src := cr
			if flags&kernelBias != 0 {
				src = (*[8]float32)(bias[h:])
			}
			c0, c1, c2, c3, c4, c5, c6, c7 := src[0], src[1], src[2], src[3], src[4], src[5], src[6], src[7]
			for p, av := range ar {
				bp := (*[8]float32)(b[p*nr+h:])
				c0 += av * bp[0]
				c1 += av * bp[1]
				c2 += av * bp[2]
				c3 += av * bp[3]
				c4 += av * bp[4]
				c5 += av * bp[5]
				c6 += av * bp[6]
				c7 += av * bp[7]
			}
			cr[0], cr[1], cr[2], cr[3], cr[4], cr[5], cr[6], cr[7] = c0, c1, c2, c3, c4, c5, c6, c7
			if flags&kernelReLU != 0 {
				relu(cr[:])
			}
		}
	}
}

// packedB is a k×n matrix stored for the kernel: in blocks of kc rows, and
// each block in ceil(n/nr) panels of nr columns (zero beyond column n), so
// that a pass over one block of rows reads memory in order.
type packedB struct {
	k, n int
	data []float32
}

func panels(n int) int { return (n + nr - 1) / nr }

// panel returns rows [p0, p0+kb) of panel jp, where p0 is a multiple of kc.
func (b *packedB) panel(p0, kb, jp int) []float32 {
	off := p0*panels(b.n)*nr + jp*kb*nr
	return b.data[off : off+kb*nr]
}

func (b *packedB) resize(k, n int) {
	need := panels(n) * k * nr
	if cap(b.data) < need {
		b.data = make([]float32, need)
	}
	b.k, b.n, b.data = k, n, b.data[:need]
}

// packB packs the k×n matrix b (row stride ldb) into dst, which it grows
// as needed.
func packB(dst *packedB, b []float32, k, n, ldb int) {
	dst.resize(k, n)
	for p0 := 0; p0 < k; p0 += kc {
		kb := min(kc, k-p0)
		for jp := 0; jp < panels(n); jp++ {
			j0 := jp * nr
			w := min(nr, n-j0)
			panel := dst.panel(p0, kb, jp)
			for kk := 0; kk < kb; kk++ {
				row := panel[kk*nr : kk*nr+nr]
				src := b[(p0+kk)*ldb+j0:]
				copy(row, src[:w])
				clear(row[w:])
			}
		}
	}
}

// packRow stores row kk of the matrix into dst.
func packRow(dst *packedB, kk int, row []float32) {
	p0 := kk / kc * kc
	kb := min(kc, dst.k-p0)
	for jp := 0; jp < panels(dst.n); jp++ {
		j0 := jp * nr
		w := min(nr, dst.n-j0)
		r := dst.panel(p0, kb, jp)[(kk-p0)*nr : (kk-p0+1)*nr]
		copy(r, row[j0:j0+w])
		clear(r[w:])
	}
}

// packBT packs the k×n matrix whose transpose is bt (n rows of k floats,
// row stride ldb): B[kk][j] = bt[j*ldb+kk].
func packBT(dst *packedB, bt []float32, k, n, ldb int) {
	dst.resize(k, n)
	for p0 := 0; p0 < k; p0 += kc {
		kb := min(kc, k-p0)
		for jp := 0; jp < panels(n); jp++ {
			j0 := jp * nr
			w := min(nr, n-j0)
			panel := dst.panel(p0, kb, jp)
			for j := 0; j < w; j++ {
				src := bt[(j0+j)*ldb+p0 : (j0+j)*ldb+p0+kb]
				for kk, v := range src {
					panel[kk*nr+j] = v
				}
			}
			for j := w; j < nr; j++ {
				for kk := 0; kk < kb; kk++ {
					panel[kk*nr+j] = 0
				}
			}
		}
	}
}

// gemm holds the scratch space of one goroutine's matrix products.
type gemm struct {
	kernel kernelFunc
	a      [mr * kc]float32 // the rows of an edge tile, padded with zeros
	tile   [mr * nr]float32
	bias   [nr]float32 // the bias of a panel narrower than nr
}

// biasPanel returns the nr biases of the panel at column j0, of which w
// are in bias.
func (g *gemm) biasPanel(bias []float32, j0, w int) []float32 {
	if w == nr {
		return bias[j0 : j0+nr]
	}
	clear(g.bias[:])
	copy(g.bias[:], bias[j0:j0+w])
	return g.bias[:]
}

// mul computes c (m×n, row stride ldc) += a (m×k, row stride lda) · b.
func (g *gemm) mul(c []float32, ldc int, a []float32, lda, m int, b *packedB) {
	g.mulBias(c, ldc, a, lda, m, b, nil, false)
}

// mulBias computes c = bias + a·b if bias is not nil, else c += a·b, then
// sets the negative elements of c to 0 if relu.
func (g *gemm) mulBias(c []float32, ldc int, a []float32, lda, m int, b *packedB, bias []float32, relu bool) {
	k, n := b.k, b.n
	if m == 0 || n == 0 || k == 0 {
		return
	}
	full := m / mr * mr
	for p0 := 0; p0 < k; p0 += kc {
		kb := min(kc, k-p0)
		flags := 0
		if p0 == 0 && bias != nil {
			flags |= kernelBias
		}
		if p0+kb == k && relu {
			flags |= kernelReLU
		}
		var edge []float32
		if full < m {
			// The last rows, fewer than mr, go through zero-padded scratch.
			edge = g.a[:mr*kb]
			clear(edge)
			for r := 0; r < m-full; r++ {
				copy(edge[r*kb:(r+1)*kb], a[(full+r)*lda+p0:(full+r)*lda+p0+kb])
			}
		}
		for jp := 0; jp < panels(n); jp++ {
			j0 := jp * nr
			bp := b.panel(p0, kb, jp)
			w := min(nr, n-j0)
			var bj []float32
			if flags&kernelBias != 0 {
				bj = g.biasPanel(bias, j0, w)
			}
			for i0 := 0; i0 < full; i0 += mr {
				ai := a[i0*lda+p0:]
				if w == nr {
					g.kernel(kb, ai, lda, bp, c[i0*ldc+j0:], ldc, bj, flags)
				} else {
					g.edgeTile(kb, ai, lda, bp, c[i0*ldc+j0:], ldc, mr, w, bj, flags)
				}
			}
			if edge != nil {
				g.edgeTile(kb, edge, kb, bp, c[full*ldc+j0:], ldc, m-full, w, bj, flags)
			}
		}
	}
}

// edgeTile runs the kernel on a tile of which only h rows and w columns
// are in c, through a full tile of scratch.
func (g *gemm) edgeTile(k int, a []float32, lda int, b, c []float32, ldc, h, w int, bias []float32, flags int) {
	t := g.tile[:]
	if flags&kernelBias == 0 {
		for r := 0; r < h; r++ {
			copy(t[r*nr:r*nr+w], c[r*ldc:r*ldc+w])
		}
	}
	g.kernel(k, a, lda, b, t, nr, bias, flags)
	for r := 0; r < h; r++ {
		copy(c[r*ldc:r*ldc+w], t[r*nr:r*nr+w])
	}
}
