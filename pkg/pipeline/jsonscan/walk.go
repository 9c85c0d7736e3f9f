package jsonscan

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// Walks read bytes that already passed the scanner, so they trust the
// syntax and only find where values start and end. They build no tree:
// a reader looks at the few fields it needs and copies the rest as sent.

// SkipWS returns the index of the first byte at or after i that is not
// JSON whitespace.
func SkipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i].
// Most strings a walk skips are keys and short values, so it looks at
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

// SkipValue returns the index just past the value starting at b[i]; x,
// which may be nil, is the Index of the document b is a part of.
func SkipValue(x *Index, b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		if end := x.end(b, i); end >= 0 {
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

// Members iterates over the members of an object.
type Members struct {
	x *Index
	b []byte
	i int
	// When the object was recorded, k is its next child's index in x.elems
	// up to after, and base is b's offset in the document.
	k, after int32
	base     int32
	indexed  bool
	// plain is set by Next when the key it returned holds no escapes.
	plain bool
}

// NewMembers returns an iterator over the members of the object obj, a
// part of the document x records (x may be nil).
func NewMembers(x *Index, obj []byte) Members {
	m := Members{x: x, b: obj, i: 1}
	if k, base := x.find(obj, 0); k >= 0 && x.conts[k].after >= 0 {
		m.indexed, m.k, m.after, m.base = true, x.conts[k].first, x.conts[k].after, int32(base)
	}
	return m
}

// Next returns the next member's raw key (without quotes, escapes intact)
// and where its value starts and ends in the object.
func (m *Members) Next() (key []byte, start, end int, ok bool) {
	if m.indexed {
		if m.k >= m.after {
			return nil, 0, 0, false
		}
		e := &m.x.elems[m.k]
		m.k, m.plain = e.next, !e.escaped
		return m.b[e.keyStart-m.base+1 : e.keyEnd-m.base-1], int(e.start - m.base), int(e.end - m.base), true
	}
	i := SkipWS(m.b, m.i)
	if i < len(m.b) && m.b[i] == ',' {
		i = SkipWS(m.b, i+1)
	}
	if i >= len(m.b) || m.b[i] != '"' {
		return nil, 0, 0, false
	}
	kEnd := skipString(m.b, i)
	key = m.b[i+1 : kEnd-1]
	m.plain = false                          // not known
	start = SkipWS(m.b, SkipWS(m.b, kEnd)+1) // past the colon
	end = SkipValue(m.x, m.b, start)
	m.i = end
	return key, start, end, true
}

// Plain reports whether the key Next returned last is known to hold no
// escapes, so that it is its own name; when false, KeyName decodes it.
func (m *Members) Plain() bool { return m.plain }

// Elements iterates over the elements of an array.
type Elements struct {
	x *Index
	b []byte
	i int
	// As in Members.
	k, after int32
	base     int32
	indexed  bool
}

// NewElements returns an iterator over the elements of the array arr, a
// part of the document x records (x may be nil).
func NewElements(x *Index, arr []byte) Elements {
	e := Elements{x: x, b: arr, i: 1}
	if k, base := x.find(arr, 0); k >= 0 && x.conts[k].after >= 0 {
		e.indexed, e.k, e.after, e.base = true, x.conts[k].first, x.conts[k].after, int32(base)
	}
	return e
}

// Next returns where the next element starts and ends in the array.
func (e *Elements) Next() (start, end int, ok bool) {
	if e.indexed {
		if e.k >= e.after {
			return 0, 0, false
		}
		el := &e.x.elems[e.k]
		e.k = el.next
		return int(el.start - e.base), int(el.end - e.base), true
	}
	i := SkipWS(e.b, e.i)
	if i < len(e.b) && e.b[i] == ',' {
		i = SkipWS(e.b, i+1)
	}
	if i >= len(e.b) || e.b[i] == ']' {
		return 0, 0, false
	}
	e.i = SkipValue(e.x, e.b, i)
	return i, e.i, true
}

// Walker reads one scanned document: Index knows where its containers
// end, and Scratch receives decoded strings.
type Walker struct {
	Index   *Index
	Scratch *[]byte
}

// Fields looks up keys in the object obj in one pass, filling vals (as
// long as keys) with their values, and returns the first key that
// appears twice.
func (w Walker) Fields(obj []byte, keys []string, vals [][]byte) (dup string) {
	m := NewMembers(w.Index, obj)
	for {
		k, start, end, ok := m.Next()
		if !ok {
			return dup
		}
		if !m.plain {
			k = KeyName(k, w.Scratch)
		}
		for i, name := range keys {
			if string(k) == name {
				if vals[i] != nil && dup == "" {
					dup = name
				}
				vals[i] = obj[start:end]
				break
			}
		}
	}
}

// Members iterates over the members of the object obj.
func (w Walker) Members(obj []byte) Members { return NewMembers(w.Index, obj) }

// Elements iterates over the elements of the array arr.
func (w Walker) Elements(arr []byte) Elements { return NewElements(w.Index, arr) }

// String returns the content of the JSON string v, decoded (see
// StringValue).
func (w Walker) String(v []byte) []byte { return StringValue(v, w.Scratch) }

// KeyName decodes a raw key when it holds escapes; most keys do not, and
// are returned as they are. It appends to scratch as StringValue does.
func KeyName(raw []byte, scratch *[]byte) []byte {
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw
	}
	start := len(*scratch)
	*scratch = unescape(*scratch, raw)
	return (*scratch)[start:]
}

// StringValue returns the content of the JSON string v, decoded. Strings
// without escapes are returned in place; others are decoded into scratch,
// which only grows, so earlier results stay valid.
func StringValue(v []byte, scratch *[]byte) []byte {
	return KeyName(v[1:len(v)-1], scratch)
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

// TypeName names the JSON type of the value v for error messages.
func TypeName(v []byte) string {
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

// IsNumber reports whether the scanned value v is a JSON number.
func IsNumber(v []byte) bool { return v[0] == '-' || (v[0] >= '0' && v[0] <= '9') }
