// Package search is full-text search over an app's knowledge base: an
// in-memory BM25 index with English stemming, accent and case folding,
// typo-tolerant and prefix matching, highlights and answer passages. It
// also ranks FAQs by their question variants and matches autocomplete
// suggestions.
package search

import (
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
	"golang.org/x/text/unicode/norm"
)

// token is one word of a text with where it stands, in UTF-16 code units
// (the offsets JavaScript clients index strings by).
type token struct {
	word       string // folded: lower case, accents removed
	term       string // stemmed
	stop       bool
	start, end int
	// bstart and bend are the same bounds in bytes.
	bstart, bend int
}

// fold lowers case and strips accents: "Élan" and "elan" match.
func fold(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToLower(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range norm.NFD.String(s) {
		if unicode.Is(unicode.Mn, r) {
			continue
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

func isApostrophe(r rune) bool { return r == '\'' || r == '’' }

// tokens splits text into words. Apostrophes inside words are dropped
// ("don't" is "dont"), so contractions and possessives match loosely. A
// word joined to the next by a hyphen also yields the two joined ("e-bike"
// gives "e", "bike" and "ebike"), so both spellings match.
func tokens(text string) []token { return tokensWith(text, nil) }

// stems remembers the stems of words: stemming is most of the cost of
// reading text, and words repeat. A read-only memo (an index's, shared by
// concurrent searches) only answers what it holds.
type stems struct {
	m        map[string]string
	readOnly bool
	none     bool // terms are not wanted: every word's is ""
}

func (s *stems) of(w string) string {
	if s == nil {
		return stem(w)
	}
	if s.none {
		return ""
	}
	if t, ok := s.m[w]; ok {
		return t
	}
	t := stem(w)
	if !s.readOnly {
		s.m[w] = t
	}
	return t
}

// tokensWith is tokens with a stem memo (nil for none).
func tokensWith(text string, memo *stems) []token { return appendTokens(nil, text, memo) }

// appendTokens appends text's tokens (see tokensWith) to dst.
func appendTokens(dst []token, text string, memo *stems) []token {
	return appendJoined(appendWords(dst, text, memo), len(dst), text, memo)
}

// appendJoined appends to out the joined forms of hyphenated words of
// text among its words out[from:].
func appendJoined(out []token, from int, text string, memo *stems) []token {
	n := len(out)
	for i := from; i+1 < n; i++ {
		a, b := out[i], out[i+1]
		if b.bstart == a.bend+1 && text[a.bend] == '-' {
			w := a.word + b.word
			out = append(out, token{word: w, term: memo.of(w), start: a.start, end: b.end, bstart: a.bstart, bend: b.bend})
		}
	}
	return out
}

// words splits text into its words.
func words(text string, memo *stems) []token { return appendWords(nil, text, memo) }

// appendWords appends text's words to out.
func appendWords(out []token, text string, memo *stems) []token {
	pos := 0 // UTF-16 offset of the rune at i
	start, startPos := -1, 0
	flush := func(end, endPos int) {
		bstart := start
		if start < 0 {
			return
		}
		w := strings.Map(func(r rune) rune {
			if isApostrophe(r) {
				return -1
			}
			return r
		}, fold(text[start:end]))
		if w != "" {
			out = append(out, token{word: w, term: memo.of(w), stop: english.IsStopWord(w), start: startPos, end: endPos, bstart: bstart, bend: end})
		}
		start = -1
	}
	for i, r := range text {
		inWord := isWordRune(r)
		if isApostrophe(r) && start >= 0 {
			next, _ := utf8.DecodeRuneInString(text[i+utf8.RuneLen(r):])
			inWord = unicode.IsLetter(next)
		}
		switch {
		case inWord && start < 0:
			start, startPos = i, pos
		case !inWord:
			flush(i, pos)
		}
		pos += utf16.RuneLen(r)
	}
	flush(len(text), pos)
	return out
}

// stem reduces a folded word to its English stem; words with digits or
// letters beyond ASCII stay as they are.
func stem(w string) string {
	for _, r := range w {
		if r > unicode.MaxASCII || unicode.IsDigit(r) {
			return w
		}
	}
	return english.Stem(w, true)
}

// query is an analysed query: its distinct content terms (stop words
// count only when there is nothing else), and its last word when the text
// may stop in the middle of it.
type query struct {
	terms []string
	// words are the folded words the terms came from (the first of each),
	// for looking up related words, which a stem does not name.
	words   []string
	partial string // folded last word, when unfinished
}

// parseQuery analyses q, stemming with memo (nil for none).
func parseQuery(q string, memo *stems) query {
	toks := tokensWith(q, memo)
	var out query
	if len(toks) == 0 {
		return out
	}
	allStop := true
	for _, t := range toks {
		allStop = allStop && t.stop
	}
	seen := map[string]bool{}
	for _, t := range toks {
		if (t.stop && !allStop) || seen[t.term] {
			continue
		}
		seen[t.term] = true
		out.terms = append(out.terms, t.term)
		out.words = append(out.words, t.word)
	}
	if r, _ := utf8.DecodeLastRuneInString(q); isWordRune(r) {
		out.partial = toks[len(toks)-1].word
	}
	return out
}
