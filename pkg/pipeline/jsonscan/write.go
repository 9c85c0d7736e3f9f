package jsonscan

import (
	"encoding/binary"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD so
// the output is always valid JSON, whatever an escape sequence decoded to.
func AppendString(dst []byte, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		// Skip eight plain ASCII bytes at a time: most text needs no escape.
		if i+8 <= len(s) && plainASCII8(binary.LittleEndian.Uint64(s[i:])) {
			i += 8
			continue
		}
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\ufffd`...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// Masks of the lowest and the highest bit of each byte of a word, for
// looking at eight bytes at a time.
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// plainASCII8 reports whether none of the eight bytes in x is a control
// character, a quote, a backslash or a non-ASCII byte.
func plainASCII8(x uint64) bool {
	hasLess20 := (x - lsb*0x20) & ^x & msb
	hasQuote := (x ^ lsb*'"' - lsb) & ^(x ^ lsb*'"') & msb
	hasBackslash := (x ^ lsb*'\\' - lsb) & ^(x ^ lsb*'\\') & msb
	return (hasLess20 | hasQuote | hasBackslash | x&msb) == 0
}
