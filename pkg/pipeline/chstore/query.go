package chstore

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// NormalizeQuery is the form in which raw queries are counted and matched:
// surrounding white space removed, inner runs of it turned into one space,
// lower case. Suggestions look queries up in the same form. A query that is
// already normal comes back as it is, without allocating.
func NormalizeQuery(s string) string {
	if isNormalASCII(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		if r < utf8.RuneSelf {
			if 'A' <= r && r <= 'Z' {
				r += 'a' - 'A'
			}
			b.WriteByte(byte(r))
			continue
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// isNormalASCII reports whether s is ASCII without capitals and with single
// spaces between words only: most queries, and cheap to check.
func isNormalASCII(s string) bool {
	prevSpace := true // no leading space
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= utf8.RuneSelf, 'A' <= c && c <= 'Z':
			return false
		case c == ' ':
			if prevSpace {
				return false
			}
			prevSpace = true
		case c <= ' ' && (c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'):
			return false
		default:
			prevSpace = false
		}
	}
	return !prevSpace || s == ""
}
