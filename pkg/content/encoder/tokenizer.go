package encoder

import (
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

const (
	// separator replaces spaces and starts the text, as in SentencePiece.
	separator = '\u2581'
	// reservedPieces are the first vocabulary entries (unknown, <s>, </s>,
	// extras), which the reference never matches in text.
	reservedPieces = 6
	// unknownID is the id of a character no piece matches.
	unknownID = 0

	// maxSegment bounds the symbols between two separators that are
	// segmented at once. A longer run without a space (a blob, a very long
	// URL) is cut there; the reference would segment it whole, so only the
	// piece at each cut can differ. It bounds the tokenizer's memory.
	maxSegment = 8192

	// MaxRunes is how much of a text Embed reads: the first MaxRunes runes
	// (before normalization). Pieces are at most 16 characters long, so
	// these runes make at least 2048 tokens, far more than the 128 the
	// model reads, unless the text opens with runs of thousands of
	// characters the vocabulary lacks (each run is one unknown token). It
	// bounds the time and memory of embedding a huge or binary text.
	MaxRunes = 1 << 15
)

// tokenizer reproduces the reference tokenizer of the model: NFKC, "▁" for
// each space and in front of the text, a Viterbi segmentation over the
// vocabulary's piece scores, and consecutive unknown pieces merged into
// one. It is case-sensitive.
type tokenizer struct {
	scores  []float64 // per piece id; JSON null counts as 0, as in the reference
	len16   []int32   // per piece id: UTF-16 length, which the reference steps back by
	trie    trie
	maxLen  int  // longest piece, in runes
	segment bool // no piece has "▁" after its first rune: each "▁" starts a token
}

// trie maps pieces to ids; nodes are numbered from 0 (the root).
type trie struct {
	id    []int32 // piece id ending at the node, or -1
	keys  []uint64
	child []int32
	mask  uint64
}

func (t *trie) slot(key uint64) uint64 {
	return (key * 0x9E3779B97F4A7C15) >> 20 & t.mask
}

// next returns the child of node by r, or -1.
func (t *trie) next(node int32, r rune) int32 {
	key := uint64(node)<<32 | uint64(uint32(r)) | 1<<63
	for i := t.slot(key); ; i = (i + 1) & t.mask {
		k := t.keys[i]
		if k == key {
			return t.child[i]
		}
		if k == 0 {
			return -1
		}
	}
}

func (t *trie) insert(node int32, r rune) int32 {
	key := uint64(node)<<32 | uint64(uint32(r)) | 1<<63
	i := t.slot(key)
	for ; t.keys[i] != 0; i = (i + 1) & t.mask {
		if t.keys[i] == key {
			return t.child[i]
		}
	}
	n := int32(len(t.id))
	t.id = append(t.id, -1)
	t.keys[i] = key
	t.child[i] = n
	return n
}

// newTokenizer builds the tokenizer of a vocabulary of pieces and scores.
func newTokenizer(pieces []string, scores []float64) (*tokenizer, error) {
	if len(pieces) <= reservedPieces {
		return nil, fmt.Errorf("vocabulary has %d pieces, want more than %d", len(pieces), reservedPieces)
	}
	tk := &tokenizer{scores: scores, len16: make([]int32, len(pieces)), segment: true}
	runes := 0
	for i, p := range pieces {
		if !utf8.ValidString(p) {
			return nil, fmt.Errorf("vocabulary piece %d is not valid UTF-8", i)
		}
		n := 0
		for j, r := range p {
			n++
			tk.len16[i] += int32(utf16.RuneLen(r))
			if r == separator && j > 0 && i >= reservedPieces {
				tk.segment = false
			}
		}
		tk.maxLen = max(tk.maxLen, n)
		runes += n
	}
	size := 1
	for size < 2*runes+2 {
		size *= 2
	}
	tk.trie = trie{id: []int32{-1}, keys: make([]uint64, size), child: make([]int32, size), mask: uint64(size - 1)}
	// As in the reference, a later duplicate of a piece replaces the earlier.
	for i := reservedPieces; i < len(pieces); i++ {
		if pieces[i] == "" {
			continue
		}
		node := int32(0)
		for _, r := range pieces[i] {
			node = tk.trie.insert(node, r)
		}
		tk.trie.id[node] = int32(i)
	}
	return tk, nil
}

// tokState is the scratch space of one tokenization.
type tokState struct {
	it    norm.Iter // here rather than on the stack, where it would escape
	sym   []rune
	best  []float64
	words []int32
	rev   []int32
	ids   []int32
	count int
	last  int32 // last token, to merge unknown runs across segments
	carry float64
	limit int  // stop once this many tokens are out; < 0: count only
	keep  bool // store ids
	done  bool
}

func newTokState() *tokState {
	return &tokState{
		sym:   make([]rune, 0, maxSegment),
		best:  make([]float64, maxSegment+1),
		words: make([]int32, maxSegment+1),
		rev:   make([]int32, 0, maxSegment),
		ids:   make([]int32, 0, 256),
	}
}

// encode tokenizes text into st.ids, keeping at most limit ids, and reads
// at most maxRunes runes of text (maxRunes < 0: all).
func (tk *tokenizer) encode(st *tokState, text string, limit, maxRunes int) []int32 {
	st.ids = st.ids[:0]
	tk.run(st, text, limit, maxRunes, true)
	return st.ids
}

// count returns how many tokens text makes, reading all of it.
func (tk *tokenizer) count(st *tokState, text string) int {
	tk.run(st, text, -1, -1, false)
	return st.count
}

func (tk *tokenizer) run(st *tokState, text string, limit, maxRunes int, keep bool) {
	st.sym = st.sym[:0]
	st.count = 0
	st.last = -1
	st.carry = 0
	st.limit = limit
	st.keep = keep
	st.done = limit == 0
	if maxRunes >= 0 && len(text) > maxRunes {
		n := 0
		for i := range text {
			if n == maxRunes {
				text = text[:i]
				break
			}
			n++
		}
	}
	if !utf8.ValidString(text) {
		// Each run of bad bytes becomes one U+FFFD, an unknown character as
		// in the reference, which decodes bad bytes to U+FFFD.
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	it := &st.it
	it.InitString(norm.NFKC, text)
	first := true
	for !it.Done() && !st.done {
		seg := it.Next()
		for len(seg) > 0 {
			r, size := utf8.DecodeRune(seg)
			seg = seg[size:]
			if first {
				st.sym = append(st.sym, separator)
				first = false
			}
			if r == ' ' {
				r = separator
			}
			if (r == separator && tk.segment && len(st.sym) > 0) || len(st.sym) == maxSegment {
				tk.flush(st)
				if st.done {
					break
				}
			}
			st.sym = append(st.sym, r)
		}
	}
	if !st.done && len(st.sym) > 0 {
		tk.flush(st)
	}
	if keep && limit >= 0 && len(st.ids) > limit {
		st.ids = st.ids[:limit]
	}
}

// flush segments the symbols in st.sym, which start at a token boundary,
// and emits their tokens. It follows the reference step for step
// (including its ties and its treatment of a best score of exactly 0 as
// unset) so that the ids are the same.
func (tk *tokenizer) flush(st *tokState) {
	sym := st.sym
	n := len(sym)
	best := st.best[:n+1]
	words := st.words[:n+1]
	clear(best)
	clear(words)
	best[0] = st.carry
	t := &tk.trie
	for i := 0; i < n; i++ {
		base := best[i]
		matched := false
		node := int32(0)
		for j := i; j < n; j++ {
			node = t.next(node, sym[j])
			if node < 0 {
				break
			}
			if id := t.id[node]; id >= 0 {
				matched = true
				end := j + 1
				if s := tk.scores[id] + base; best[end] == 0 || s >= best[end] {
					best[end] = s
					words[end] = id
				}
			}
		}
		if !matched {
			if s := base; best[i+1] == 0 || s >= best[i+1] {
				best[i+1] = s
				words[i+1] = unknownID
			}
		}
	}
	st.carry = best[n]
	rev := st.rev[:0]
	for it := n; it > 0; it -= int(tk.len16[words[it]]) {
		rev = append(rev, words[it])
	}
	st.rev = rev
	for i := len(rev) - 1; i >= 0; i-- {
		id := rev[i]
		if id == unknownID && st.last == unknownID {
			continue
		}
		st.last = id
		st.count++
		if st.keep {
			st.ids = append(st.ids, id)
		}
		if st.limit >= 0 && st.count >= st.limit {
			st.done = true
		}
	}
	st.sym = st.sym[:0]
}
