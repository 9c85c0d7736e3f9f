#include "textflag.h"

// func kernelAVX2(k int, a []float32, lda int, b, c []float32, ldc int, bias []float32, flags int)
//
// c[r][0:16] += sum over p of a[r*lda+p] * b[p*16:p*16+16], for r in 0..5,
// starting from bias[0:16] instead of c if flags&kernelBias, and setting
// negative results to 0 if flags&kernelReLU;
// Y0..Y11 hold the 6×16 tile of c, Y12/Y13 a row of b, Y14/Y15 the
// broadcast elements of a. SI and AX point at rows 0 and 3 of a, BX is
// lda in bytes.
TEXT ·kernelAVX2(SB), NOSPLIT, $0-128
	MOVQ k+0(FP), CX
	MOVQ a_base+8(FP), SI
	MOVQ lda+32(FP), BX
	SHLQ $2, BX
	LEAQ (SI)(BX*2), AX
	ADDQ BX, AX
	MOVQ b_base+40(FP), DI
	MOVQ c_base+64(FP), DX
	MOVQ ldc+88(FP), R8
	SHLQ $2, R8
	LEAQ (DX)(R8*1), R9
	LEAQ (R9)(R8*1), R10
	LEAQ (R10)(R8*1), R11
	LEAQ (R11)(R8*1), R12
	LEAQ (R12)(R8*1), R13

	MOVQ flags+120(FP), R8
	TESTQ $1, R8
	JZ   loadc
	MOVQ bias_base+96(FP), R8
	VMOVUPS (R8), Y0
	VMOVUPS 32(R8), Y1
	VMOVAPS Y0, Y2
	VMOVAPS Y1, Y3
	VMOVAPS Y0, Y4
	VMOVAPS Y1, Y5
	VMOVAPS Y0, Y6
	VMOVAPS Y1, Y7
	VMOVAPS Y0, Y8
	VMOVAPS Y1, Y9
	VMOVAPS Y0, Y10
	VMOVAPS Y1, Y11
	JMP  loaded

loadc:
	VMOVUPS (DX), Y0
	VMOVUPS 32(DX), Y1
	VMOVUPS (R9), Y2
	VMOVUPS 32(R9), Y3
	VMOVUPS (R10), Y4
	VMOVUPS 32(R10), Y5
	VMOVUPS (R11), Y6
	VMOVUPS 32(R11), Y7
	VMOVUPS (R12), Y8
	VMOVUPS 32(R12), Y9
	VMOVUPS (R13), Y10
	VMOVUPS 32(R13), Y11

loaded:

#define STEP(boff) \
	VMOVUPS boff(DI), Y12 \
	VMOVUPS boff+32(DI), Y13 \
	VBROADCASTSS (SI), Y14 \
	VFMADD231PS Y12, Y14, Y0 \
	VFMADD231PS Y13, Y14, Y1 \
	VBROADCASTSS (SI)(BX*1), Y15 \
	VFMADD231PS Y12, Y15, Y2 \
	VFMADD231PS Y13, Y15, Y3 \
	VBROADCASTSS (SI)(BX*2), Y14 \
	VFMADD231PS Y12, Y14, Y4 \
	VFMADD231PS Y13, Y14, Y5 \
	VBROADCASTSS (AX), Y15 \
	VFMADD231PS Y12, Y15, Y6 \
	VFMADD231PS Y13, Y15, Y7 \
	VBROADCASTSS (AX)(BX*1), Y14 \
	VFMADD231PS Y12, Y14, Y8 \
	VFMADD231PS Y13, Y14, Y9 \
	VBROADCASTSS (AX)(BX*2), Y15 \
	VFMADD231PS Y12, Y15, Y10 \
	VFMADD231PS Y13, Y15, Y11 \
	ADDQ $4, SI \
	ADDQ $4, AX

	// Four steps per iteration while k >= 4, then one at a time.
	CMPQ CX, $4
	JLT  tail

loop4:
	// b is read in order (the next panel follows), ahead of its use.
	PREFETCHT0 2048(DI)
	PREFETCHT0 2112(DI)
	PREFETCHT0 2176(DI)
	PREFETCHT0 2240(DI)
	STEP(0)
	STEP(64)
	STEP(128)
	STEP(192)
	ADDQ $256, DI
	SUBQ $4, CX
	CMPQ CX, $4
	JGE  loop4

tail:
	TESTQ CX, CX
	JZ    done

loop1:
	STEP(0)
	ADDQ $64, DI
	DECQ CX
	JNZ  loop1

done:
	MOVQ flags+120(FP), R8
	TESTQ $2, R8
	JZ   store
	VXORPS Y12, Y12, Y12
	VMAXPS Y12, Y0, Y0
	VMAXPS Y12, Y1, Y1
	VMAXPS Y12, Y2, Y2
	VMAXPS Y12, Y3, Y3
	VMAXPS Y12, Y4, Y4
	VMAXPS Y12, Y5, Y5
	VMAXPS Y12, Y6, Y6
	VMAXPS Y12, Y7, Y7
	VMAXPS Y12, Y8, Y8
	VMAXPS Y12, Y9, Y9
	VMAXPS Y12, Y10, Y10
	VMAXPS Y12, Y11, Y11

store:

	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, (R9)
	VMOVUPS Y3, 32(R9)
	VMOVUPS Y4, (R10)
	VMOVUPS Y5, 32(R10)
	VMOVUPS Y6, (R11)
	VMOVUPS Y7, 32(R11)
	VMOVUPS Y8, (R12)
	VMOVUPS Y9, 32(R12)
	VMOVUPS Y10, (R13)
	VMOVUPS Y11, 32(R13)
	VZEROUPPER
	RET
