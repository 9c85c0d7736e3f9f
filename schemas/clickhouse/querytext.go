package clickhouse

import (
	"unicode"
	"unicode/utf8"
)

// NormalizeQuery is the normal form of a raw query, the form
// query_normalized holds and in which queries are counted, suggested and
// blocked: surrounding white space removed, inner runs of it turned into
// one space, lower case. It is the Go side of query_normalized's default
// (migration 1), which normalises what writers leave empty; the consumer
// normalises in Go, which costs the server less. A query that is already
// normal comes back as it is, without allocating.
func NormalizeQuery(s string) string {
	if IsNormalQuery(s) {
		return s
	}
	return string(AppendNormalQuery(make([]byte, 0, len(s)), s))
}

// AppendNormalQuery appends the normal form of s (see NormalizeQuery) to
// dst, for writers that keep the text in buffers of their own.
func AppendNormalQuery(dst []byte, s string) []byte {
	start := len(dst)
	space := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return appendNormalRunes(dst[:start], s)
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

// appendNormalRunes is AppendNormalQuery for text beyond ASCII.
func appendNormalRunes(dst []byte, s string) []byte {
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

// IsNormalQuery reports whether s is ASCII without capitals and with
// single spaces between words only: normal, as most queries are, and
// cheap to check. Text beyond ASCII is reported as not normal even when
// it is; normalising it changes nothing then.
func IsNormalQuery(s string) bool {
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
