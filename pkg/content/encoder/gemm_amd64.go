package encoder

import "golang.org/x/sys/cpu"

// kernelAVX2 is kernelGo with AVX2 and FMA (gemm_amd64.s).
//
//go:noescape
func kernelAVX2(k int, a []float32, lda int, b, c []float32, ldc int)

func bestKernel() kernelFunc {
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		return kernelAVX2Checked
	}
	return kernelGo
}

// kernelAVX2Checked checks the bounds the assembly relies on.
func kernelAVX2Checked(k int, a []float32, lda int, b, c []float32, ldc int) {
	if k <= 0 {
		return
	}
	_ = a[(mr-1)*lda+k-1]
	_ = b[k*nr-1]
	_ = c[(mr-1)*ldc+nr-1]
	kernelAVX2(k, a, lda, b, c, ldc)
}
