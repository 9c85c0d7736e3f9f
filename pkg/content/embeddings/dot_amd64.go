package embeddings

import "golang.org/x/sys/cpu"

// dotAVX2 is dot with AVX2 (dot_amd64.s). len(b) >= len(a).
//
//go:noescape
func dotAVX2(a []int8, b []int16) int32

// bestDot is the fastest dot product this CPU runs: sixteen products an
// instruction instead of one.
func bestDot() func(a []int8, b []int16) int32 {
	if cpu.X86.HasAVX2 {
		return dotAVX2Checked
	}
	return dot
}

func dotAVX2Checked(a []int8, b []int16) int32 {
	if len(b) < len(a) {
		panic("embeddings: dot of slices of unequal length")
	}
	return dotAVX2(a, b)
}
