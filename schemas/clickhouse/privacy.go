package clickhouse

import (
	"regexp"
	"slices"
	"sort"
	"strings"
)

// DefaultHistoryDays is how many days of asked queries HISTORICAL
// suggestions count, and keep, when nothing else is configured.
const DefaultHistoryDays = 90

// PrivatePattern returns the pattern of query text that may identify a
// person: such a query is never stored for suggestions or in the query
// counts, nor suggested. It is RE2, which both Go and ClickHouse's match()
// take (the re2 of 18.16 servers and of current ones), and runs on the
// normalised (lower-case, single-spaced) query. An apostrophe is written
// \x27, which SQL string literals need not escape.
//
// A personal fact counts only with its value: "my phone number is 555
// 0100" and "my name is jane" are refused, "my phone is broken" and "my
// name is misspelled" are not. Each alternative is written to leave
// ordinary questions alone; the tests list those that must pass.
//
// The materialized views that filter with it hold it as it was when they
// were created: a change here takes a migration that replaces them, as
// migration 12 does.
func PrivatePattern() string { return `(?i)` + strings.Join(privateAlternatives(), "|") }

// privateAlternatives are the kinds of personal data PrivatePattern
// refuses, one alternative each, in the order the pattern has held them
// since its migration (the views hold the pattern as written).
func privateAlternatives() []string {
	return slices.Concat(contactAlternatives(), addressAlternatives(), dateAlternatives(), nameAlternatives(), ownNumberAlternatives())
}

// contactAlternatives: email addresses, domains, long numbers, phone
// numbers and URLs.
func contactAlternatives() []string {
	return []string{
		// Anything shaped like an email address.
		`[^\s@]+@[^\s@]+`,
		// An email address or a domain spelled out or half hidden: "jane
		// dot doe at gmail dot com", "jane [at] example", "jane at
		// gmail", "shop dot com".
		`\bat\s+[a-z0-9-]+(?:\s+dot\s+[a-z0-9-]+)*\s+dot\s+[a-z]{2,}\b`,
		`[(\[{<]\s*(?:at|dot)\s*[)\]}>]`,
		`\bat\s+(?:gmail|googlemail|yahoo|hotmail|outlook|icloud|aol|gmx|protonmail|proton)\b`,
		`\bdot\s+(?:com|net|org|edu|gov|info|biz|io|co|uk|de|fr|nl|es|it|eu|us|ca|au)\b`,
		// A long number: an order, account or card number.
		`\d{6,}`,
		// A phone number: seven digits or more with separators between
		// them, after a "+", with a group of three digits or more
		// ("555-123-4567", "07700 900123"), or nine or more from a 0
		// ("06 12 34 56 78"); not sizes ("8 10 12 14") nor times
		// ("10.00-18.00").
		`\+\s?\d(?:` + phoneSeparator + `\d){6,}`,
		phoneWithGroup(),
		`\b0(?:` + phoneSeparator + `\d){8,}`,
		// A phone number spelled out: six digits or more.
		`\b(?:` + digitWord + `\s+){5,}` + digitWord + `\b`,
		// A URL: a scheme, a www. host or a dotted host name.
		`[a-z][a-z0-9+.-]*://`,
		`\bwww\.`,
		`\b[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}\b`,
	}
}

// addressAlternatives: street addresses and where someone lives.
func addressAlternatives() []string {
	// A word that is not one of the words that come after a house
	// number without making it one ("3 hour road trip", "2 shops on
	// oxford street").
	streetWord := notWord(
		"a", "an", "the", "and", "or", "of", "in", "on", "at", "to", "from", "for", "by", "near", "off", "with", "per",
		"more", "less", "free", "extra", "x", "am", "pm",
		"hour*", "hr", "hrs", "minut*", "min", "mins", "mile*", "km", "kms", "day", "days", "week*", "month*", "year*",
		"night*", "time*", "lane*", "way*", "people", "person*", "star*")
	streetKind := `(?:street|st|str|strasse|road|rd|avenue|ave|lane|ln|boulevard|blvd|crescent|way)\b`
	return []string{
		// A street address: a house number, one to three words of its
		// name and a kind of street ("12 baker street", "221b baker
		// st"), a number and a street named after it ("7 rue de la
		// paix", "hauptstr 12"); where someone lives.
		`\b\d{1,5}[a-z]?\s+(?:` + streetWord + `\s+){1,3}` + streetKind,
		`\b\d{1,5}[a-z]?,?\s+(?:rue|chemin|impasse|calle|avenida)\s+[a-z]`,
		`\b[a-z]+(?:strasse|str|weg|gasse|allee)\.?\s+\d{1,4}[a-z]?\b`,
		`\bi live at\s+(?:` + notWord("home") + `\b|[^a-z\s])`,
		`\bi live on\s+(?:[a-z]+\s+){1,2}` + streetKind,
	}
}

// dateAlternatives: whole dates, dates of birth and birthdays.
func dateAlternatives() []string {
	return []string{
		// A date with its day, month and year, which may be one of
		// birth: "12/03/1985", "1985-03-12", "12.03.85", "3rd of march
		// 1990", "march 3, 1990"; not a version ("1.2.30").
		`\b` + dayNumber + `[/-]` + dayNumber + `[/-](?:\d{4}|\d{2})\b`,
		`\b(?:19|20)\d{2}[./-]` + monthNumber + `[./-]` + dayNumber + `\b`,
		`\b(?:0[1-9]|[12]\d|3[01])\.(?:0[1-9]|1[0-2])\.(?:\d{4}|\d{2})\b`,
		`\b` + dayNumber + `\.` + monthNumber + `\.(?:19|20)\d{2}\b`,
		`\b` + dayNumber + `(?:st|nd|rd|th)?\s+(?:of\s+)?` + months + `,?\s+(?:19|20)\d{2}\b`,
		months + `\s+` + dayNumber + `(?:st|nd|rd|th)?,?\s+(?:19|20)\d{2}\b`,
		// A date of birth, or a birthday, with its value: "born on the
		// 3rd", "dob 1985", "my birthday is in march".
		`\b(?:born|date of birth|birth ?date|dob|d\.o\.b)\b[^0-9]{0,20}(?:\d|` + months + `)`,
		`\bmy (?:birthday|bday|b-day)\b[^0-9]{0,12}(?:\d|` + months + `)`,
	}
}

// nameAlternatives: a name given as such.
func nameAlternatives() []string {
	// A word that is not one of the words that follow "my name is" or
	// "i'm called" when no name does ("my name is misspelled", "i'm
	// called every day").
	nameWord := notWord(
		"a", "the", "my", "no", "not", "now", "still", "also", "already", "too", "on", "in", "at", "by", "for", "from",
		"about", "all", "being", "same", "back", "every", "there",
		"wrong*", "incorrect*", "correct*", "right", "invalid*", "missing", "misspel*", "spel*", "show*", "display*",
		"print*", "writ*", "changed", "differ*", "blank", "empty", "cut", "locked", "taken", "used")
	return []string{
		// A name given as such: "my name is jane", "my name's o'brien",
		// "i'm called jane", "this is jane speaking". A name beginning
		// with a letter beyond ASCII counts too.
		`\b(?:my (?:[a-z]+ )?(?:name|surname|forename|username|user name|nickname)(?:(?: is| was|` + apostrophe + `s)\s+|\s*:\s*)` +
			`|(?:i am|i` + apostrophe + `?m) called\s+)(?:` + nameWord + `\b|[^\x00-\x7f])`,
		`\bthis is [a-z]+ speaking\b`,
	}
}

// ownNumberAlternatives: a number, a code or an address given as one's
// own, with its value.
func ownNumberAlternatives() []string {
	return []string{
		// A number, a code or an address given as one's own, with its
		// value: "my phone number is 555 ...", "my order number is
		// #12345", "my postcode is sw1a 1aa", "my address is 5 main
		// road".
		`\bmy (?:[a-z]+ ){0,2}(?:number|no|phone|mobile|cell|telephone|tel|whatsapp)(?: number| no)?(?: is| was|:)\s*` +
			`(?:\+|[a-z]{0,3}#?\(?\d(?:[\s().-]?\d){2}|(?:` + digitWord + `\s+){2}` + digitWord + `\b)`,
		`\bmy (?:[a-z]+ ){0,2}(?:postcode|post code|postal code|zip|zip code|iban|passport|ssn|social security|` +
			`national insurance|licen[cs]e|registration|reg|number plate|plate|pin|id)(?: number| no)?(?: is| was|:)\s*[a-z]{0,4}\d[a-z0-9]`,
		`\bmy (?:[a-z]+ )?address(?: is| was|:)\s*(?:[a-z]+ )?\d`,
	}
}

// Pieces of PrivatePattern.
const (
	// months are the names of the months and their abbreviations, as a
	// group that ends on a word boundary.
	months = `\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b`
	// dayNumber is a day of the month, 1 to 31, with or without a
	// leading zero; monthNumber a month, 1 to 12.
	dayNumber   = `(?:0?[1-9]|[12]\d|3[01])`
	monthNumber = `(?:0?[1-9]|1[0-2])`
	// digitWord is a digit as said: "seven", "oh", "double".
	digitWord = `(?:zero|oh|one|two|three|four|five|six|seven|eight|nine|double|triple)`
	// phoneSeparator is what may stand between the digits of a phone
	// number.
	phoneSeparator = `[\s().-]*`
	// apostrophe is a typed apostrophe or a typographic one (U+2019, as
	// phones type it). ClickHouse's match() reads text as bytes, Go as
	// characters: U+2019 is three bytes there and one character here, a
	// character beyond ASCII in both.
	apostrophe = `(?:\x27|[^\x00-\x7f]{1,3})`
)

// phoneWithGroup matches seven digits or more with separators between
// them, three of them together: any such run holds one of three digits
// with four more around it, before or after.
func phoneWithGroup() string {
	var alts []string
	for before := 0; before <= 4; before++ {
		alts = append(alts, strings.Repeat(`\d`+phoneSeparator, before)+`\d{3}`+strings.Repeat(phoneSeparator+`\d`, 4-before))
	}
	return `(?:` + strings.Join(alts, "|") + `)`
}

// notWord returns RE2 that matches one word of the letters a to z that is
// none of words, where a word ending in "*" stands for every word it
// begins. RE2 has no lookahead, so the pattern spells the other words out
// along the excluded words' letters: at each letter, a letter that leaves
// them, or the next letter of one of them. Followed by \b, it matches
// whole words only.
func notWord(words ...string) string {
	type node struct {
		next     map[byte]*node
		excluded bool // the word that ends here
		prefix   bool // and every word it begins
	}
	root := &node{next: map[byte]*node{}}
	for _, w := range words {
		n := root
		prefix := strings.HasSuffix(w, "*")
		w = strings.TrimSuffix(w, "*")
		for i := 0; i < len(w); i++ {
			k := n.next[w[i]]
			if k == nil {
				k = &node{next: map[byte]*node{}}
				n.next[w[i]] = k
			}
			n = k
		}
		n.excluded, n.prefix = true, n.prefix || prefix
	}
	// rest returns what may follow the letters that led to n, and whether
	// nothing may: "" when every continuation is excluded.
	var rest func(n *node) (re string, endsHere bool)
	rest = func(n *node) (string, bool) {
		if n.prefix {
			return "", false
		}
		endsHere := !n.excluded && n != root
		if len(n.next) == 0 {
			return `[a-z]+`, endsHere
		}
		var letters []byte
		for c := range n.next {
			letters = append(letters, c)
		}
		sort.Slice(letters, func(i, j int) bool { return letters[i] < letters[j] })
		var alts []string
		if len(letters) < 26 {
			alts = append(alts, lettersBut(letters)+`[a-z]*`)
		}
		for _, c := range letters {
			re, end := rest(n.next[c])
			switch {
			case re == "" && end:
				alts = append(alts, string(c))
			case re == "":
			case end:
				alts = append(alts, string(c)+`(?:`+re+`)?`)
			default:
				alts = append(alts, string(c)+re)
			}
		}
		return `(?:` + strings.Join(alts, "|") + `)`, endsHere
	}
	re, _ := rest(root)
	return re
}

// lettersBut is a character class of the letters a to z but those given,
// which are fewer than all.
func lettersBut(except []byte) string {
	var b strings.Builder
	b.WriteByte('[')
	for c := byte('a'); c <= 'z'; c++ {
		if strings.IndexByte(string(except), c) >= 0 {
			continue
		}
		last := c
		for last < 'z' && strings.IndexByte(string(except), last+1) < 0 {
			last++
		}
		b.WriteByte(c)
		if last > c+1 {
			b.WriteByte('-')
		}
		if last > c {
			b.WriteByte(last)
		}
		c = last
	}
	b.WriteByte(']')
	return b.String()
}

// privateQuery is PrivatePattern compiled; regexps are safe for
// concurrent use and this one is never changed.
var privateQuery = regexp.MustCompile(PrivatePattern())

// MaxCheckedQuery is the longest query IsPrivate reads: a longer one is
// taken as private unread. Go's regexp takes a microsecond or two a byte
// on this pattern, and an event's raw query may be a megabyte; no
// suggestion is that long, and such a text is likely to hold something
// of someone's.
const MaxCheckedQuery = 1024

// IsPrivate reports whether a query looks like it holds personal data (an
// email address, a phone number, a long number, a URL, a street address,
// a date, a name or a number given as one's own), or is longer than
// MaxCheckedQuery, and so must not be suggested.
func IsPrivate(query string) bool {
	return len(query) > MaxCheckedQuery || privateQuery.MatchString(query)
}
