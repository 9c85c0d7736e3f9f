package encoder

import (
	"cmp"
	"fmt"
	"slices"
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

// trie maps pieces to ids; nodes are numbered from 0 (the root). The
// root's children by runes below rootRunes (Latin scripts, punctuation
// and "▁") are an array, as every position of a text starts there; each
// other node's children are a run of edges sorted by rune, read in a
// cache line or two where a hash table would miss the cache.
type trie struct {
	id    []int32 // piece id ending at the node, or -1
	root  []int32 // child of the root by rune, or -1
	first []int32 // node's edges are first[node] to first[node+1]-1
	runes []rune  // of the edges
	child []int32 // of the edges
}

const rootRunes = 0x2600

// next returns the child of node by r, or -1.
func (t *trie) next(node int32, r rune) int32 {
	if node == 0 && r >= 0 && r < rootRunes {
		return t.root[r]
	}
	lo, hi := t.first[node], t.first[node+1]
	for hi-lo > 8 {
		mid := int32(uint32(lo+hi) >> 1)
		if t.runes[mid] < r {
			lo = mid + 1
		} else {
			hi = mid + 1 // mid may be r
		}
	}
	for ; lo < hi; lo++ {
		if t.runes[lo] == r {
			return t.child[lo]
		}
	}
	return -1
}

// newTrie builds the trie of pieces (pieces[i] has id i), skipping the
// reserved and empty ones.
func newTrie(pieces []string) trie {
	type edge struct {
		parent, child int32
		r             rune
	}
	var edges []edge
	t := trie{id: []int32{-1}, root: make([]int32, rootRunes)}
	children := map[[2]int32]int32{} // parent, rune → child
	for r := range t.root {
		t.root[r] = -1
	}
	// As in the reference, a later duplicate of a piece replaces the earlier.
	for i := reservedPieces; i < len(pieces); i++ {
		if pieces[i] == "" {
			continue
		}
		node := int32(0)
		for _, r := range pieces[i] {
			c, ok := children[[2]int32{node, r}]
			if !ok {
				c = int32(len(t.id))
				t.id = append(t.id, -1)
				children[[2]int32{node, r}] = c
				if node == 0 && r >= 0 && r < rootRunes {
					t.root[r] = c
				} else {
					edges = append(edges, edge{node, c, r})
				}
			}
			node = c
		}
		t.id[node] = int32(i)
	}
	slices.SortFunc(edges, func(a, b edge) int { return cmp.Or(cmp.Compare(a.parent, b.parent), cmp.Compare(a.r, b.r)) })
	t.first = make([]int32, len(t.id)+1)
	t.runes, t.child = make([]rune, len(edges)), make([]int32, len(edges))
	for i, e := range edges {
		t.first[e.parent+1]++
		t.runes[i], t.child[i] = e.r, e.child
	}
	for n := 1; n < len(t.first); n++ {
		t.first[n] += t.first[n-1]
	}
	return t
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
	tk.trie = newTrie(pieces)
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
