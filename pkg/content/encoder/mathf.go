package encoder

import "math"

// expf is e**x in float32 for x <= 0 (softmax's shifted logits), within 2
// ulp of the correctly rounded value (Cephes expf): x = n·ln2 + r with
// |r| <= ln2/2, a degree-6 polynomial for e**r, then the exponent set to n.
// It is several times faster than float32(math.Exp(float64(x))).
// It is 0 below the smallest normal result.
func expf(x float32) float32 {
	if x < -87.33654 {
		return 0
	}
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375
		ln2lo = -2.12194440e-4
	)
	// Adding and subtracting 1.5·2**23 rounds to an integer (|x·log2e| is
	// far below 2**22); Go does not reassociate float arithmetic.
	const round = 1.5 * (1 << 23)
	n := (x*log2e + round) - round
	r := x - n*ln2hi - n*ln2lo
	p := float32(1.9875691500e-4)
	p = p*r + 1.3981999507e-3
	p = p*r + 8.3334519073e-3
	p = p*r + 4.1665795894e-2
	p = p*r + 1.6666665459e-1
	p = p*r + 5.0000001201e-1
	p = p*r*r + r + 1
	return p * math.Float32frombits(uint32(int32(n)+127)<<23)
}
