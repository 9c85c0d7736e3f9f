package event

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/valyala/fastjson"
)

// strictJSON reports whether b is RFC 8259 JSON. fastjson's validator is
// fast but misses a raw control character in a string that also holds an
// escape sequence; raw control characters are rare, so the slower standard
// validator only runs when one is present.
func strictJSON(b []byte) error {
	// The validator recurses once per level: bound the depth before it runs
	// so that a body of brackets cannot exhaust the stack.
	if err := checkDepth(b, maxDepth); err != nil {
		return err
	}
	if err := fastjson.ValidateBytes(b); err != nil {
		return err
	}
	rawWS := false
	for i := 0; i < len(b); {
		if i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			if (x-lsb*0x20)&^x&msb == 0 {
				i += 8
				continue
			}
		}
		switch c := b[i]; {
		case c == '\t' || c == '\n' || c == '\r':
			rawWS = true
		case c < 0x20:
			return fmt.Errorf("control character 0x%02X at offset %d", c, i)
		}
		i++
	}
	if rawWS && bytes.IndexByte(b, '\\') >= 0 && !json.Valid(b) {
		return errors.New("raw control character inside a string")
	}
	return nil
}

// maxDepth bounds the nesting of arrays and objects in a body.
const maxDepth = 128

// checkDepth fails when arrays and objects nest deeper than max. It skips
// strings with IndexByte, so it costs little on ordinary bodies.
func checkDepth(b []byte, max int) error {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			for {
				j := bytes.IndexByte(b[i+1:], '"')
				if j < 0 {
					return nil // unterminated string: the validator reports it
				}
				i += 1 + j
				n := 0
				for k := i - 1; b[k] == '\\'; k-- {
					n++
				}
				if n%2 == 0 {
					break
				}
			}
		case '[', '{':
			depth++
			if depth > max {
				return fmt.Errorf("arrays and objects nest deeper than %d levels at offset %d", max, i)
			}
		case ']', '}':
			depth--
		}
	}
	return nil
}

// duplicateKey returns the path of the first key that appears twice in one
// object anywhere in v: parsers disagree on which copy counts, so such
// input is refused rather than read one way here and another downstream.
func duplicateKey(v *fastjson.Value, keys *[][]byte) (path string, found bool) {
	switch v.Type() {
	case fastjson.TypeObject:
		o, _ := v.Object()
		start := len(*keys)
		var dup []byte
		o.Visit(func(k []byte, _ *fastjson.Value) {
			if dup != nil {
				return
			}
			for _, seen := range (*keys)[start:] {
				if bytes.Equal(seen, k) {
					dup = k
					return
				}
			}
			*keys = append(*keys, k)
		})
		*keys = (*keys)[:start]
		if dup != nil {
			return string(dup), true
		}
		o.Visit(func(k []byte, item *fastjson.Value) {
			if found {
				return
			}
			if p, ok := duplicateKey(item, keys); ok {
				path, found = joinPath(string(k), p), true
			}
		})
		return path, found
	case fastjson.TypeArray:
		a, _ := v.Array()
		for i, item := range a {
			if p, ok := duplicateKey(item, keys); ok {
				return joinPath("["+strconv.Itoa(i)+"]", p), true
			}
		}
	}
	return "", false
}

func joinPath(head, tail string) string {
	switch {
	case tail == "":
		return head
	case tail[0] == '[':
		return head + tail
	default:
		return head + "." + tail
	}
}
