package tenancy

import (
	"fmt"
	"strings"
)

// Scopes is the set of things a token may do. A runtime's token is public
// (browser runtimes carry it in the page), so what it may do, anyone may:
// runtime tokens read content and send events, nothing more. Changing
// content and reading data back take secret tokens.
type Scopes uint8

// The scopes a token can carry.
const (
	// ContentRead: the REST reads, search, FAQ, RAG, suggestions and
	// GraphQL queries.
	ContentRead Scopes = 1 << iota
	// ContentWrite: GraphQL mutations.
	ContentWrite
	// EventsWrite: sending runtime events.
	EventsWrite
	// EventsRead: reading events back.
	EventsRead
	// ContentDraft: reading the draft of an app that publishes, where
	// content:read reads its live version (a preview runtime's token).
	ContentDraft
)

const (
	// RuntimeScopes is what an assistant runtime needs, and all that a
	// token carried by a web page may hold.
	RuntimeScopes = ContentRead | EventsWrite
	// PreviewScopes is what a test build of an assistant needs: a
	// runtime's, reading the draft. A web page may carry it too: the
	// draft is read, never changed.
	PreviewScopes = RuntimeScopes | ContentDraft
	// AllScopes is every scope.
	AllScopes = ContentRead | ContentWrite | EventsWrite | EventsRead | ContentDraft
	// LegacyScopes is what tokens made before scopes existed could do,
	// and keep: everything but reading events back, which nothing offered.
	LegacyScopes = ContentRead | ContentWrite | EventsWrite
)

// scopeOrder is the order in which scopes are named.
const scopeOrder = "content:draft content:read content:write events:read events:write"

// name returns the name of one scope.
func (s Scopes) name() string {
	switch s {
	case ContentRead:
		return "content:read"
	case ContentWrite:
		return "content:write"
	case EventsRead:
		return "events:read"
	case EventsWrite:
		return "events:write"
	case ContentDraft:
		return "content:draft"
	}
	return ""
}

// ReadsDraft says a token with s reads the draft of an app that
// publishes, rather than its live version: it holds content:draft.
// content:write alone does not give it: a token made before scopes holds
// that, and may still be in a web page.
func (s Scopes) ReadsDraft() bool { return s.Has(ContentDraft) }

// Has reports whether every scope of want is in s.
func (s Scopes) Has(want Scopes) bool { return s&want == want }

// Names returns the names of the scopes in s, in scopeOrder order.
func (s Scopes) Names() []string {
	var names []string
	for _, n := range strings.Fields(scopeOrder) {
		if one, _ := scopeByName(n); s.Has(one) {
			names = append(names, n)
		}
	}
	return names
}

// String is the comma-separated names, as stored and as ParseScopes reads.
func (s Scopes) String() string { return strings.Join(s.Names(), ",") }

// ScopeNames lists every scope's name, for messages and help.
func ScopeNames() []string { return AllScopes.Names() }

// ParseScopes reads scope names separated by commas or white space. An
// unknown name is an error.
func ParseScopes(v string) (Scopes, error) {
	var s Scopes
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		one, ok := scopeByName(f)
		if !ok {
			return 0, fmt.Errorf("unknown scope %q; scopes are %s", f, strings.Join(ScopeNames(), ", "))
		}
		s |= one
	}
	return s, nil
}

// StoredScopes reads scopes as a store holds them. Names this version
// does not know are skipped rather than refused: a token written by a
// newer version keeps working here with the scopes known here, and a
// scope not known is never granted.
func StoredScopes(v string) Scopes {
	var s Scopes
	for _, f := range strings.Split(v, ",") {
		if one, ok := scopeByName(strings.TrimSpace(f)); ok {
			s |= one
		}
	}
	return s
}

func scopeByName(name string) (Scopes, bool) {
	for one := ContentRead; one <= ContentDraft; one <<= 1 {
		if one.name() == name {
			return one, true
		}
	}
	return 0, false
}

// CheckTokenScopes refuses a token that could do nothing, which is always
// a caller's mistake.
func CheckTokenScopes(t Token) error {
	if t.Scopes&AllScopes == 0 {
		return fmt.Errorf("a token needs at least one scope (%s)", strings.Join(ScopeNames(), ", "))
	}
	return nil
}
