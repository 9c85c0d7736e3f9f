package encoder

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func randSlice(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(rng.NormFloat64())
	}
	return s
}

// TestGemm holds the microkernel of this machine (the assembly one where
// the CPU has AVX2 and FMA) and the portable one to the same products,
// against a float64 reference, on shapes with edge tiles in both
// dimensions and depths across the kc blocks.
func TestGemm(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	kernels := map[string]kernelFunc{"best": bestKernel(), "go": kernelGo}
	shapes := []struct{ m, k, n int }{
		{1, 1, 1}, {6, 16, 16}, {7, 300, 33}, {15, 256, 512}, {128, 64, 128}, {37, 1536, 48}, {5, 513, 17},
	}
	for _, s := range shapes {
		a := randSlice(rng, s.m*s.k)
		braw := randSlice(rng, s.k*s.n)
		c0 := randSlice(rng, s.m*s.n)
		var b packedB
		packB(&b, braw, s.k, s.n, s.n)
		// The same B given transposed must pack the same.
		bt := make([]float32, s.n*s.k)
		for i := 0; i < s.k; i++ {
			for j := 0; j < s.n; j++ {
				bt[j*s.k+i] = braw[i*s.n+j]
			}
		}
		var b2 packedB
		packBT(&b2, bt, s.k, s.n, s.k)
		for i := range b.data {
			if b.data[i] != b2.data[i] {
				t.Fatalf("%v: packBT differs from packB at %d", s, i)
			}
		}
		// bound is the sum of the magnitudes of each element's terms, which
		// scales the rounding error of any order of summation.
		want := make([]float64, s.m*s.n)
		bound := make([]float64, s.m*s.n)
		for i := 0; i < s.m; i++ {
			for j := 0; j < s.n; j++ {
				w, bd := float64(c0[i*s.n+j]), math.Abs(float64(c0[i*s.n+j]))
				for p := 0; p < s.k; p++ {
					x := float64(a[i*s.k+p]) * float64(braw[p*s.n+j])
					w += x
					bd += math.Abs(x)
				}
				want[i*s.n+j], bound[i*s.n+j] = w, bd
			}
		}
		results := map[string][]float32{}
		for name, kern := range kernels {
			c := append([]float32(nil), c0...)
			g := &gemm{kernel: kern}
			g.mul(c, s.n, a, s.k, s.m, &b)
			results[name] = c
			for i := range c {
				if d := math.Abs(float64(c[i]) - want[i]); d > 1e-6*bound[i] {
					t.Fatalf("%s kernel %v: c[%d] = %v, want %v", name, s, i, c[i], want[i])
				}
			}
		}
		// With a bias instead of c, and ReLU.
		bias := randSlice(rng, s.n)
		for name, kern := range kernels {
			c := append([]float32(nil), c0...)
			g := &gemm{kernel: kern}
			g.mulBias(c, s.n, a, s.k, s.m, &b, bias, true)
			for i := 0; i < s.m; i++ {
				for j := 0; j < s.n; j++ {
					w, bd := float64(bias[j]), math.Abs(float64(bias[j]))
					for p := 0; p < s.k; p++ {
						x := float64(a[i*s.k+p]) * float64(braw[p*s.n+j])
						w += x
						bd += math.Abs(x)
					}
					got, want := float64(c[i*s.n+j]), math.Max(w, 0)
					if got < 0 || math.Abs(got-want) > 1e-6*bd {
						t.Fatalf("%s kernel %v with bias and ReLU: c[%d][%d] = %v, want %v", name, s, i, j, got, want)
					}
				}
			}
		}
		// The two kernels differ only by fused rounding.
		best, port := results["best"], results["go"]
		for i := range best {
			if d := math.Abs(float64(best[i] - port[i])); d > 1e-6*bound[i] {
				t.Fatalf("%v: kernels differ at %d: %v and %v", s, i, best[i], port[i])
			}
		}
	}
}

// BenchmarkGemm measures the matrix products of the dense layers.
func BenchmarkGemm(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, s := range []struct{ m, k, n int }{{14, 512, 1536}, {128, 512, 1536}, {512, 512, 1536}, {512, 1536, 512}} {
		for name, kern := range map[string]kernelFunc{"best": bestKernel(), "go": kernelGo} {
			b.Run(fmt.Sprintf("%s/%dx%dx%d", name, s.m, s.k, s.n), func(b *testing.B) {
				a := randSlice(rng, s.m*s.k)
				var bp packedB
				packB(&bp, randSlice(rng, s.k*s.n), s.k, s.n, s.n)
				c := make([]float32, s.m*s.n)
				g := &gemm{kernel: kern}
				for b.Loop() {
					g.mul(c, s.n, a, s.k, s.m, &bp)
				}
				b.ReportMetric(2*float64(s.m*s.k*s.n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkGemmCold multiplies by weights that do not stay in the cache,
// as the model's 20 MB of weights do not for one short text.
func BenchmarkGemmCold(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	const m, k, n, count = 12, 512, 1536, 16
	bs := make([]packedB, count)
	for i := range bs {
		packB(&bs[i], randSlice(rng, k*n), k, n, n)
	}
	a := randSlice(rng, m*k)
	c := make([]float32, m*n)
	g := &gemm{kernel: bestKernel()}
	i := 0
	for b.Loop() {
		g.mul(c, n, a, k, m, &bs[i%count])
		i++
	}
	b.ReportMetric(2*float64(m*k*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	b.ReportMetric(float64(4*k*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}
