package search

import "unsafe"

// Sizes the estimates below count with: a string or slice header, and
// what a map spends on an entry beyond its key and value (its control
// bytes, load factor and buckets, averaged).
const (
	stringHeader = int64(unsafe.Sizeof(""))
	sliceHeader  = int64(unsafe.Sizeof([]byte(nil)))
	mapEntry     = 24
	// relatedEntry is a cached lexicon lookup: the word, its few
	// expansions and the sync.Map's entry.
	relatedEntry = 160
)

func stringBytes(s string) int64 { return stringHeader + int64(len(s)) }

// Bytes estimates the memory the index holds: what its build allocated
// and the lexicon lookups it has cached since, which grow as it is
// searched (up to a bound). It walks the index, so callers keep the
// figure rather than ask for it on every use.
func (ix *Index) Bytes() int64 {
	if ix == nil {
		return 0
	}
	n := int64(unsafe.Sizeof(*ix))
	for i := range ix.docs {
		d := &ix.docs[i]
		n += stringBytes(d.ID) + stringBytes(d.Title) + stringBytes(d.Body) + stringBytes(d.URI) + stringBytes(d.Location) + stringBytes(d.Group)
	}
	n += int64(len(ix.titleLen))*2 + int64(len(ix.bodyLen))*4 + int64(len(ix.groupOf))*4
	for t, ps := range ix.postings {
		n += mapEntry + stringBytes(t) + sliceHeader + int64(cap(ps))*int64(unsafe.Sizeof(posting{}))
	}
	n += int64(len(ix.maxW)) * (mapEntry + stringHeader + 4) // keys shared with postings
	if ix.stems != nil {
		for w, t := range ix.stems.m {
			n += mapEntry + stringBytes(w) + stringBytes(t)
		}
	}
	n += int64(cap(ix.words)) * int64(unsafe.Sizeof(wordStem{}))
	n += int64(len(ix.typos)) * (mapEntry + 8 + 4)
	for _, more := range ix.typosMore {
		n += mapEntry + 8 + sliceHeader + int64(cap(more))*4
	}
	for t, syn := range ix.synonyms {
		n += mapEntry + stringBytes(t) + sliceHeader + int64(cap(syn))*stringHeader
	}
	n += int64(len(ix.termIDs))*(mapEntry+stringHeader+4) + int64(cap(ix.termText))*stringHeader
	for i := range ix.bodySpans {
		n += sliceHeader + int64(cap(ix.bodySpans[i]))*int64(unsafe.Sizeof(tokSpan{}))
	}
	for i := range ix.titleSpans {
		n += sliceHeader + int64(cap(ix.titleSpans[i]))*int64(unsafe.Sizeof(tokSpan{}))
	}
	for i := range ix.paras {
		n += sliceHeader + int64(cap(ix.paras[i]))*int64(unsafe.Sizeof(chunk{})) // texts share the bodies
	}
	return n + ix.RelatedBytes()
}

// RelatedBytes estimates the memory of the lexicon lookups the index has
// cached as it was searched; it is cheap, unlike Bytes.
func (ix *Index) RelatedBytes() int64 {
	if ix == nil {
		return 0
	}
	return ix.relatedCached.Load() * relatedEntry
}

// Bytes estimates the memory the suggester holds.
func (s *Suggester) Bytes() int64 {
	if s == nil {
		return 0
	}
	n := int64(unsafe.Sizeof(*s))
	for i := range s.cands {
		c := &s.cands[i]
		n += int64(unsafe.Sizeof(*c)) + int64(len(c.Text)) + int64(len(c.Answer))
	}
	for i := range s.folds {
		f := &s.folds[i]
		n += int64(unsafe.Sizeof(*f)) + int64(cap(f.runes))*4 + int64(cap(f.at))*8 + int64(cap(f.starts))*4
	}
	for k, es := range s.byKind {
		// Entries' texts are slices of the folds'.
		n += mapEntry + stringBytes(k) + sliceHeader + int64(cap(es))*int64(unsafe.Sizeof(entry{}))
	}
	return n
}
