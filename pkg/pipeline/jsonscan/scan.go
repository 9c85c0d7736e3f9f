// Package jsonscan checks JSON text strictly in one pass and reads values
// where they lie, without building a tree: it checks a document against
// the RFC 8259 grammar, records where its arrays and objects and their
// children start and end (an Index), finds the members of one name of the
// root object while checking, walks objects and arrays by that record, and
// quotes strings. It knows nothing of what the documents mean.
package jsonscan

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
)

// MaxDepth bounds the nesting of arrays and objects in a document.
const MaxDepth = 128

// Layout is where a document keeps the root object's members of one name.
type Layout struct {
	// Escaped is set when a root key holds escapes: it might spell the
	// name, so the rest of the layout cannot be trusted.
	Escaped bool
	// Count counts the root object's keys of the name, as written.
	Count int
	// Value is the first such member's value.
	Value []byte
	// Spans locate the elements of Value when it is an array, as offsets
	// into the document.
	Spans [][2]int
}

// Check reports whether b is valid JSON under the scanner's rules (RFC
// 8259 grammar, at most MaxDepth levels of nesting); when x is not nil it
// records b's containers and their children in x. UTF-8 is not checked.
func Check(b []byte, x *Index) error {
	s := scanner{b: b}
	if x == nil {
		return s.run()
	}
	s.record(x)
	err := s.run()
	x.conts, x.elems = s.conts, s.elems
	return err
}

// ScanLayout checks b as Check does, records it in x, and returns the
// layout of the root object's members named name; spans is reused for the
// element spans. An error inside an element of the first such array names
// the element.
func ScanLayout(b []byte, name string, spans [][2]int, x *Index) (Layout, error) {
	s := scanner{b: b, name: name, want: true}
	s.record(x)
	s.lay.Spans = spans
	err := s.run()
	x.conts, x.elems = s.conts, s.elems
	if err != nil {
		// Naming the element helps a client find the fault in a large
		// document.
		if s.inElement {
			err = fmt.Errorf("%w (in %s[%d])", err, name, len(s.lay.Spans))
		}
		return Layout{}, err
	}
	return s.lay, nil
}

// scanner validates JSON text strictly in one pass. On the way it can note
// where the root object's member of one name and each of its elements
// start and end, so that they can be checked and copied without a second
// parse.
type scanner struct {
	b     []byte
	stack [MaxDepth]byte
	slot  [MaxDepth]int32 // index in conts of each open container, -1 if not recorded
	last  [MaxDepth]int32 // index in elems of each open container's latest child
	depth int
	// rec asks for the containers and their children to be recorded in
	// conts and elems, which the caller hands to an Index; full is set
	// once they reach their bounds, after which nothing new is recorded.
	rec, full          bool
	conts              []container
	elems              []elem
	maxConts, maxElems int
	escapes            int // backslashes seen in strings so far

	want       bool   // the caller wants the layout
	name       string // of the root members whose layout is wanted
	keyIsName  bool   // the root object's current key is name
	inArray    bool   // the first value of name is an array, open at depth 2
	inElement  bool   // an element of that array has started and not ended
	elemStart  int    // start of the current element
	valueStart int    // start of the value of name
	lay        Layout
}

func syntaxErr(msg string, at int) error {
	return errors.New(msg + " at offset " + strconv.Itoa(at))
}

// record makes the scanner record into x's storage, grown ahead for a
// typical document so that the scan seldom stops to grow it.
//
// The record is bounded to 1.75 bytes per byte of the document (events
// like the reference client's need about 1.1), so that a document of tiny
// values cannot make it many times the document's size. What is not
// recorded, walks read byte by byte.
func (s *scanner) record(x *Index) {
	x.reset(s.b)
	s.rec = true
	s.conts, s.elems = x.conts, x.elems
	s.maxElems = len(s.b)/16 + 64 // 24 bytes each
	s.maxConts = len(s.b)/64 + 16 // 16 bytes each
	if n := len(s.b) / 20; cap(s.elems) < n {
		s.elems = make([]elem, 0, n)
	}
	if n := len(s.b) / 80; cap(s.conts) < n {
		s.conts = make([]container, 0, n)
	}
}

func (s *scanner) ws(i int) int {
	b := s.b
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// run scans the document in one loop, which stays in one function as it
// runs once for every value: a value, then what follows it, until the
// root value ends.
func (s *scanner) run() error {
	b := s.b
	i := s.ws(0)
	if i == len(b) {
		return errors.New("no JSON value")
	}
	for {
		// A value starts at i.
		if i >= len(b) {
			return syntaxErr("unexpected end of input", i)
		}
		if s.rec && s.depth > 0 {
			s.childStart(i)
		}
		if s.want {
			s.noteStart(i)
		}
		var err error
		switch c := b[i]; c {
		case '{', '[':
			var inside bool
			if i, inside, err = s.open(i, c); err != nil {
				return err
			}
			if inside {
				continue // at the container's first value
			}
		case '"':
			i, err = s.str(i)
		case 't', 'f', 'n':
			i, err = s.literal(i)
		default:
			i, err = s.number(i)
		}
		if err != nil {
			return err
		}

		// After a value: close containers or move to the next element.
		for {
			if s.rec && !s.full && s.depth > 0 {
				s.elems[s.last[s.depth-1]].end = int32(i)
			}
			if s.want {
				s.noteEnd(i)
			}
			i = s.ws(i)
			if s.depth == 0 {
				return s.end(i)
			}
			if i >= len(b) {
				return syntaxErr("unexpected end of input", i)
			}
			top := s.stack[s.depth-1]
			if b[i] == ',' {
				i = s.ws(i + 1)
				if top == '{' {
					if i, err = s.key(i); err != nil {
						return err
					}
				}
				break
			}
			if b[i] != top+2 {
				return s.unexpected(i, top)
			}
			// What close does, written out: close is too large for the
			// compiler to inline here, where it runs for every container.
			s.depth--
			i++
			if s.rec {
				s.closed(i)
			}
			if s.depth == 1 {
				s.inArray = false // the array of the name closed, if it was open
			}
		}
	}
}

// open reads the opening bracket c of a container at i. An empty
// container is read whole; otherwise the scan goes inside (inside is
// set), past the first key of an object.
func (s *scanner) open(i int, c byte) (end int, inside bool, err error) {
	b := s.b
	if s.depth == MaxDepth {
		return i, false, syntaxErr("arrays and objects nest deeper than "+strconv.Itoa(MaxDepth)+" levels", i)
	}
	s.stack[s.depth] = c
	if s.rec {
		s.opened(i)
	}
	s.depth++
	i = s.ws(i + 1)
	if i < len(b) && b[i] == c+2 { // '}' is '{'+2, ']' is '['+2
		s.close(i)
		return i + 1, false, nil
	}
	if c == '{' {
		i, err = s.key(i)
	}
	return i, true, err
}

// close closes the innermost container, whose closing bracket is at i.
func (s *scanner) close(i int) {
	s.depth--
	if s.rec {
		s.closed(i + 1)
	}
	if s.depth == 1 {
		s.inArray = false // the array of the name closed, if it was open
	}
}

// end checks that nothing but whitespace follows the root value; i is
// past the whitespace.
func (s *scanner) end(i int) error {
	if i != len(s.b) {
		return syntaxErr("unexpected data after the JSON value", i)
	}
	return nil
}

// unexpected reports the byte at i, which neither continues nor closes
// the container top opened.
func (s *scanner) unexpected(i int, top byte) error {
	if top == '{' {
		return syntaxErr("expected , or } after an object value, found "+strconv.QuoteRune(rune(s.b[i])), i)
	}
	return syntaxErr("expected , or ] after an array element, found "+strconv.QuoteRune(rune(s.b[i])), i)
}

// opened records a container opening at i, at s.depth.
func (s *scanner) opened(i int) {
	if !s.full && len(s.conts) >= s.maxConts {
		s.full = true
	}
	if s.full {
		s.slot[s.depth] = -1
		return
	}
	s.slot[s.depth] = int32(len(s.conts))
	s.conts = append(s.conts, container{open: int32(i), first: int32(len(s.elems))})
}

// childStart notes a value starting at i in the open container: an array
// element gets its own entry; an object member has one since its key.
func (s *scanner) childStart(i int) {
	d := s.depth - 1
	if s.stack[d] == '[' {
		s.addChild(d, elem{})
	}
	if !s.full {
		s.elems[s.last[d]].start = int32(i)
	}
}

// addChild appends the entry of a child of the container open at depth d.
// Its next sibling follows it unless it is a container, whose closing
// moves next past its descendants.
func (s *scanner) addChild(d int, e elem) {
	if !s.full && len(s.elems) >= s.maxElems {
		s.full = true
	}
	if s.full {
		return
	}
	n := int32(len(s.elems))
	e.next = n + 1
	s.elems = append(s.elems, e)
	s.last[d] = n
}

// closed records the container at s.depth ending at i: its children end
// here, and its own entry, if it is a child, is followed by what follows
// them. A container still open when the record filled up keeps its end
// but not its children, some of which are missing.
func (s *scanner) closed(i int) {
	k := s.slot[s.depth]
	if k < 0 {
		return
	}
	c := &s.conts[k]
	c.close = int32(i)
	if s.full {
		c.after = -1
		return
	}
	c.after = int32(len(s.elems))
	if s.depth > 0 {
		s.elems[s.last[s.depth-1]].next = c.after
	}
}

// noteStart records the start at i of a value the layout may need: an
// element of the array of the name, or a value of the name.
func (s *scanner) noteStart(i int) {
	if s.inArray && s.depth == 2 {
		s.elemStart, s.inElement = i, true
	} else if s.depth == 1 && s.keyIsName {
		s.lay.Count++
		if s.lay.Count == 1 {
			s.valueStart = i
			s.inArray = s.b[i] == '['
		}
	}
}

// noteEnd records the end of a value that just completed at index i.
func (s *scanner) noteEnd(i int) {
	switch {
	case s.inArray && s.depth == 2:
		s.lay.Spans = append(s.lay.Spans, [2]int{s.elemStart, i})
		s.inElement = false
	case s.depth == 1 && s.keyIsName && s.lay.Count == 1 && s.lay.Value == nil:
		s.lay.Value = s.b[s.valueStart:i]
	}
}

// key reads an object key and its colon; i is at the key.
func (s *scanner) key(i int) (int, error) {
	b := s.b
	if i >= len(b) || b[i] != '"' {
		return i, syntaxErr("expected a string key", i)
	}
	escapes := s.escapes
	end, err := s.str(i)
	if err != nil {
		return end, err
	}
	if s.rec {
		s.addChild(s.depth-1, elem{keyStart: int32(i), keyEnd: int32(end), escaped: s.escapes != escapes})
	}
	if s.depth == 1 && s.want {
		k := b[i+1 : end-1]
		s.keyIsName = string(k) == s.name
		for _, c := range k {
			if c == '\\' {
				s.lay.Escaped = true
				break
			}
		}
	}
	i = s.ws(end)
	if i >= len(b) || b[i] != ':' {
		return i, syntaxErr("expected : after an object key", i)
	}
	return s.ws(i + 1), nil
}

// str reads a string starting at the quote at b[i] and returns the index
// past its closing quote.
func (s *scanner) str(i int) (int, error) {
	b := s.b
	i++
	for {
		// Skip eight ordinary bytes at a time, then jump straight to the
		// first special byte: the lowest flagged byte is always a true hit.
		for i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			less20 := (x - lsb*0x20) & ^x & msb
			quote := (x ^ lsb*'"' - lsb) & ^(x ^ lsb*'"') & msb
			bslash := (x ^ lsb*'\\' - lsb) & ^(x ^ lsb*'\\') & msb
			if m := less20 | quote | bslash; m != 0 {
				i += bits.TrailingZeros64(m) / 8
				break
			}
			i += 8
		}
		if i >= len(b) {
			return i, syntaxErr("unterminated string", i)
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			s.escapes++
			if i+1 >= len(b) {
				return i, syntaxErr("unterminated string", i)
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return i, syntaxErr(`invalid \u escape`, i)
				}
				i += 6
			default:
				return i, syntaxErr("invalid escape "+strconv.Quote(string(b[i:i+2])), i)
			}
		case c < 0x20:
			return i, syntaxErr("control character "+strconv.QuoteRune(rune(c))+" in a string", i)
		default:
			i++
		}
	}
}

func isHex(c byte) bool {
	return c-'0' < 10 || (c|0x20)-'a' < 6
}

// literal reads true, false or null, as the byte at i says.
func (s *scanner) literal(i int) (int, error) {
	lit := "null"
	switch s.b[i] {
	case 't':
		lit = "true"
	case 'f':
		lit = "false"
	}
	if len(s.b)-i < len(lit) || string(s.b[i:i+len(lit)]) != lit {
		return i, syntaxErr("invalid literal", i)
	}
	return i + len(lit), nil
}

func isDigit(c byte) bool { return c-'0' < 10 }

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number(i int) (int, error) {
	b := s.b
	start := i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && isDigit(b[i]):
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		if i < len(b) {
			// Some encoders write these for floats JSON cannot express.
			for _, lit := range [...]string{"NaN", "Infinity"} {
				if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
					return i, syntaxErr(string(b[start:i])+lit+" is not a JSON number", start)
				}
			}
			return i, syntaxErr("invalid character "+strconv.QuoteRune(rune(b[i]))+" where a value was expected", i)
		}
		return i, syntaxErr("unexpected end of input", i)
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return i, syntaxErr("invalid number "+strconv.Quote(string(b[start:i])), start)
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return i, syntaxErr("invalid number "+strconv.Quote(string(b[start:i])), start)
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, nil
}
