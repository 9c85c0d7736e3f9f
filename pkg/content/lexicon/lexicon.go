// Package lexicon supplies words related to a query word (synonyms, similar
// adjectives, derivations, and the nearest broader and narrower terms), with
// weights, for query expansion in full-text search.
//
// The data is Princeton University's WordNet 3.0, used under the WordNet 3.0
// licence. It is not shipped with this package: it is read at run time from
// the database installed by the distribution (Debian's wordnet-base puts it
// in DefaultDir).
package lexicon

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// DefaultDir is where Debian's wordnet-base installs the database.
const DefaultDir = "/usr/share/wordnet"

// MaxRelated bounds the number of words one Related call yields, so the
// expanded query stays small whatever the word.
const MaxRelated = 24

// Parts of speech, as indexes into per-POS arrays. Adjective satellites
// ("s") share the adjective index and are stored as posAdj.
const (
	posNoun = iota
	posVerb
	posAdj
	posAdv
	numPOS
)

// posName is the file name part for a POS.
func posName(pos int) string {
	return [numPOS]string{"noun", "verb", "adj", "adv"}[pos]
}

// Pointer symbols kept from the data files; all others are dropped at load.
const (
	ptrHypernym = iota + 1 // @ and @i
	ptrHyponym             // ~ and ~i
	ptrSimilar             // &
	ptrDerived             // +
)

// Weights. A sense's weight falls with its rank in the index (senses are
// listed most frequent first); relations are scaled below synonyms because
// they drift further from the typed word's meaning.
const (
	// minSenses senses are always considered; beyond that only senses with
	// tagged corpus counts, up to maxSenses. Rare senses are mostly noise
	// for search ("nick" = mate, of livestock), so they stay out.
	minSenses = 3
	maxSenses = 5
	// untaggedScale lowers senses never seen in the tagged corpus when the
	// lemma does have tagged senses: they are known to be rare.
	untaggedScale = 0.6
	similarScale  = 0.6  // adjective "similar to"
	derivedScale  = 0.5  // derivationally related form of the same lemma
	hyponymScale  = 0.3  // narrower terms of the first sense
	hypernymScale = 0.25 // broader term of the first sense: least specific
	// maxCandidates bounds the work per call; candidates are gathered in
	// order of falling weight class, so the ones cut off are the weakest.
	maxCandidates = 96
)

// span is a range of a shared slice.
type span struct {
	off uint32
	n   uint16
	// tagged is the number of leading senses with tagged corpus counts
	// (index files only).
	tagged uint16
}

type synset struct {
	words span // into WordNet.synWords
	ptrs  span // into WordNet.ptrs
	pos   uint8
}

type pointer struct {
	target uint32 // synset index (a data file offset until resolved)
	sym    uint8
	pos    uint8 // target POS
	src    uint8 // 1-based word number in the source synset, 0 = whole synset
	dst    uint8 // 1-based word number in the target synset, 0 = whole synset
}

// WordNet is a loaded WordNet database, immutable after Load, safe for
// concurrent use.
type WordNet struct {
	// ids interns every word form (lemmas and inflected forms), keyed and
	// named with spaces for underscores, lower case, markers stripped.
	ids   map[string]uint32
	names []string
	// senses[id][pos] is the span of senseSyn holding the synsets of
	// lemma id in that POS, most frequent sense first.
	senses   [][numPOS]span
	senseSyn []uint32
	synsets  []synset
	synWords []uint32
	ptrs     []pointer
	// base maps an inflected form to its lemmas (the exception lists);
	// infl is the reverse, lemma to irregular inflected forms.
	base  [numPOS]map[uint32][]uint32
	infl  [numPOS]map[uint32][]uint32
	rules [numPOS][]rule
}

// Load reads the WordNet database in dir (Debian: /usr/share/wordnet).
func Load(dir string) (*WordNet, error) {
	w := &WordNet{ids: make(map[string]uint32, 160000), rules: detachRules()}
	// Offsets of each POS's synsets in file order, to turn pointer and
	// index offsets into synset indexes; dropped after Load.
	var offsets [numPOS][]uint32
	var firstSyn [numPOS]uint32
	for pos := range numPOS {
		name := "data." + posName(int(pos))
		data, err := readFile(dir, name)
		if err != nil {
			return nil, err
		}
		firstSyn[pos] = uint32(len(w.synsets))
		if offsets[pos], err = w.parseData(name, data, pos); err != nil {
			return nil, err
		}
	}
	// Resolve pointer targets now that every synset is known.
	for si := range w.synsets {
		s := &w.synsets[si]
		for pi := s.ptrs.off; pi < s.ptrs.off+uint32(s.ptrs.n); pi++ {
			p := &w.ptrs[pi]
			idx, ok := find(offsets[p.pos], p.target)
			if !ok {
				return nil, fmt.Errorf("lexicon: data.%s: a synset points to missing %s synset %08d",
					posName(int(s.pos)), posName(int(p.pos)), p.target)
			}
			p.target = firstSyn[p.pos] + idx
		}
	}
	for pos := range numPOS {
		name := "index." + posName(int(pos))
		data, err := readFile(dir, name)
		if err != nil {
			return nil, err
		}
		if err := w.parseIndex(name, data, pos, offsets[pos], firstSyn[pos]); err != nil {
			return nil, err
		}
	}
	for pos := range numPOS {
		name := posName(int(pos)) + ".exc"
		data, err := readFile(dir, name)
		if err != nil {
			return nil, err
		}
		if err := w.parseExceptions(name, data, pos); err != nil {
			return nil, err
		}
	}
	// Trim the growth slack of append: the database lives for the process.
	w.names = append([]string(nil), w.names...)
	w.senses = append([][numPOS]span(nil), w.senses...)
	w.senseSyn = append([]uint32(nil), w.senseSyn...)
	w.synsets = append([]synset(nil), w.synsets...)
	w.synWords = append([]uint32(nil), w.synWords...)
	w.ptrs = append([]pointer(nil), w.ptrs...)
	return w, nil
}

func readFile(dir, name string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("lexicon: reading WordNet %s: %w", name, err)
	}
	return data, nil
}

// find returns the index of off in the sorted offsets.
func find(offsets []uint32, off uint32) (uint32, bool) {
	i := sort.Search(len(offsets), func(i int) bool { return offsets[i] >= off })
	if i < len(offsets) && offsets[i] == off {
		return uint32(i), true
	}
	return 0, false
}

// lines calls fn with each line of data and its 1-based number, skipping
// the licence header (lines starting with two spaces) and blank lines.
func lines(name string, data []byte, fn func(line []byte, n int) error) error {
	n := 0
	for len(data) > 0 {
		n++
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		line = bytes.TrimRight(line, " \r")
		if len(line) == 0 || bytes.HasPrefix(line, []byte("  ")) {
			continue
		}
		if err := fn(line, n); err != nil {
			return fmt.Errorf("lexicon: WordNet %s line %d: %w", name, n, err)
		}
	}
	return nil
}

// fields splits a line on spaces without allocating.
type fields struct {
	rest []byte
}

func (f *fields) next() ([]byte, bool) {
	for len(f.rest) > 0 && f.rest[0] == ' ' {
		f.rest = f.rest[1:]
	}
	if len(f.rest) == 0 {
		return nil, false
	}
	i := bytes.IndexByte(f.rest, ' ')
	if i < 0 {
		i = len(f.rest)
	}
	tok := f.rest[:i]
	f.rest = f.rest[i:]
	return tok, true
}

func (f *fields) number(what string, base int) (uint32, error) {
	tok, ok := f.next()
	if !ok {
		return 0, fmt.Errorf("missing %s", what)
	}
	var v uint64
	for _, c := range tok {
		d := digit(c)
		if d < 0 || d >= base {
			return 0, fmt.Errorf("bad %s %q", what, tok)
		}
		v = v*uint64(base) + uint64(d)
		if v > 1<<32-1 {
			return 0, fmt.Errorf("bad %s %q", what, tok)
		}
	}
	return uint32(v), nil
}

func (f *fields) word(what string) ([]byte, error) {
	tok, ok := f.next()
	if !ok {
		return nil, fmt.Errorf("missing %s", what)
	}
	return tok, nil
}

func digit(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

func posOf(tok []byte) (int, bool) {
	if len(tok) == 1 {
		switch tok[0] {
		case 'n':
			return posNoun, true
		case 'v':
			return posVerb, true
		case 'a', 's':
			return posAdj, true
		case 'r':
			return posAdv, true
		}
	}
	return 0, false
}

// intern returns the id of a word as it appears in a file: underscores
// become spaces, adjective markers such as "(ip)" go, and it is lower cased.
func (w *WordNet) intern(raw []byte, scratch *[]byte) uint32 {
	if i := bytes.IndexByte(raw, '('); i > 0 && raw[len(raw)-1] == ')' {
		raw = raw[:i]
	}
	b := (*scratch)[:0]
	for _, c := range raw {
		switch {
		case c == '_':
			c = ' '
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	*scratch = b
	if id, ok := w.ids[string(b)]; ok {
		return id
	}
	s := string(b)
	id := uint32(len(w.names))
	w.ids[s] = id
	w.names = append(w.names, s)
	w.senses = append(w.senses, [numPOS]span{})
	return id
}

// parseData reads a data.* file: one synset a line,
// "offset lex_filenum ss_type w_cnt word lex_id ... p_cnt ptr... | gloss".
// It returns the synsets' file offsets in order.
func (w *WordNet) parseData(name string, data []byte, pos int) ([]uint32, error) {
	var offsets []uint32
	var scratch []byte
	err := lines(name, data, func(line []byte, _ int) error {
		if i := bytes.Index(line, []byte(" | ")); i >= 0 {
			line = line[:i] // the gloss
		}
		f := fields{rest: line}
		off, err := f.number("synset offset", 10)
		if err != nil {
			return err
		}
		if n := len(offsets); n > 0 && off <= offsets[n-1] {
			return fmt.Errorf("synset offset %08d out of order", off)
		}
		s, err := w.parseSynset(&f, pos, &scratch)
		if err != nil {
			return err
		}
		// Verb frames follow; they are not needed.
		offsets = append(offsets, off)
		w.synsets = append(w.synsets, s)
		return nil
	})
	return offsets, err
}

// parseSynset reads a synset of part of speech pos from f, past its
// offset: its words, interned into w, and the pointers w keeps.
func (w *WordNet) parseSynset(f *fields, pos int, scratch *[]byte) (synset, error) {
	if _, err := f.number("lex_filenum", 10); err != nil {
		return synset{}, err
	}
	tok, err := f.word("ss_type")
	if err != nil {
		return synset{}, err
	}
	if p, ok := posOf(tok); !ok || p != pos {
		return synset{}, fmt.Errorf("bad ss_type %q", tok)
	}
	wcnt, err := f.number("w_cnt", 16)
	if err != nil {
		return synset{}, err
	}
	if wcnt == 0 || wcnt > 255 {
		return synset{}, fmt.Errorf("bad w_cnt %d", wcnt)
	}
	s := synset{pos: uint8(pos), words: span{off: uint32(len(w.synWords)), n: uint16(wcnt)}}
	for range wcnt {
		word, err := f.word("word")
		if err != nil {
			return synset{}, err
		}
		if _, err := f.number("lex_id", 16); err != nil {
			return synset{}, err
		}
		w.synWords = append(w.synWords, w.intern(word, scratch))
	}
	pcnt, err := f.number("p_cnt", 10)
	if err != nil {
		return synset{}, err
	}
	s.ptrs.off = uint32(len(w.ptrs))
	for range pcnt {
		p, keep, err := parsePointer(f)
		if err != nil {
			return synset{}, err
		}
		if keep {
			w.ptrs = append(w.ptrs, p)
			s.ptrs.n++
		}
	}
	return s, nil
}

// parsePointer reads one pointer, "symbol offset pos source/target";
// keep is false for the kinds of pointer related words do not follow.
func parsePointer(f *fields) (p pointer, keep bool, err error) {
	sym, err := f.word("pointer symbol")
	if err != nil {
		return pointer{}, false, err
	}
	target, err := f.number("pointer offset", 10)
	if err != nil {
		return pointer{}, false, err
	}
	tok, err := f.word("pointer pos")
	if err != nil {
		return pointer{}, false, err
	}
	tpos, ok := posOf(tok)
	if !ok {
		return pointer{}, false, fmt.Errorf("bad pointer pos %q", tok)
	}
	st, err := f.number("pointer source/target", 16)
	if err != nil {
		return pointer{}, false, err
	}
	if st > 0xffff {
		return pointer{}, false, fmt.Errorf("bad pointer source/target %04x", st)
	}
	var kind uint8
	switch string(sym) {
	case "@", "@i":
		kind = ptrHypernym
	case "~", "~i":
		kind = ptrHyponym
	case "&":
		kind = ptrSimilar
	case "+":
		kind = ptrDerived
	default:
		return pointer{}, false, nil
	}
	return pointer{target: target, sym: kind, pos: uint8(tpos), src: uint8(st >> 8), dst: uint8(st)}, true, nil
}

// parseIndex reads an index.* file: one lemma a line, "lemma pos
// synset_cnt p_cnt [ptr_symbol...] sense_cnt tagsense_cnt offset...",
// offsets most frequent sense first.
func (w *WordNet) parseIndex(name string, data []byte, pos int, offsets []uint32, first uint32) error {
	var scratch []byte
	return lines(name, data, func(line []byte, _ int) error {
		f := fields{rest: line}
		lemma, err := f.word("lemma")
		if err != nil {
			return err
		}
		tok, err := f.word("pos")
		if err != nil {
			return err
		}
		if p, ok := posOf(tok); !ok || p != pos {
			return fmt.Errorf("bad pos %q", tok)
		}
		cnt, err := f.number("synset_cnt", 10)
		if err != nil {
			return err
		}
		pcnt, err := f.number("p_cnt", 10)
		if err != nil {
			return err
		}
		for range pcnt {
			if _, err := f.word("pointer symbol"); err != nil {
				return err
			}
		}
		if _, err := f.number("sense_cnt", 10); err != nil {
			return err
		}
		tagged, err := f.number("tagsense_cnt", 10)
		if err != nil {
			return err
		}
		if cnt == 0 || cnt > 0xffff {
			return fmt.Errorf("bad synset_cnt %d", cnt)
		}
		id := w.intern(lemma, &scratch)
		sp := span{off: uint32(len(w.senseSyn)), n: uint16(cnt), tagged: uint16(min(tagged, cnt))}
		for range cnt {
			off, err := f.number("synset offset", 10)
			if err != nil {
				return err
			}
			idx, ok := find(offsets, off)
			if !ok {
				return fmt.Errorf("synset %08d not in data.%s", off, posName(int(pos)))
			}
			w.senseSyn = append(w.senseSyn, first+idx)
		}
		if extra, ok := f.next(); ok {
			return fmt.Errorf("unexpected %q after %d synset offsets", extra, cnt)
		}
		w.senses[id][pos] = sp
		return nil
	})
}

// parseExceptions reads a *.exc file: "inflected lemma [lemma...]".
func (w *WordNet) parseExceptions(name string, data []byte, pos int) error {
	var scratch []byte
	w.base[pos] = make(map[uint32][]uint32)
	w.infl[pos] = make(map[uint32][]uint32)
	return lines(name, data, func(line []byte, _ int) error {
		f := fields{rest: line}
		form, err := f.word("inflected form")
		if err != nil {
			return err
		}
		id := w.intern(form, &scratch)
		n := 0
		for {
			tok, ok := f.next()
			if !ok {
				break
			}
			n++
			b := w.intern(tok, &scratch)
			if b == id {
				continue // "anus anus": the form is also its own lemma
			}
			w.base[pos][id] = append(w.base[pos][id], b)
			w.infl[pos][b] = append(w.infl[pos][b], id)
		}
		if n == 0 {
			return fmt.Errorf("exception %q has no lemma", form)
		}
		return nil
	})
}
