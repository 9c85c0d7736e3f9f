package encoder

import (
	"math"
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
