package knowledge

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// TruncatedAnswerRunes is the most characters (runes) a FAQ suggestion's
// truncatedAnswer holds, its ellipsis included: about two lines under a
// chat input, enough to show that the answer fits the question without
// pushing the other suggestions out of view.
const TruncatedAnswerRunes = 150

// ellipsis ends a truncated answer; one character, so that it counts as
// one against TruncatedAnswerRunes.
const ellipsis = "…"

// Cut returns the start of s, at most n characters (runes) long, and
// whether anything was left out. It ends at the last white space within
// the limit, so that no word is split, when that keeps at least half of
// the limit; otherwise (a very long word, or a script written without
// spaces) at the limit itself, never inside a UTF-8 sequence nor before a
// combining mark, which would move to the wrong letter. A cut start has
// no trailing white space.
func Cut(s string, n int) (string, bool) {
	if n <= 0 {
		return "", s != ""
	}
	end, count := -1, 0 // end: where the (n+1)th rune starts
	for i := range s {
		if count == n {
			end = i
			break
		}
		count++
	}
	if end < 0 {
		return s, false
	}
	head := s[:end]
	if next, _ := utf8.DecodeRuneInString(s[end:]); !unicode.IsSpace(next) {
		if i := strings.LastIndexFunc(head, unicode.IsSpace); i > 0 && utf8.RuneCountInString(head[:i]) >= n/2 {
			head = head[:i]
		} else {
			head = beforeMarks(s, end)
		}
	}
	return strings.TrimRightFunc(head, unicode.IsSpace), true
}

// beforeMarks moves a cut at end of s back past the combining marks and
// joiners that start the rest, and past a letter joined to the one
// before it, so that they stay with their letter. If nothing but such
// runes precede end, it cuts at end after all.
func beforeMarks(s string, end int) string {
	for i := end; i > 0; {
		r, _ := utf8.DecodeRuneInString(s[i:])
		prev, size := utf8.DecodeLastRuneInString(s[:i])
		if !joins(r) && prev != zeroWidthJoiner {
			return s[:i]
		}
		i -= size
	}
	return s[:end]
}

const zeroWidthJoiner = '\u200d'

// joins reports whether r belongs to the rune before it: a combining
// mark, a zero-width joiner or a variation selector.
func joins(r rune) bool {
	return unicode.Is(unicode.M, r) || r == zeroWidthJoiner || unicode.Is(unicode.Variation_Selector, r)
}

// truncateAnswer is an answer short enough for a suggestion list: the
// answer itself when it fits in TruncatedAnswerRunes, else its start cut
// by Cut, without trailing commas, semicolons, colons or dashes, and an
// ellipsis.
func truncateAnswer(answer string) string {
	if _, cut := Cut(answer, TruncatedAnswerRunes); !cut {
		return answer
	}
	head, _ := Cut(answer, TruncatedAnswerRunes-utf8.RuneCountInString(ellipsis))
	head = strings.TrimRightFunc(head, func(r rune) bool { return unicode.IsSpace(r) || strings.ContainsRune(",;:-–—", r) })
	return head + ellipsis
}
