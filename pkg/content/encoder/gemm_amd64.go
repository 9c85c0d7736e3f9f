package encoder

import "golang.org/x/sys/cpu"

// kernelAVX2 is kernelGo with AVX2 and FMA (gemm_amd64.s).
//
//go:noescape
func kernelAVX2(k int, a []float32, lda int, b, c []float32, ldc int, bias []float32, flags int)

// simd reports whether the assembly kernels can run.
func simd() bool { return cpu.X86.HasAVX2 && cpu.X86.HasFMA }

func bestKernel() kernelFunc {
	if simd() {
		return kernelAVX2Checked
	}
	return kernelGo
}

func bestSoftmax() func([]float32) {
	if simd() {
		return softmaxAVX2Checked
	}
	return softmaxGo
}

func softmaxAVX2Checked(p []float32) {
	if len(p) == 0 || len(p)%8 != 0 {
		softmaxGo(p)
		return
	}
	softmaxAVX2(p)
}

// kernelAVX2Checked checks the bounds the assembly relies on.
func kernelAVX2Checked(k int, a []float32, lda int, b, c []float32, ldc int, bias []float32, flags int) {
	if k <= 0 {
		return
	}
	_ = a[(mr-1)*lda+k-1]
	_ = b[k*nr-1]
	_ = c[(mr-1)*ldc+nr-1]
	if flags&kernelBias != 0 {
		_ = bias[nr-1]
	}
	kernelAVX2(k, a, lda, b, c, ldc, bias, flags)
}

// softmaxAVX2 is softmax for len(p) a positive multiple of 8
// (softmax_amd64.s).
//
//go:noescape
func softmaxAVX2(p []float32)
