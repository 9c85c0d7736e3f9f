//go:build !amd64

package encoder

func bestKernel() kernelFunc { return kernelGo }

func bestSoftmax() func([]float32) { return softmaxGo }
