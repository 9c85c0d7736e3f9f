package knowledge

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// TokenCounter is what an embedder can tell of its model's input: how
// many tokens a text takes and how many the model reads (its window).
// Texts past the window are cut by the model, so a document longer than
// it is embedded in passages that each fit. Tokens is called from several
// goroutines at once.
type TokenCounter interface {
	Tokens(text string) int
	Window() int
}

// defaultWindow is the window assumed of a model that does not tell its
// own: the smallest of the common sentence encoders', so that passages
// fit whichever model it is.
const defaultWindow = 128

// wordTokens is the conservative estimate of the tokens of a text when
// the embedder cannot count them: two per word and one more per character
// that is neither a letter nor white space (digits, punctuation), which
// sub-word tokenizers split off or spell out piece by piece. On the
// evaluation corpus it counts half as many again as the Universal
// Sentence Encoder's tokenizer on average, and every passage it cuts at
// 128 fits that model's window of 128 (a few short sentences it counts
// low; across a passage that evens out).
func wordTokens(text string) int {
	n := 0
	inWord := false
	for _, r := range text {
		switch {
		case unicode.IsLetter(r) || unicode.IsMark(r):
			if !inWord {
				n += 2
			}
			inWord = true
		case unicode.IsSpace(r):
			inWord = false
		default:
			n++
			inWord = false
		}
	}
	return n
}

// wordCounter is the TokenCounter of an embedder that has none.
type wordCounter struct{}

func (wordCounter) Tokens(text string) int { return wordTokens(text) }
func (wordCounter) Window() int            { return defaultWindow }

// span is a stretch of a text, in bytes.
type span struct{ start, end int }

// splitPassages cuts body into passages of at most budget tokens as
// counted by count: consecutive paragraphs (split at blank lines) are
// joined while they fit, a paragraph over the budget is cut at sentence
// ends, and a sentence over it at word boundaries (at the budget itself
// when one word is over it). Passages are stretches of body, in order,
// trimmed of white space; the same body gives the same passages.
func splitPassages(body string, count func(string) int, budget int) []span {
	budget = max(budget, 1)
	var out []span
	var cur span // the passage being filled; empty when cur.end == cur.start
	flush := func() {
		if cur.end > cur.start {
			out = append(out, cur)
		}
		cur = span{}
	}
	for _, p := range paragraphSpans(body) {
		if cur.end > cur.start && count(body[cur.start:p.end]) <= budget {
			cur.end = p.end
			continue
		}
		flush()
		if count(body[p.start:p.end]) <= budget {
			cur = p
			continue
		}
		out = append(out, fitPieces(body, p, count, budget)...)
	}
	flush()
	return out
}

// paragraphSpans are body's paragraphs (split at blank lines), trimmed,
// without the empty ones.
func paragraphSpans(body string) []span {
	var out []span
	for i := 0; i < len(body); {
		j := strings.Index(body[i:], "\n\n")
		end := len(body)
		if j >= 0 {
			end = i + j
		}
		if s := trimSpan(body, span{i, end}); s.end > s.start {
			out = append(out, s)
		}
		if j < 0 {
			break
		}
		i = end + 2
	}
	return out
}

// trimSpan trims white space off both ends of s.
func trimSpan(text string, s span) span {
	for s.start < s.end {
		r, n := utf8.DecodeRuneInString(text[s.start:s.end])
		if !unicode.IsSpace(r) {
			break
		}
		s.start += n
	}
	for s.end > s.start {
		r, n := utf8.DecodeLastRuneInString(text[s.start:s.end])
		if !unicode.IsSpace(r) {
			break
		}
		s.end -= n
	}
	return s
}

// fitPieces cuts p (over the budget) into pieces within it: whole
// sentences joined while they fit, and sentences over the budget cut at
// word boundaries.
func fitPieces(text string, p span, count func(string) int, budget int) []span {
	var out []span
	var cur span
	for _, s := range sentenceSpans(text, p) {
		if cur.end > cur.start && count(text[cur.start:s.end]) <= budget {
			cur.end = s.end
			continue
		}
		if cur.end > cur.start {
			out = append(out, cur)
			cur = span{}
		}
		if count(text[s.start:s.end]) <= budget {
			cur = s
			continue
		}
		out = append(out, wordPieces(text, s, count, budget)...)
	}
	if cur.end > cur.start {
		out = append(out, cur)
	}
	return out
}

// sentenceSpans splits p after '.', '!' or '?' followed by white space.
func sentenceSpans(text string, p span) []span {
	var out []span
	start := p.start
	for i := p.start; i < p.end-1; i++ {
		if c := text[i]; (c == '.' || c == '!' || c == '?') && (text[i+1] == ' ' || text[i+1] == '\n' || text[i+1] == '\t') {
			if s := trimSpan(text, span{start, i + 1}); s.end > s.start {
				out = append(out, s)
			}
			start = i + 1
		}
	}
	if s := trimSpan(text, span{start, p.end}); s.end > s.start {
		out = append(out, s)
	}
	return out
}

// wordPieces cuts s into pieces within the budget at white space, and a
// word over the budget at the rune where it goes over.
func wordPieces(text string, s span, count func(string) int, budget int) []span {
	var out []span
	cur := span{s.start, s.start}
	for _, w := range wordSpans(text, s) {
		if cur.end > cur.start && count(text[cur.start:w.end]) <= budget {
			cur.end = w.end
			continue
		}
		if cur.end > cur.start {
			out = append(out, cur)
		}
		cur = w
		for count(text[cur.start:cur.end]) > budget {
			cut := runeCut(text, cur, count, budget)
			out = append(out, span{cur.start, cut})
			cur.start = cut
		}
	}
	if cur.end > cur.start {
		out = append(out, cur)
	}
	return out
}

// wordSpans are the stretches of s between white space.
func wordSpans(text string, s span) []span {
	var out []span
	start := -1
	for i, r := range text[s.start:s.end] {
		i += s.start
		if unicode.IsSpace(r) {
			if start >= 0 {
				out = append(out, span{start, i})
				start = -1
			}
		} else if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		out = append(out, span{start, s.end})
	}
	return out
}

// runeCut is where w (a word over the budget) is cut: after the most
// runes, at least one, that fit. Found by halving, as counting is not
// free.
func runeCut(text string, w span, count func(string) int, budget int) int {
	var ends []int // ends[k] is where the first k+1 runes end
	for i := range text[w.start:w.end] {
		if i > 0 {
			ends = append(ends, w.start+i)
		}
	}
	ends = append(ends, w.end)
	k, _ := slices.BinarySearchFunc(ends, budget, func(end, budget int) int {
		if count(text[w.start:end]) <= budget {
			return -1
		}
		return 1
	})
	// ends[k] is the first end that does not fit.
	return ends[max(k-1, 0)]
}
