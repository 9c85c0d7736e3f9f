package lexicon

// Morphy's detachment rules per POS: suffix -> replacement.
type rule struct{ suffix, repl string }

// detachRules returns morphy's rules; Load keeps them in the WordNet so
// no package state is shared.
func detachRules() [numPOS][]rule {
	return [numPOS][]rule{
		posNoun: {{"s", ""}, {"ses", "s"}, {"xes", "x"}, {"zes", "z"}, {"ches", "ch"}, {"shes", "sh"}, {"men", "man"}, {"ies", "y"}},
		posVerb: {{"s", ""}, {"ies", "y"}, {"es", "e"}, {"es", ""}, {"ed", "e"}, {"ed", ""}, {"ing", "e"}, {"ing", ""}},
		posAdj:  {{"er", ""}, {"est", ""}, {"er", "e"}, {"est", "e"}},
	}
}

// lemma is one base form of the query word in one POS.
type lemma struct {
	id  uint32
	pos uint8
	// irregular: found through an exception list, so a stemmer cannot
	// conflate it with the word ("bought" -> "buy").
	irregular bool
}

type candidate struct {
	id  uint32
	pos uint8 // POS whose exception list gives its inflections
	w   float64
}

// lookup returns the id of word if it is a lemma in pos.
func (w *WordNet) lookup(word []byte, pos int) (uint32, bool) {
	id, ok := w.ids[string(word)]
	if ok && w.senses[id][pos].n > 0 {
		return id, true
	}
	return 0, false
}

// lemmas appends the base forms of word in every POS, as WordNet's morphy
// finds them: an exception list entry replaces the detachment rules.
func (w *WordNet) lemmas(word string, out []lemma) []lemma {
	var buf [64]byte
	add := func(l lemma) {
		for _, o := range out {
			if o.id == l.id && o.pos == l.pos {
				return
			}
		}
		out = append(out, l)
	}
	wid, known := w.ids[word]
	for pos := range numPOS {
		if id, ok := w.lookup(append(buf[:0], word...), pos); ok {
			add(lemma{id: id, pos: uint8(pos)})
		}
		if known {
			if bases, ok := w.base[pos][wid]; ok {
				for _, b := range bases {
					if w.senses[b][pos].n > 0 {
						add(lemma{id: b, pos: uint8(pos), irregular: true})
					}
				}
				continue
			}
		}
		for _, r := range w.rules[pos] {
			if len(word) <= len(r.suffix) || word[len(word)-len(r.suffix):] != r.suffix {
				continue
			}
			b := append(append(buf[:0], word[:len(word)-len(r.suffix)]...), r.repl...)
			if id, ok := w.lookup(b, pos); ok {
				add(lemma{id: id, pos: uint8(pos)})
			}
		}
	}
	return out
}

// Related calls visit with words related to word, best first, each once,
// with a weight in (0, 1]. word is lower case, accents folded, and may be
// inflected ("nicked", "bikes", "bought"). Not word itself, nor its own
// inflections.
//
// For each lemma of word and each of its senses considered (the first
// minSenses, plus further senses with tagged corpus counts up to
// maxSenses), the other words of the sense's synset get the sense weight
// 1/(1+rank/4), scaled by untaggedScale for untagged senses of a lemma that
// has tagged ones. Adjective "similar to" synsets and derivationally related
// forms of the lemma follow at lower weights, then the hyponyms and
// hypernyms of the first sense. Each related lemma is followed by its
// irregular inflections at the same weight ("steal" -> "stole", "stolen").
// An irregular lemma of word ("bought" -> "buy") comes first at weight 1,
// since a stemmer cannot conflate the two. At most MaxRelated words are
// yielded; multi-word lemmas have spaces ("gift certificate").
func (w *WordNet) Related(word string, visit func(related string, weight float64)) {
	if w == nil || word == "" {
		return
	}
	var lbuf [16]lemma
	lems := w.lemmas(word, lbuf[:0])
	if len(lems) == 0 {
		return
	}
	var xbuf [32]uint32
	excluded := w.excluded(word, lems, xbuf[:0])
	c := collector{excluded: excluded}
	w.gather(&c, lems)
	w.yield(&c, excluded, visit)
}

// excluded appends to buf the words never yielded: word, its regular
// lemmas, and the irregular inflections of all its lemmas.
func (w *WordNet) excluded(word string, lems []lemma, buf []uint32) []uint32 {
	if id, ok := w.ids[word]; ok {
		buf = append(buf, id)
	}
	for _, l := range lems {
		if !l.irregular {
			buf = append(buf, l.id)
		}
		buf = append(buf, w.infl[l.pos][l.id]...)
	}
	return buf
}

// gather collects the related words of lems into c: irregular lemmas at
// weight 1, then the words of each sense's synset, then its pointers,
// then the neighbours of first senses.
func (w *WordNet) gather(c *collector, lems []lemma) {
	for _, l := range lems {
		if l.irregular {
			c.add(l.id, l.pos, 1)
		}
	}
	// Gathered class by class, strongest first, so a full collector drops
	// only the weakest.
	for phase := range 3 {
		for _, l := range lems {
			sp := w.senses[l.id][l.pos]
			nsenses := min(int(sp.n), max(minSenses, min(int(sp.tagged), maxSenses)))
			for rank := range nsenses {
				weight := 1 / (1 + float64(rank)/4)
				if sp.tagged > 0 && rank >= int(sp.tagged) {
					weight *= untaggedScale
				}
				s := w.synsets[w.senseSyn[sp.off+uint32(rank)]]
				switch phase {
				case 0:
					w.addWords(c, s, 0, weight)
				case 1:
					w.addPointers(c, s, l.id, weight)
				case 2:
					if rank == 0 {
						w.addNeighbours(c, s, weight)
					}
				}
			}
		}
	}
}

// yield visits c's candidates by falling weight, each followed by its
// irregular inflections, leaving out the excluded words and repeats, until
// MaxRelated words have been visited.
func (w *WordNet) yield(c *collector, excluded []uint32, visit func(related string, weight float64)) {
	// Stable insertion sort by falling weight; the list is short.
	cs := c.cands[:c.n]
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && cs[j].w > cs[j-1].w; j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}

	var ebuf [MaxRelated]uint32
	emitted := ebuf[:0]
	emit := func(id uint32, weight float64) bool {
		if len(emitted) == MaxRelated {
			return false
		}
		if contains(emitted, id) || contains(excluded, id) {
			return true
		}
		emitted = append(emitted, id)
		visit(w.names[id], weight)
		return true
	}
	for _, cand := range cs {
		if !emit(cand.id, cand.w) {
			return
		}
		for _, f := range w.infl[cand.pos][cand.id] {
			if !emit(f, cand.w) {
				return
			}
		}
	}
}

// addWords adds the words of s, skipping the word numbered skip (1-based).
func (w *WordNet) addWords(c *collector, s synset, skip int, weight float64) {
	for i := range int(s.words.n) {
		if i+1 != skip {
			c.add(w.synWords[s.words.off+uint32(i)], s.pos, weight)
		}
	}
}

// addPointers adds "similar to" synsets and the derivationally related
// forms of lemma (a lexical pointer from that word of s).
func (w *WordNet) addPointers(c *collector, s synset, lemma uint32, weight float64) {
	for _, p := range w.ptrs[s.ptrs.off : s.ptrs.off+uint32(s.ptrs.n)] {
		switch p.sym {
		case ptrSimilar:
			w.addWords(c, w.synsets[p.target], 0, weight*similarScale)
		case ptrDerived:
			if p.src == 0 || p.dst == 0 || int(p.src) > int(s.words.n) ||
				w.synWords[s.words.off+uint32(p.src)-1] != lemma {
				continue
			}
			t := w.synsets[p.target]
			if int(p.dst) <= int(t.words.n) {
				c.add(w.synWords[t.words.off+uint32(p.dst)-1], t.pos, weight*derivedScale)
			}
		}
	}
}

// addNeighbours adds the hyponyms, then the hypernyms, of s.
func (w *WordNet) addNeighbours(c *collector, s synset, weight float64) {
	for _, sym := range [2]uint8{ptrHyponym, ptrHypernym} {
		scale := hyponymScale
		if sym == ptrHypernym {
			scale = hypernymScale
		}
		for _, p := range w.ptrs[s.ptrs.off : s.ptrs.off+uint32(s.ptrs.n)] {
			if p.sym == sym {
				w.addWords(c, w.synsets[p.target], 0, weight*scale)
			}
		}
	}
}

// collector gathers candidates, once each at their best weight. A fixed
// array, not an appended slice, keeps it on the caller's stack.
type collector struct {
	cands    [maxCandidates]candidate
	n        int
	excluded []uint32
}

func (c *collector) add(id uint32, pos uint8, weight float64) {
	if contains(c.excluded, id) {
		return
	}
	for i := range c.n {
		if c.cands[i].id == id {
			if weight > c.cands[i].w {
				c.cands[i].w, c.cands[i].pos = weight, pos
			}
			return
		}
	}
	if c.n < maxCandidates {
		c.cands[c.n] = candidate{id: id, pos: pos, w: weight}
		c.n++
	}
}

func contains(ids []uint32, id uint32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
