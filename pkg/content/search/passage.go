package search

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"strings"
	"unicode/utf16"
)

// Passage is a stretch of an item's body that answers a query.
type Passage struct {
	Result Result
	// Text is the passage; Start and End are where it stands in the body,
	// in UTF-16 code units.
	Text       string
	Start, End int
	// Sentence is the passage's best sentence, relative to the passage.
	Sentence   Span
	Score      float64
	Confidence float64
}

// maxPassageWords bounds a passage; longer paragraphs are cut at
// sentence ends.
const maxPassageWords = 80

// chunk is a piece of a body with its UTF-16 bounds.
type chunk struct {
	text         string
	ustart, uend int // UTF-16
}

// paragraphs splits a body at blank lines, and long paragraphs at
// sentence ends, keeping offsets.
func paragraphs(body string) []chunk {
	var out []chunk
	u := 0
	i := 0
	for i < len(body) {
		j := strings.Index(body[i:], "\n\n")
		end := len(body)
		if j >= 0 {
			end = i + j
		}
		para := body[i:end]
		for _, c := range splitLong(para) {
			lead := len(c) - len(strings.TrimLeft(c, " \n\t"))
			text := strings.TrimSpace(c)
			off := strings.Index(para, c)
			if text != "" && off >= 0 {
				ustart := u + utf16Len(para[:off+lead])
				out = append(out, chunk{text: text, ustart: ustart, uend: ustart + utf16Len(text)})
			}
		}
		u += utf16Len(body[i:end])
		i = end
		for i < len(body) && body[i] == '\n' {
			i++
			u++
		}
	}
	return out
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// sentences splits text after '.', '!' or '?' followed by a space.
func sentences(text string) []string {
	var out []string
	start := 0
	for i := 0; i < len(text)-1; i++ {
		if (text[i] == '.' || text[i] == '!' || text[i] == '?') && (text[i+1] == ' ' || text[i+1] == '\n') {
			out = append(out, text[start:i+1])
			start = i + 1
		}
	}
	return append(out, text[start:])
}

func splitLong(para string) []string {
	if len(strings.Fields(para)) <= maxPassageWords {
		return []string{para}
	}
	var out []string
	var cur strings.Builder
	words := 0
	for _, s := range sentences(para) {
		n := len(strings.Fields(s))
		if words > 0 && words+n > maxPassageWords {
			out = append(out, cur.String())
			cur.Reset()
			words = 0
		}
		cur.WriteString(s)
		words += n
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// Passages finds the best passages for q in the bodies of results, best
// first, at most limit.
func (ix *Index) Passages(q string, results []Result, limit int) []Passage {
	pq := parseQuery(q, ix.stems)
	var total float64
	for _, t := range pq.terms {
		total += ix.idf(t)
	}
	var out []Passage
	for _, r := range results {
		// Per matched term, by its place in r.terms: IDF and count.
		idf := make([]float64, len(r.terms))
		for i, id := range r.terms {
			idf[i] = ix.idf(ix.termText[id])
		}
		counts := make([]int, len(r.terms))
		mask := termMask(r.terms)
		for _, c := range ix.paras[r.Index] {
			spans := ix.spansIn(r.Index, c.ustart, c.uend)
			clear(counts)
			found := false
			for _, s := range spans {
				if mask&(1<<(s.term&63)) == 0 {
					continue
				}
				if i := slices.Index(r.terms, s.term); i >= 0 {
					counts[i]++
					found = true
				}
			}
			if !found {
				continue
			}
			var score, cover float64
			norm := 1 - bParam + bParam*float64(len(spans))/float64(maxPassageWords/2)
			for i, tf := range counts {
				if tf == 0 {
					continue
				}
				f := float64(tf) / norm
				score += idf[i] * f * (k1 + 1) / (f + k1)
				cover += idf[i]
			}
			conf := r.Confidence
			if total > 0 {
				conf = math.Min(r.Confidence, cover/total) // a passage holds at most what its item matched
			}
			score *= 0.5 + conf
			out = append(out, Passage{Result: r, Text: c.text, Start: c.ustart, End: c.uend, Score: score, Confidence: conf})
		}
	}
	slices.SortStableFunc(out, func(a, b Passage) int { return cmp.Compare(b.Score, a.Score) })
	out = out[:min(len(out), limit)]
	for i := range out {
		p := &out[i]
		p.Sentence = ix.bestSentence(p.Result, chunk{text: p.Text, ustart: p.Start, uend: p.End})
	}
	return out
}

// bestSentence is the sentence of the chunk holding the most of the terms
// r matched, relative to the chunk.
func (ix *Index) bestSentence(r Result, c chunk) Span {
	best, bestN := Span{0, c.uend - c.ustart}, -1
	mask := termMask(r.terms)
	u := 0
	for _, s := range sentences(c.text) {
		lead := utf16Len(s[:len(s)-len(strings.TrimLeft(s, " \n"))])
		l := utf16Len(s)
		var seen uint64 // by place in r.terms; the first 64 count
		for _, sp := range ix.spansIn(r.Index, c.ustart+u, c.ustart+u+l) {
			if mask&(1<<(sp.term&63)) == 0 {
				continue
			}
			if i := slices.Index(r.terms, sp.term); i >= 0 && i < 64 {
				seen |= 1 << i
			}
		}
		if n := bits.OnesCount64(seen); n > bestN {
			best, bestN = Span{u + lead, u + l}, n
		}
		u += l
	}
	return best
}
