package clickhouse

import "regexp"

// DefaultHistoryDays is how many days of asked queries HISTORICAL
// suggestions count, and keep, when nothing else is configured.
const DefaultHistoryDays = 90

// PrivatePattern matches query text that may identify a person: such a
// query is never stored for suggestions or in the query counts, nor
// suggested. It is RE2, which both Go and ClickHouse's match() take (the
// re2 of 18.16 servers and of current ones), and runs on the normalised
// (lower-case, single-spaced) query. Each alternative is written to leave
// ordinary questions alone; the tests list those that must pass. An
// apostrophe is written \x27, which SQL string literals need not escape.
//
// The materialized views that filter with it hold it as it was when they
// were created: a change here takes a migration that replaces them, as
// migration 11 does.
const PrivatePattern = `(?i)` +
	// Anything shaped like an email address.
	`[^\s@]+@[^\s@]+` +
	// An email address or a domain spelled out or half hidden: "jane dot
	// doe at gmail dot com", "jane [at] example", "jane at gmail", "shop
	// dot com".
	`|\bat\s+[a-z0-9-]+(?:\s+dot\s+[a-z0-9-]+)*\s+dot\s+[a-z]{2,}\b` +
	`|[(\[{<]\s*(?:at|dot)\s*[)\]}>]` +
	`|\bat\s+(?:gmail|googlemail|yahoo|hotmail|outlook|icloud|aol|gmx|protonmail|proton)\b` +
	`|\bdot\s+(?:com|net|org|edu|gov|info|biz|io|co|uk|de|fr|nl|es|it|eu|us|ca|au)\b` +
	// A long number: an order, account or card number.
	`|\d{6,}` +
	// A phone number: seven digits or more with separators between them.
	`|\+?\d(?:[\s().-]*\d){6,}` +
	// A URL: a scheme, a www. host or a dotted host name.
	`|[a-z][a-z0-9+.-]*://` +
	`|\bwww\.` +
	`|\b[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}\b` +
	// A street address: a house number, one to three words and a kind of
	// street ("12 baker street", "221b baker st"), a number and a street
	// named after it ("7 rue de la paix", "hauptstr 12"); or one said to
	// be.
	`|\b\d{1,5}[a-z]?\s+(?:[a-z]+\s+){1,3}(?:street|st|str|strasse|road|rd|avenue|ave|lane|ln|boulevard|blvd|crescent)\b` +
	`|\b\d{1,5}[a-z]?,?\s+(?:rue|via|calle|avenida|chemin)\s+[a-z]` +
	`|\b[a-z]+(?:strasse|str|weg|gasse|allee)\.?\s+\d{1,4}[a-z]?\b` +
	`|\bi live (?:at|on)\b` +
	// A date with its year, a date of birth: "12/03/1985", "1985-03-12",
	// "12.03.85", "3rd of march 1990", "march 3, 1990", "born on ...",
	// "my birthday is ...".
	`|\b\d{1,4}[./-]\d{1,2}[./-]\d{2,4}\b` +
	`|\b\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?` + months + `,?\s+\d{2,4}\b` +
	`|` + months + `\s+\d{1,2}(?:st|nd|rd|th)?,?\s+\d{2,4}\b` +
	`|\b(?:born|date of birth|birth ?date|dob|d\.o\.b)\b[^0-9]{0,20}\d` +
	`|\bmy (?:birthday|birth ?date|date of birth|dob)\b` +
	// Someone introducing themselves or giving their details: "my name
	// is ...", "i'm called ...", "my phone number is ...".
	`|\bmy (?:[a-z]+ )?(?:name|surname|address|email|e-mail|phone|number|mobile|postcode|post code|zip|zip code|iban|passport) (?:is|was)\b` +
	`|\bmy name\x27?s\b` +
	`|\b(?:i am|i\x27m|im) called\b` +
	`|\bthis is [a-z]+ speaking\b`

// months are the names of the months and their abbreviations, as a
// group that ends on a word boundary.
const months = `\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b`

// privateQuery is PrivatePattern compiled; regexps are safe for
// concurrent use and this one is never changed.
var privateQuery = regexp.MustCompile(PrivatePattern)

// IsPrivate reports whether a query looks like it holds personal data (an
// email address, a phone number, a long number, a URL, a street address,
// a date, a name given as such), and so must not be suggested.
func IsPrivate(query string) bool { return privateQuery.MatchString(query) }
