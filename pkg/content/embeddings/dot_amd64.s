#include "textflag.h"

// func dotAVX2(a []int8, b []int16) int32
// Bytes of a widened to words, multiplied by b's words and summed in
// pairs (VPMADDWD) into two 8-lane int32 accumulators, 32 elements a
// step; then 16; then one at a time.
TEXT ·dotAVX2(SB), NOSPLIT, $0-52
	MOVQ a_base+0(FP), SI
	MOVQ a_len+8(FP), CX
	MOVQ b_base+24(FP), DI
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1

loop32:
	CMPQ CX, $32
	JL   loop16
	VPMOVSXBW (SI), Y2
	VPMOVSXBW 16(SI), Y3
	VPMADDWD (DI), Y2, Y2
	VPMADDWD 32(DI), Y3, Y3
	VPADDD Y2, Y0, Y0
	VPADDD Y3, Y1, Y1
	ADDQ $32, SI
	ADDQ $64, DI
	SUBQ $32, CX
	JMP  loop32

loop16:
	CMPQ CX, $16
	JL   reduce
	VPMOVSXBW (SI), Y2
	VPMADDWD (DI), Y2, Y2
	VPADDD Y2, Y0, Y0
	ADDQ $16, SI
	ADDQ $32, DI
	SUBQ $16, CX

reduce:
	VPADDD Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD X1, X0, X0
	VPHADDD X0, X0, X0
	VPHADDD X0, X0, X0
	VMOVD X0, AX

scalar:
	TESTQ CX, CX
	JE    done
	MOVBQSX (SI), BX
	MOVWQSX (DI), DX
	IMULQ DX, BX
	ADDL BX, AX
	INCQ SI
	ADDQ $2, DI
	DECQ CX
	JMP  scalar

done:
	VZEROUPPER
	MOVL AX, ret+48(FP)
	RET
