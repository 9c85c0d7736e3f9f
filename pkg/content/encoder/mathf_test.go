package encoder

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestExpf(t *testing.T) {
	worst := 0.0
	for x := float32(-87.3); x <= 0; x += 0.0007 {
		got := float64(expf(x))
		want := math.Exp(float64(x))
		ulp := float64(math.Nextafter32(float32(want), 1) - float32(want))
		if d := math.Abs(got-want) / ulp; d > worst {
			worst = d
		}
	}
	if worst > 2 {
		t.Errorf("expf is off by %.2f ulp", worst)
	}
	if expf(0) != 1 || expf(-100) != 0 || expf(float32(math.Inf(-1))) != 0 {
		t.Errorf("expf(0), expf(-100), expf(-Inf) = %v, %v, %v", expf(0), expf(-100), expf(float32(math.Inf(-1))))
	}
}

func TestSoftmax(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	best := bestSoftmax()
	for _, n := range []int{8, 16, 24, 128, 3, 13} {
		for trial := 0; trial < 20; trial++ {
			p := make([]float32, n)
			for i := range p {
				p[i] = float32(rng.NormFloat64() * 20)
			}
			if trial == 1 {
				p[n-1] = float32(math.Inf(-1)) // padding
			}
			a := append([]float32(nil), p...)
			b := append([]float32(nil), p...)
			best(a)
			softmaxGo(b)
			// float64 reference; float32 rounding of p - max bounds the error
			mx := math.Inf(-1)
			for _, v := range p {
				mx = math.Max(mx, float64(v))
			}
			var sum float64
			for _, v := range p {
				sum += math.Exp(float64(v) - mx)
			}
			for i, v := range p {
				want := math.Exp(float64(v)-mx) / sum
				for name, got := range map[string]float32{"best": a[i], "go": b[i]} {
					if d := math.Abs(float64(got) - want); d > 2e-5*want+1e-8 {
						t.Fatalf("n=%d %s: p[%d] = %g, want %g", n, name, i, got, want)
					}
				}
			}
		}
	}
}
