package event

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
)

// scanner validates JSON text strictly (RFC 8259 grammar, at most maxDepth
// levels of nesting) in one pass. On the way it notes where the root
// object's "events" value and each of its elements start and end, so that
// events can be checked and copied without a second parse. UTF-8 is
// checked separately.
type scanner struct {
	b     []byte
	stack [maxDepth]byte
	slot  [maxDepth]int32 // index in conts of each open container, -1 if not recorded
	last  [maxDepth]int32 // index in elems of each open container's latest child
	depth int
	// rec asks for the containers and their children to be recorded in
	// conts and elems, which the caller hands to a containers; full is set
	// once they reach their bounds, after which nothing new is recorded.
	rec, full          bool
	conts              []container
	elems              []elem
	maxConts, maxElems int
	escapes            int // backslashes seen in strings so far

	want       bool // the caller wants the layout
	keyEvents  bool // the root object's current key is "events"
	inEvents   bool // the first events value is an array, open at depth 2
	inElement  bool // an element of events has started and not ended
	eventStart int  // start of the current element of events
	valueStart int  // start of the events value
	lay        layout
}

// layout is where a batch body keeps its events.
type layout struct {
	// escaped is set when a root key holds escapes: it might spell
	// "events", so the rest of the layout cannot be trusted.
	escaped bool
	// eventsKeys counts the root object's "events" keys.
	eventsKeys int
	// events is the first "events" value.
	events []byte
	// spans locate the elements of events when it is an array.
	spans [][2]int
}

// maxDepth bounds the nesting of arrays and objects in a body.
const maxDepth = 128

func syntaxErr(msg string, at int) error {
	return errors.New(msg + " at offset " + strconv.Itoa(at))
}

// scanLayout validates b and returns the layout of its events; spans is
// reused for the element spans.
func scanLayout(b []byte, spans [][2]int, ct *containers) (layout, error) {
	s := scanner{b: b, want: true}
	s.record(ct)
	s.lay.spans = spans
	err := s.run()
	ct.conts, ct.elems = s.conts, s.elems
	if err != nil {
		// Naming the event helps a client find the fault in a large batch.
		if s.inElement {
			err = fmt.Errorf("%w (in events[%d])", err, len(s.lay.spans))
		}
		return layout{}, err
	}
	return s.lay, nil
}

// strictJSON reports whether b is valid JSON under the scanner's rules;
// when ct is not nil it records b's containers and their children.
func strictJSON(b []byte, ct *containers) error {
	s := scanner{b: b}
	if ct == nil {
		return s.run()
	}
	s.record(ct)
	err := s.run()
	ct.conts, ct.elems = s.conts, s.elems
	return err
}

// record makes the scanner record into ct's storage, grown ahead for a
// typical document so that the scan seldom stops to grow it.
//
// The record is bounded to 1.75 bytes per byte of the document (events
// like the reference client's need about 1.1), so that a body of tiny
// values cannot make it many times the body's size. What is not
// recorded, the walker reads byte by byte.
func (s *scanner) record(ct *containers) {
	ct.reset(s.b)
	s.rec = true
	s.conts, s.elems = ct.conts, ct.elems
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
			if s.inEvents && s.depth == 2 {
				s.eventStart, s.inElement = i, true
			} else if s.depth == 1 && s.keyEvents {
				s.lay.eventsKeys++
				if s.lay.eventsKeys == 1 {
					s.valueStart = i
					s.inEvents = b[i] == '['
				}
			}
		}
		var err error
		switch c := b[i]; c {
		case '{', '[':
			if s.depth == maxDepth {
				return syntaxErr("arrays and objects nest deeper than "+strconv.Itoa(maxDepth)+" levels", i)
			}
			s.stack[s.depth] = c
			if s.rec {
				s.opened(i)
			}
			s.depth++
			i = s.ws(i + 1)
			if i < len(b) && b[i] == c+2 { // '}' is '{'+2, ']' is '['+2
				s.depth--
				i++
				if s.rec {
					s.closed(i)
				}
				if s.depth == 1 {
					s.inEvents = false // an empty events array
				}
				break
			}
			if c == '{' {
				if i, err = s.key(i); err != nil {
					return err
				}
			}
			continue
		case '"':
			i, err = s.str(i)
		case 't':
			i, err = s.literal(i, "true")
		case 'f':
			i, err = s.literal(i, "false")
		case 'n':
			i, err = s.literal(i, "null")
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
				if i != len(b) {
					return syntaxErr("unexpected data after the JSON value", i)
				}
				return nil
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
				if top == '{' {
					return syntaxErr("expected , or } after an object value, found "+strconv.QuoteRune(rune(b[i])), i)
				}
				return syntaxErr("expected , or ] after an array element, found "+strconv.QuoteRune(rune(b[i])), i)
			}
			s.depth--
			i++
			if s.rec {
				s.closed(i)
			}
			if s.depth == 1 && s.inEvents {
				s.inEvents = false // the events array closed
			}
		}
	}
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

// noteEnd records the end of a value that just completed at index i.
func (s *scanner) noteEnd(i int) {
	switch {
	case s.inEvents && s.depth == 2:
		s.lay.spans = append(s.lay.spans, [2]int{s.eventStart, i})
		s.inElement = false
	case s.depth == 1 && s.keyEvents && s.lay.eventsKeys == 1 && s.lay.events == nil:
		s.lay.events = s.b[s.valueStart:i]
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
		s.keyEvents = string(k) == "events"
		for _, c := range k {
			if c == '\\' {
				s.lay.escaped = true
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

func (s *scanner) literal(i int, lit string) (int, error) {
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
