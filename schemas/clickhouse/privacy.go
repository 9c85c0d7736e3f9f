package clickhouse

import "regexp"

// DefaultHistoryDays is how many days of asked queries HISTORICAL
// suggestions count, and keep, when nothing else is configured.
const DefaultHistoryDays = 90

// PrivatePattern matches query text that may identify a person: such a
// query is never stored for suggestions nor suggested. It is RE2, which
// both Go and ClickHouse's match() take, and runs on the normalised
// (lower-case, single-spaced) query; the alternatives are, in order:
// anything shaped like an email address; a long number (an order,
// account or card number); a phone number, seven digits or more with
// separators between them; a URL: a scheme, a www. host or a dotted host
// name.
const PrivatePattern = `(?i)` +
	`[^\s@]+@[^\s@]+` +
	`|\d{6,}` +
	`|\+?\d(?:[\s().-]*\d){6,}` +
	`|[a-z][a-z0-9+.-]*://` +
	`|\bwww\.` +
	`|\b[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}\b`

// privateQuery is PrivatePattern compiled; regexps are safe for
// concurrent use and this one is never changed.
var privateQuery = regexp.MustCompile(PrivatePattern)

// IsPrivate reports whether a query looks like it holds an email address,
// a phone number, a long number or a URL, and so must not be suggested.
func IsPrivate(query string) bool { return privateQuery.MatchString(query) }
