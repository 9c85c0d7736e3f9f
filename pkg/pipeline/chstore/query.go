package chstore

import (
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
	return string(appendNormalized(make([]byte, 0, len(s)), s))
}

// appendNormalized appends the normal form of s to dst.
func appendNormalized(dst []byte, s string) []byte {
	start := len(dst)
	space := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return appendNormalizedRunes(dst[:start], s)
		}
		if c == ' ' || c-'\t' <= '\r'-'\t' { // the ASCII white space
			space = len(dst) > start
			continue
		}
		if space {
			dst = append(dst, ' ')
			space = false
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// appendNormalizedRunes is appendNormalized for text beyond ASCII.
func appendNormalizedRunes(dst []byte, s string) []byte {
	start := len(dst)
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) {
			space = len(dst) > start
			continue
		}
		if space {
			dst = append(dst, ' ')
			space = false
		}
		dst = utf8.AppendRune(dst, unicode.ToLower(r))
	}
	return dst
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
