package jsonscan

// Index records where each array and object of one document ends, and
// where each of its members or elements starts and ends, as the scanner
// found them, so that a walk neither reads a container again at every
// level it is nested in nor looks for the ends of keys and values. The
// zero Index is empty and ready for Check or ScanLayout, which fill it;
// reuse one to reuse its storage.
type Index struct {
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

func (x *Index) reset(doc []byte) {
	x.doc, x.conts, x.elems, x.next = doc, x.conts[:0], x.elems[:0], 0
}

// maxPooledElems bounds the record a pooled Index keeps: that of a
// document of a few MiB.
const maxPooledElems = 100_000

// Trim forgets the document and drops a record too large to keep, before
// the Index goes back to a pool.
func (x *Index) Trim() {
	x.doc = nil
	if cap(x.elems) > maxPooledElems {
		x.conts, x.elems = nil, nil
	}
}

// Complete reports whether the record of a document that passed the scan
// holds every container with all its children. The record is bounded (see
// Check); past the bound, walks read the document byte by byte.
func (x *Index) Complete() bool {
	// The root container is open when the record fills up, so it closes
	// without its children all recorded.
	return len(x.conts) == 0 || x.conts[0].after >= 0
}

// find returns the index of the container at b[i], where b is a part of
// the recorded document, and b's offset in the document; k is -1 when the
// container was not recorded.
func (x *Index) find(b []byte, i int) (k, base int) {
	if x == nil || x.doc == nil || i >= len(b) {
		return -1, 0
	}
	// b shares the document's array, so capacities give its offset.
	base = cap(x.doc) - cap(b)
	if base < 0 || base+i >= len(x.doc) || &x.doc[base+i] != &b[i] {
		return -1, 0
	}
	at := int32(base + i)
	// The walk mostly moves forward through the document, so look just
	// past the previous hit before searching.
	for k := x.next; k < len(x.conts) && k < x.next+8 && x.conts[k].open <= at; k++ {
		if x.conts[k].open == at {
			x.next = k + 1
			return k, base
		}
	}
	lo, hi := 0, len(x.conts)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if x.conts[mid].open < at {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(x.conts) && x.conts[lo].open == at {
		x.next = lo + 1
		return lo, base
	}
	return -1, 0
}

// end returns the index just past the container at b[i], where b is a
// part of the recorded document, or -1 when it was not recorded.
func (x *Index) end(b []byte, i int) int {
	k, base := x.find(b, i)
	if k < 0 {
		return -1
	}
	return int(x.conts[k].close) - base
}
