package event

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// The walker reads bytes that already passed the scanner, so it trusts the
// syntax and only finds where values start and end. It builds no tree:
// validation looks at the few fields it checks and events are copied as
// they were sent.

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i].
// Most strings the walker skips are keys and short values, so it looks at
// eight bytes at a time for a quote or a backslash rather than calling
// bytes.IndexByte for each.
func skipString(b []byte, i int) int {
	i++
	for {
		for i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			quote := (x ^ lsb*'"' - lsb) & ^(x ^ lsb*'"') & msb
			bslash := (x ^ lsb*'\\' - lsb) & ^(x ^ lsb*'\\') & msb
			if m := quote | bslash; m != 0 {
				// The lowest flagged byte is always a true hit.
				i += bits.TrailingZeros64(m) / 8
				break
			}
			i += 8
		}
		if i >= len(b) {
			return len(b)
		}
		switch b[i] {
		case '"':
			return i + 1
		case '\\':
			i += 2 // an escape; the rest of a \u escape is hex digits
		default:
			i++
		}
	}
}

// containers records where each array and object of one document ends,
// as the scanner found them, so the walker skips a container in one step
// instead of reading it again at every level it is nested in.
type containers struct {
	doc   []byte
	open  []int32 // offsets of the opening brackets, ascending
	close []int32 // offsets just past the matching closing brackets
	next  int     // where the next lookup probably is
}

func (c *containers) reset(doc []byte) {
	c.doc, c.open, c.close, c.next = doc, c.open[:0], c.close[:0], 0
}

// end returns the index just past the container at b[i], where b is a
// part of the recorded document, or -1 when it was not recorded.
func (c *containers) end(b []byte, i int) int {
	if c == nil || c.doc == nil {
		return -1
	}
	// b shares the document's array, so capacities give its offset.
	base := cap(c.doc) - cap(b)
	if base < 0 || base > len(c.doc) {
		return -1
	}
	at := int32(base + i)
	// The walk mostly moves forward through the document, so look just
	// past the previous hit before searching.
	for k := c.next; k < len(c.open) && k < c.next+8 && c.open[k] <= at; k++ {
		if c.open[k] == at {
			c.next = k + 1
			return int(c.close[k]) - base
		}
	}
	lo, hi := 0, len(c.open)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if c.open[mid] < at {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(c.open) && c.open[lo] == at {
		c.next = lo + 1
		return int(c.close[lo]) - base
	}
	return -1
}

// skipValue returns the index just past the value starting at b[i].
func skipValue(c *containers, b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		if end := c.end(b, i); end >= 0 {
			return end
		}
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	default:
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// members iterates over the members of the object held in b.
type members struct {
	c *containers
	b []byte
	i int
}

func newMembers(c *containers, obj []byte) members { return members{c: c, b: obj, i: 1} }

// next returns the next member's raw key (without quotes, escapes intact)
// and where its value starts and ends in the object.
func (m *members) next() (key []byte, start, end int, ok bool) {
	i := skipWS(m.b, m.i)
	if i < len(m.b) && m.b[i] == ',' {
		i = skipWS(m.b, i+1)
	}
	if i >= len(m.b) || m.b[i] != '"' {
		return nil, 0, 0, false
	}
	kEnd := skipString(m.b, i)
	key = m.b[i+1 : kEnd-1]
	start = skipWS(m.b, skipWS(m.b, kEnd)+1) // past the colon
	end = skipValue(m.c, m.b, start)
	m.i = end
	return key, start, end, true
}

// elements iterates over the elements of the array held in b.
type elements struct {
	c *containers
	b []byte
	i int
}

func newElements(c *containers, arr []byte) elements { return elements{c: c, b: arr, i: 1} }

// next returns where the next element starts and ends in the array.
func (e *elements) next() (start, end int, ok bool) {
	i := skipWS(e.b, e.i)
	if i < len(e.b) && e.b[i] == ',' {
		i = skipWS(e.b, i+1)
	}
	if i >= len(e.b) || e.b[i] == ']' {
		return 0, 0, false
	}
	e.i = skipValue(e.c, e.b, i)
	return i, e.i, true
}

// keyName decodes a raw key when it holds escapes; most keys do not, and
// are returned as they are.
func keyName(raw []byte, scratch *[]byte) []byte {
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw
	}
	start := len(*scratch)
	*scratch = unescape(*scratch, raw)
	return (*scratch)[start:]
}

// stringValue returns the content of the JSON string v, decoded. Strings
// without escapes are returned in place; others are decoded into scratch,
// which only grows, so earlier results stay valid.
func stringValue(v []byte, scratch *[]byte) []byte {
	return keyName(v[1:len(v)-1], scratch)
}

// unescape appends the decoded form of a JSON string's content. A lone
// surrogate becomes U+FFFD, as encoding/json decodes it.
func unescape(dst, s []byte) []byte {
	for len(s) > 0 {
		j := bytes.IndexByte(s, '\\')
		if j < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:j]...)
		s = s[j:]
		switch c := s[1]; c {
		case 'b':
			dst, s = append(dst, '\b'), s[2:]
		case 'f':
			dst, s = append(dst, '\f'), s[2:]
		case 'n':
			dst, s = append(dst, '\n'), s[2:]
		case 'r':
			dst, s = append(dst, '\r'), s[2:]
		case 't':
			dst, s = append(dst, '\t'), s[2:]
		case 'u':
			r := hex4(s[2:6])
			s = s[6:]
			if utf16.IsSurrogate(r) {
				r2 := utf8.RuneError
				if len(s) >= 6 && s[0] == '\\' && s[1] == 'u' {
					r2 = hex4(s[2:6])
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r, s = d, s[6:]
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
		default: // '"', '\\', '/'
			dst, s = append(dst, c), s[2:]
		}
	}
	return dst
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c >= 'a':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// typeName names the JSON type of the value v for error messages.
func typeName(v []byte) string {
	switch v[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

// isNumber reports whether v is a JSON number.
func isNumber(v []byte) bool { return v[0] == '-' || (v[0] >= '0' && v[0] <= '9') }
