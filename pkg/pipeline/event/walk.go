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
// and where each of its members or elements starts and ends, as the
// scanner found them, so that the walker neither reads a container again
// at every level it is nested in nor looks for the ends of keys and values.
type containers struct {
	doc   []byte
	conts []container // ascending by where they open
	elems []elem      // children of every container, in document order
	next  int         // where the next lookup probably is
}

// container is an array or object of the document.
type container struct {
	open, close int32 // offsets of the opening bracket and just past the closing one
	first       int32 // index in elems of the first child
	// after is the index in elems past the last descendant, or -1 when
	// the children were not all recorded.
	after int32
}

// elem is a member of an object or an element of an array, by offsets in
// the document.
type elem struct {
	keyStart, keyEnd int32 // the key with its quotes; unset for array elements
	start, end       int32 // the value
	next             int32 // index of the next sibling, past this one's descendants
	escaped          bool  // the key holds escapes
}

func (c *containers) reset(doc []byte) {
	c.doc, c.conts, c.elems, c.next = doc, c.conts[:0], c.elems[:0], 0
}

// maxPooledElems bounds the record a pooled containers keeps: that of a
// body of a few MiB.
const maxPooledElems = 100_000

// trim forgets the document and drops a record too large to keep.
func (c *containers) trim() {
	c.doc = nil
	if cap(c.elems) > maxPooledElems {
		c.conts, c.elems = nil, nil
	}
}

// find returns the index of the container at b[i], where b is a part of
// the recorded document, and b's offset in the document; k is -1 when the
// container was not recorded.
func (c *containers) find(b []byte, i int) (k, base int) {
	if c == nil || c.doc == nil || i >= len(b) {
		return -1, 0
	}
	// b shares the document's array, so capacities give its offset.
	base = cap(c.doc) - cap(b)
	if base < 0 || base+i >= len(c.doc) || &c.doc[base+i] != &b[i] {
		return -1, 0
	}
	at := int32(base + i)
	// The walk mostly moves forward through the document, so look just
	// past the previous hit before searching.
	for k := c.next; k < len(c.conts) && k < c.next+8 && c.conts[k].open <= at; k++ {
		if c.conts[k].open == at {
			c.next = k + 1
			return k, base
		}
	}
	lo, hi := 0, len(c.conts)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if c.conts[mid].open < at {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(c.conts) && c.conts[lo].open == at {
		c.next = lo + 1
		return lo, base
	}
	return -1, 0
}

// end returns the index just past the container at b[i], where b is a
// part of the recorded document, or -1 when it was not recorded.
func (c *containers) end(b []byte, i int) int {
	k, base := c.find(b, i)
	if k < 0 {
		return -1
	}
	return int(c.conts[k].close) - base
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
	// When the object was recorded, k is its next child's index in c.elems
	// up to after, and base is b's offset in the document.
	k, after int32
	base     int32
	indexed  bool
	// plain is set by next when the key it returned holds no escapes.
	plain bool
}

func newMembers(c *containers, obj []byte) members {
	m := members{c: c, b: obj, i: 1}
	if k, base := c.find(obj, 0); k >= 0 && c.conts[k].after >= 0 {
		m.indexed, m.k, m.after, m.base = true, c.conts[k].first, c.conts[k].after, int32(base)
	}
	return m
}

// next returns the next member's raw key (without quotes, escapes intact)
// and where its value starts and ends in the object.
func (m *members) next() (key []byte, start, end int, ok bool) {
	if m.indexed {
		if m.k >= m.after {
			return nil, 0, 0, false
		}
		e := &m.c.elems[m.k]
		m.k, m.plain = e.next, !e.escaped
		return m.b[e.keyStart-m.base+1 : e.keyEnd-m.base-1], int(e.start - m.base), int(e.end - m.base), true
	}
	i := skipWS(m.b, m.i)
	if i < len(m.b) && m.b[i] == ',' {
		i = skipWS(m.b, i+1)
	}
	if i >= len(m.b) || m.b[i] != '"' {
		return nil, 0, 0, false
	}
	kEnd := skipString(m.b, i)
	key = m.b[i+1 : kEnd-1]
	m.plain = false                          // not known
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
	// As in members.
	k, after int32
	base     int32
	indexed  bool
}

func newElements(c *containers, arr []byte) elements {
	e := elements{c: c, b: arr, i: 1}
	if k, base := c.find(arr, 0); k >= 0 && c.conts[k].after >= 0 {
		e.indexed, e.k, e.after, e.base = true, c.conts[k].first, c.conts[k].after, int32(base)
	}
	return e
}

// next returns where the next element starts and ends in the array.
func (e *elements) next() (start, end int, ok bool) {
	if e.indexed {
		if e.k >= e.after {
			return 0, 0, false
		}
		el := &e.c.elems[e.k]
		e.k = el.next
		return int(el.start - e.base), int(el.end - e.base), true
	}
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
