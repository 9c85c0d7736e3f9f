package search

import (
	"cmp"
	"math"
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
	pq := parseQuery(q)
	var total float64
	for _, t := range pq.terms {
		total += ix.idf(t)
	}
	var out []Passage
	for _, r := range results {
		ids := ix.termSet(r.Terms)
		idf := map[uint32]float64{}
		for t := range r.Terms {
			if id, ok := ix.termIDs[t]; ok {
				idf[id] = ix.idf(t)
			}
		}
		for _, c := range ix.paras[r.Index] {
			spans := ix.spansIn(r.Index, c.ustart, c.uend)
			counts := map[uint32]int{}
			for _, s := range spans {
				if ids[s.term] {
					counts[s.term]++
				}
			}
			if len(counts) == 0 {
				continue
			}
			var score, cover float64
			norm := 1 - bParam + bParam*float64(len(spans))/float64(maxPassageWords/2)
			for id, tf := range counts {
				f := float64(tf) / norm
				score += idf[id] * f * (k1 + 1) / (f + k1)
				cover += idf[id]
			}
			conf := r.Confidence
			if total > 0 {
				conf = math.Min(r.Confidence, cover/total) // a passage holds at most what its item matched
			}
			score *= 0.5 + conf
			out = append(out, Passage{Result: r, Text: c.text, Start: c.ustart, End: c.uend,
				Sentence: ix.bestSentence(r.Index, c, ids), Score: score, Confidence: conf})
		}
	}
	slices.SortStableFunc(out, func(a, b Passage) int { return cmp.Compare(b.Score, a.Score) })
	return out[:min(len(out), limit)]
}

// bestSentence is the sentence of the chunk holding the most matched
// terms, relative to the chunk.
func (ix *Index) bestSentence(doc int, c chunk, ids map[uint32]bool) Span {
	best, bestN := Span{0, c.uend - c.ustart}, -1
	u := 0
	for _, s := range sentences(c.text) {
		lead := utf16Len(s[:len(s)-len(strings.TrimLeft(s, " \n"))])
		l := utf16Len(s)
		seen := map[uint32]bool{}
		for _, sp := range ix.spansIn(doc, c.ustart+u, c.ustart+u+l) {
			if ids[sp.term] {
				seen[sp.term] = true
			}
		}
		if len(seen) > bestN {
			best, bestN = Span{u + lead, u + l}, len(seen)
		}
		u += l
	}
	return best
}
