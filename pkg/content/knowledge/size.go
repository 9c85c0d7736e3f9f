package knowledge

import "unsafe"

// Sizes the estimates count with (see search's).
const (
	stringHeader = int64(unsafe.Sizeof(""))
	mapEntry     = 24
)

// Bytes estimates the memory the base holds: its word indexes and
// suggestions as built, the lexicon lookups its indexes have cached
// since, and its content's vectors once they are built. It is cheap, for
// callers that keep many bases within a budget and ask often.
func (b *Base) Bytes() int64 {
	n := b.built + b.docs.RelatedBytes() + b.faqs.RelatedBytes() + b.intents.RelatedBytes()
	if b.sem != nil {
		n += b.sem.bytes.Load()
	}
	return n
}

// lexicalBytes walks what New built for words.
func (b *Base) lexicalBytes() int64 {
	n := int64(unsafe.Sizeof(*b)) + b.docs.Bytes() + b.faqs.Bytes() + b.intents.Bytes() + b.suggest.Bytes()
	for _, h := range b.docHeads {
		n += stringHeader + int64(len(h))
	}
	for id, f := range b.faqList {
		// The strings are the records', which the base keeps through them.
		n += mapEntry + stringHeader + int64(len(id)) + int64(unsafe.Sizeof(f)) + int64(len(f.Name)+len(f.Answer)+len(f.URL)+len(f.Created))
		for _, q := range f.Questions {
			n += stringHeader + int64(len(q))
		}
	}
	for k, g := range b.groupOf {
		n += mapEntry + int64(unsafe.Sizeof(k)) + int64(len(k[1])) + stringHeader + int64(len(g))
	}
	if b.sem != nil {
		n += int64(unsafe.Sizeof(*b.sem))
	}
	return n
}

// bytes is the memory the index holds: its vectors, what each stands
// for, and the arrays of one question ranking over them.
func (sem *semIndex) bytes() int64 {
	n := int64(unsafe.Sizeof(*sem)) + sem.vecs.Bytes()
	n += 4 * int64(cap(sem.docLead)+cap(sem.passageFrom)+cap(sem.passageVecs)+cap(sem.faqQuestion)+cap(sem.faqGroup)+cap(sem.groupAnswer))
	n += int64(cap(sem.passages)) * int64(unsafe.Sizeof(passage{}))
	// One question's scratch (see getScratch), kept for the next.
	n += 4*int64(sem.vecs.Len()) + 4*int64(sem.docTexts) + 16*int64(len(sem.docLead))
	return n
}
