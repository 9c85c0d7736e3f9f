package ingest

import (
	"bytes"
	"errors"
	"io"
)

// errTooManyEvents: the body holds more events than a batch may.
var errTooManyEvents = errors.New("the batch holds more events than allowed")

// MemoryPerEvent is what an event costs until its answer besides its body
// bytes (which MemoryPerBodyByte counts): its record's envelope, its
// place in the validator's index and in the produce request, about half a
// kilobyte however small the event. A batch of many tiny events is
// charged for them, so that 100,000 events in a few kilobytes of gzip
// cannot hold hundreds of megabytes.
const MemoryPerEvent = 512

// eventCounter counts the events of a batch as its body is read: the
// elements of the arrays of the root object's "events" keys. It needs no
// memory and one pass, so that a batch of too many events is refused
// before the validator indexes it or builds a record, and each event is
// charged before its record exists. It is exact for the JSON the validator
// accepts; for other bodies, which the validator refuses, it is only an
// estimate. A key written with escapes is taken for "events", so that
// the count is never less than the validator's.
type eventCounter struct {
	events   int
	depth    int  // containers open
	inString bool // within a string
	escape   bool // the byte before was a backslash in a string
	// Root keys: keyNext is set where the next string is a key of the
	// root object; inKey while one is read, keyAt the bytes of "events"
	// it matched so far (-1: not events), keyEscaped if it holds an
	// escape; isEvents when the last key was events.
	keyNext, inKey, keyEscaped, isEvents bool
	keyAt                                int
	// inEvents while the events array is open; element when its next
	// value starts an element.
	inEvents, element bool
	// rooted once the root object has opened; dead once the body is seen
	// not to be one JSON object (it starts otherwise, or goes on after
	// it): the validator refuses it whatever it holds, so the rest is not
	// read byte by byte (a gzip bomb of zeros would be, megabytes of it).
	rooted, dead bool
}

const eventsKey = "events"

// count reads p and returns the events that start in it.
func (c *eventCounter) count(p []byte) int {
	before := c.events
	for i := 0; i < len(p) && !c.dead; i++ {
		b := p[i]
		if c.inString {
			if !c.inKey && !c.escape {
				// The bulk of a body: skip to the next quote or backslash.
				i += nextQuoteOrBackslash(p[i:])
				if i == len(p) {
					break
				}
				b = p[i]
			}
			switch {
			case c.escape:
				c.escape = false
			case b == '\\':
				c.escape = true
				c.keyEscaped = c.inKey
			case b == '"':
				c.inString = false
				if c.inKey {
					c.inKey = false
					c.isEvents = c.keyEscaped || c.keyAt == len(eventsKey)
				}
			case c.inKey && c.keyAt >= 0 && c.keyAt < len(eventsKey) && b == eventsKey[c.keyAt]:
				c.keyAt++
			case c.inKey:
				c.keyAt = -1
			}
			continue
		}
		switch b {
		case ' ', '\t', '\n', '\r', ':':
			continue
		}
		if c.depth == 0 {
			if b != '{' || c.rooted {
				c.dead = true
				break
			}
			c.rooted = true
		}
		if c.inEvents && c.depth == 2 && c.element && b != ',' && b != ']' {
			c.events++
			c.element = false
		}
		switch b {
		case '"':
			c.inString = true
			if c.depth == 1 && c.keyNext {
				c.keyNext, c.inKey, c.keyAt, c.keyEscaped = false, true, 0, false
			}
		case '{', '[':
			c.depth++
			switch {
			case c.depth == 1:
				c.keyNext = b == '{'
			case c.depth == 2 && b == '[' && c.isEvents:
				c.inEvents, c.element = true, true
			}
			if c.depth == 2 {
				c.isEvents = false
			}
		case '}', ']':
			c.depth--
			if c.depth == 1 {
				c.inEvents = false
			}
		case ',':
			switch c.depth {
			case 1:
				c.keyNext, c.isEvents = true, false
			case 2:
				c.element = c.inEvents
			}
		}
	}
	return c.events - before
}

// nextQuoteOrBackslash is the index in p of its first '"' or '\\', or
// len(p): two searches for one byte each, which run in assembly.
func nextQuoteOrBackslash(p []byte) int {
	n := len(p)
	if i := bytes.IndexByte(p, '"'); i >= 0 {
		n = i
	}
	if i := bytes.IndexByte(p[:n], '\\'); i >= 0 {
		n = i
	}
	return n
}

// countingBody counts the events of a body as it is read, refuses it once
// it holds more than max, and charges MemoryPerEvent for each against the
// request's pass before the validator builds anything for it.
type countingBody struct {
	r       io.Reader
	pass    *Pass
	max     int
	counter eventCounter
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if k := c.counter.count(p[:n]); k > 0 {
		if c.counter.events > c.max {
			return n, errTooManyEvents
		}
		if herr := c.pass.Hold(int64(k) * MemoryPerEvent); herr != nil {
			return n, herr
		}
	}
	return n, err
}
