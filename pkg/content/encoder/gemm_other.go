//go:build !amd64

package encoder

func bestKernel() kernelFunc { return kernelGo }
