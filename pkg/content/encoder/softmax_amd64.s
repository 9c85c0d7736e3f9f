#include "textflag.h"

DATA expmin<>+0(SB)/4, $0xc2fc0000 // -126.0
GLOBL expmin<>(SB), RODATA|NOPTR, $4

// func softmaxAVX2(p []float32)
//
// p[i] = exp(p[i] - max p) / sum, for len(p) a positive multiple of 8; exp
// as in expf (Cephes), eight at a time with fused multiply-adds.
TEXT ·softmaxAVX2(SB), NOSPLIT, $0-24
	MOVQ p_base+0(FP), SI
	MOVQ p_len+8(FP), CX
	SHRQ $3, CX

	// Y0 = max
	VMOVUPS (SI), Y0
	MOVQ SI, DI
	MOVQ CX, DX
max:
	VMAXPS (DI), Y0, Y0
	ADDQ $32, DI
	DECQ DX
	JNZ  max
	VPERM2F128 $1, Y0, Y0, Y1
	VMAXPS Y1, Y0, Y0
	VPERMILPS $0x4e, Y0, Y1
	VMAXPS Y1, Y0, Y0
	VPERMILPS $0xb1, Y0, Y1
	VMAXPS Y1, Y0, Y0

	// Constants (Cephes expf).
	MOVL $0x3fb8aa3b, AX // log2(e)
	MOVL AX, X2
	VBROADCASTSS X2, Y2
	MOVL $0x3f318000, AX // ln2, high part: 0.693359375
	MOVL AX, X3
	VBROADCASTSS X3, Y3
	MOVL $0xb95e8083, AX // ln2, low part: -2.12194440e-4
	MOVL AX, X4
	VBROADCASTSS X4, Y4
	MOVL $0x39506967, AX // 1.9875691500e-4
	MOVL AX, X5
	VBROADCASTSS X5, Y5
	MOVL $0x3ab743ce, AX // 1.3981999507e-3
	MOVL AX, X6
	VBROADCASTSS X6, Y6
	MOVL $0x3c088908, AX // 8.3334519073e-3
	MOVL AX, X7
	VBROADCASTSS X7, Y7
	MOVL $0x3d2aa9c1, AX // 4.1665795894e-2
	MOVL AX, X8
	VBROADCASTSS X8, Y8
	MOVL $0x3e2aaaaa, AX // 1.6666665459e-1
	MOVL AX, X9
	VBROADCASTSS X9, Y9
	MOVL $0x3f000000, AX // 5.0000001201e-1
	MOVL AX, X10
	VBROADCASTSS X10, Y10
	MOVL $0x3f800000, AX // 1
	MOVL AX, X11
	VBROADCASTSS X11, Y11
	VXORPS Y15, Y15, Y15 // sum

	MOVQ SI, DI
	MOVQ CX, DX
exp:
	VMOVUPS (DI), Y12
	VSUBPS Y0, Y12, Y12            // x = p - max
	VMULPS Y2, Y12, Y13
	VROUNDPS $0, Y13, Y13          // n = round(x·log2e)
	VFNMADD231PS Y3, Y13, Y12      // r = x - n·ln2hi
	VFNMADD231PS Y4, Y13, Y12      // r -= n·ln2lo
	VMOVAPS Y5, Y1
	VFMADD213PS Y6, Y12, Y1        // q = q·r + c
	VFMADD213PS Y7, Y12, Y1
	VFMADD213PS Y8, Y12, Y1
	VFMADD213PS Y9, Y12, Y1
	VFMADD213PS Y10, Y12, Y1
	VMULPS Y12, Y12, Y14
	VFMADD213PS Y12, Y14, Y1       // q·r² + r
	VADDPS Y11, Y1, Y1             // + 1
	// Below 2**-126 (n < -126, or x = -Inf) the result is 0.
	VBROADCASTSS expmin<>(SB), Y14
	VCMPPS $1, Y14, Y13, Y14
	VCVTPS2DQ Y13, Y13
	VPSLLD $23, Y13, Y13
	VPADDD Y11, Y13, Y13           // 2**n: n added to the exponent of 1.0
	VMULPS Y13, Y1, Y1
	VANDNPS Y1, Y14, Y1
	VMOVUPS Y1, (DI)
	VADDPS Y1, Y15, Y15
	ADDQ $32, DI
	DECQ DX
	JNZ  exp

	// Y15 = sum in every lane.
	VPERM2F128 $1, Y15, Y15, Y1
	VADDPS Y1, Y15, Y15
	VPERMILPS $0x4e, Y15, Y1
	VADDPS Y1, Y15, Y15
	VPERMILPS $0xb1, Y15, Y1
	VADDPS Y1, Y15, Y15

	MOVQ SI, DI
	MOVQ CX, DX
div:
	VMOVUPS (DI), Y12
	VDIVPS Y15, Y12, Y12
	VMOVUPS Y12, (DI)
	ADDQ $32, DI
	DECQ DX
	JNZ  div
	VZEROUPPER
	RET
