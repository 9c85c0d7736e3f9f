package graphql

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/graphql-go/graphql/gqlerrors"
	"github.com/graphql-go/graphql/language/ast"
	"github.com/graphql-go/graphql/language/location"
	"github.com/graphql-go/graphql/language/parser"
	"github.com/graphql-go/graphql/language/source"

	"github.com/assistantcms/cms/pkg/content"
)

// A query is checked before graphql-go parses and validates it, since
// some requests would otherwise take the process down or hold a core for
// minutes: its parser recurses once per bracket, so deep nesting
// overflows the goroutine stack (which no recover catches), and allocates
// half a kilobyte per token; a syntax error costs time quadratic in its
// column; every error scans the whole query for its line; its validator
// recurses forever on a fragment cycle, and costs tens of microseconds
// per part of a document, parts of fragments once per spread.

// maxNesting bounds how deeply brackets ({, [ and () nest in a query:
// fields nest at most MaxDepth deep, and an inline value as deep as a
// record may, with room for the levels around it.
const maxNesting = 2 * content.MaxNesting

// maxTokens bounds the tokens of a query: graphql-go's parser allocates
// about half a kilobyte per token, and large values belong in variables.
const maxTokens = 100_000

// token is one token of a query.
type token struct {
	start, end int // byte offsets in the query
	line, col  int // where it starts, from 1; columns count characters
}

// document is a parsed query with what is needed to place errors in the
// text the client sent.
type document struct {
	ast   *ast.Document
	query string
	toks  []token
	// at holds where each token starts in the text given to the parser,
	// and where that text ends.
	at []int
	// end is where the query ends.
	end location.SourceLocation
}

// requestError is a query refused before it runs.
type requestError struct {
	status int
	errs   []gqlerrors.FormattedError
}

func refuse(status int, e *codedError) *requestError {
	return &requestError{status: status, errs: []gqlerrors.FormattedError{{Message: e.msg, Extensions: e.Extensions()}}}
}

func syntaxError(line, col int, desc string) *requestError {
	return &requestError{status: http.StatusBadRequest, errs: []gqlerrors.FormattedError{{
		Message:    fmt.Sprintf("Syntax Error GraphQL request (%d:%d) %s", line, col, desc),
		Locations:  []location.SourceLocation{{Line: line, Column: col}},
		Extensions: map[string]any{"code": CodeParseFailed},
	}}}
}

// parseQuery checks, parses and bounds a query. graphql-go is given the
// tokens one per line: the same document, on which any position it
// reports has a small column; positions are mapped back to the query.
func parseQuery(query string, limits Limits, log *slog.Logger) (*document, *requestError) {
	d := &document{query: query}
	if rerr := d.lex(); rerr != nil {
		return nil, rerr
	}
	body := make([]byte, 0, len(query)+len(d.toks))
	d.at = make([]int, 0, len(d.toks)+1)
	for _, t := range d.toks {
		d.at = append(d.at, len(body))
		body = append(body, query[t.start:t.end]...)
		body = append(body, '\n')
	}
	d.at = append(d.at, len(body))
	doc, err := parse(body, log)
	if err != nil {
		desc, pos := err.Error(), len(body)
		var ge *gqlerrors.Error
		if errors.As(err, &ge) {
			if len(ge.Positions) > 0 {
				pos = ge.Positions[0]
			}
			// "Syntax Error GraphQL request (l:c) description\n\n<excerpt>":
			// the place is given anew, the excerpt of the reshaped text left out.
			if i := strings.Index(desc, ") "); strings.HasPrefix(desc, "Syntax Error ") && i >= 0 {
				desc = desc[i+2:]
			}
			desc, _, _ = strings.Cut(desc, "\n\n")
		}
		l := d.locate(pos)
		return nil, syntaxError(l.Line, l.Column, desc)
	}
	d.ast = doc
	for _, def := range doc.Definitions {
		switch def := def.(type) {
		case *ast.OperationDefinition, *ast.FragmentDefinition:
		default:
			// Type definitions (schema language) are not requests, and
			// graphql-go's validator does not refuse them.
			var locs []location.SourceLocation
			if l := def.GetLoc(); l != nil {
				locs = []location.SourceLocation{d.locate(l.Start)}
			}
			return nil, &requestError{status: http.StatusBadRequest, errs: []gqlerrors.FormattedError{{
				Message:    fmt.Sprintf("Only operations and fragments can be run, not schema definitions (%s).", strings.ToLower(kindName(def.GetKind()))),
				Locations:  locs,
				Extensions: map[string]any{"code": CodeValidationFailed},
			}}}
		}
	}
	if v := untyped(doc); v != nil {
		l := d.locate(v.Loc.Start)
		return nil, syntaxError(l.Line, l.Column, fmt.Sprintf("Expected a type for variable \"$%s\".", v.Variable.Name.Value))
	}
	if rerr := d.bound(limits); rerr != nil {
		return nil, rerr
	}
	return d, nil
}

// parse runs graphql-go's parser, answering a text it panics on as
// malformed. NoSource keeps it from searching the text for the line of
// every error it makes; relocate places them instead.
func parse(body []byte, log *slog.Logger) (doc *ast.Document, err error) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("GraphQL parsing failed", "panic", p, "stack", string(debug.Stack()))
			doc, err = nil, errors.New(malformed)
		}
	}()
	return parser.Parse(parser.ParseParams{
		Source:  &source.Source{Body: body, Name: "GraphQL request"},
		Options: parser.ParseOptions{NoSource: true},
	})
}

// kindName spells an AST kind such as ObjectDefinition as words.
func kindName(kind string) string {
	var b strings.Builder
	for i, r := range kind {
		if i > 0 && 'A' <= r && r <= 'Z' {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// untyped finds a variable whose type graphql-go's parser left out or
// half built (as from "$a: )" or "$a: []"), which its validator cannot
// take.
func untyped(doc *ast.Document) *ast.VariableDefinition {
	var complete func(t ast.Type) bool
	complete = func(t ast.Type) bool {
		switch t := t.(type) {
		case *ast.Named:
			return t != nil && t.Name != nil
		case *ast.List:
			return t != nil && complete(t.Type)
		case *ast.NonNull:
			if t == nil {
				return false
			}
			_, double := t.Type.(*ast.NonNull)
			return !double && complete(t.Type)
		}
		return false
	}
	for _, def := range doc.Definitions {
		var vars []*ast.VariableDefinition
		switch def := def.(type) {
		case *ast.OperationDefinition:
			vars = def.VariableDefinitions
		case *ast.FragmentDefinition:
			vars = def.VariableDefinitions
		}
		for _, v := range vars {
			if !complete(v.Type) {
				return v
			}
		}
	}
	return nil
}

// lex splits the query into tokens, accepting exactly what graphql-go's
// lexer accepts, so that its parser can only fail at a token's start.
func (d *document) lex() *requestError {
	q := d.query
	line, col := 1, 1
	depth := 0
	for i := 0; i < len(q); {
		r, w := utf8.DecodeRuneInString(q[i:])
		switch {
		case r == '\n':
			i, line, col = i+1, line+1, 1
			continue
		case r == '\r':
			i, line, col = i+1, line+1, 1
			if i < len(q) && q[i] == '\n' {
				i++
			}
			continue
		case r == ' ' || r == '\t' || r == ',' || r == '\ufeff':
			i, col = i+w, col+1
			continue
		case r == '#':
			// A comment runs to the end of the line, or to any other
			// control character, which is then refused as a token.
			for i, col = i+1, col+1; i < len(q); {
				r, w := utf8.DecodeRuneInString(q[i:])
				if r < 0x20 && r != '\t' {
					break
				}
				i, col = i+w, col+1
			}
			continue
		}
		end, bad, desc := tokenEnd(q, i)
		if desc != "" {
			l, c := advance(q[i:bad], line, col)
			return syntaxError(l, c, desc)
		}
		switch q[i] {
		case '{', '[', '(':
			if depth++; depth > maxNesting {
				rerr := refuse(http.StatusBadRequest, errorf(CodeQueryTooDeep, "", "the request nests brackets more than %d deep", maxNesting))
				rerr.errs[0].Locations = []location.SourceLocation{{Line: line, Column: col}}
				return rerr
			}
		case '}', ']', ')':
			depth--
		}
		if len(d.toks) == maxTokens {
			return refuse(http.StatusRequestEntityTooLarge, errorf(CodeRequestTooLarge, "query",
				"the query has more than %d tokens; send large values as variables", maxTokens))
		}
		d.toks = append(d.toks, token{start: i, end: end, line: line, col: col})
		line, col = advance(q[i:end], line, col)
		i = end
	}
	d.end = location.SourceLocation{Line: line, Column: col}
	return nil
}

// tokenEnd reads the token starting at q[i]: where it ends or, when it is
// not a token, where the fault is and what it is.
func tokenEnd(q string, i int) (end, bad int, desc string) {
	r, _ := utf8.DecodeRuneInString(q[i:])
	at := func(p int) byte {
		if p < len(q) {
			return q[p]
		}
		return 0
	}
	switch {
	case r < 0x20:
		return 0, i, fmt.Sprintf("Invalid character %s.", charDesc(q, i))
	case strings.ContainsRune("!$&():=@[]{|}", r):
		return i + 1, 0, ""
	case r == '.':
		if at(i+1) == '.' && at(i+2) == '.' {
			return i + 3, 0, ""
		}
	case r == '_' || 'A' <= r && r <= 'Z' || 'a' <= r && r <= 'z':
		p := i + 1
		for p < len(q) && (q[p] == '_' || isDigit(q[p]) || 'A' <= q[p] && q[p] <= 'Z' || 'a' <= q[p] && q[p] <= 'z') {
			p++
		}
		return p, 0, ""
	case r == '-' || '0' <= r && r <= '9':
		return number(q, i)
	case r == '"':
		if at(i+1) == '"' && at(i+2) == '"' {
			return blockString(q, i)
		}
		return quoted(q, i)
	}
	return 0, i, fmt.Sprintf("Unexpected character %s.", charDesc(q, i))
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func number(q string, i int) (end, bad int, desc string) {
	p := i
	if q[p] == '-' {
		p++
	}
	digits := func(p int) (int, string) {
		if p >= len(q) || !isDigit(q[p]) {
			return p, fmt.Sprintf("Invalid number, expected digit but got: %s.", charDesc(q, p))
		}
		for p < len(q) && isDigit(q[p]) {
			p++
		}
		return p, ""
	}
	var desc2 string
	if p < len(q) && q[p] == '0' {
		if p++; p < len(q) && isDigit(q[p]) {
			return 0, p, fmt.Sprintf("Invalid number, unexpected digit after 0: %s.", charDesc(q, p))
		}
	} else if p, desc2 = digits(p); desc2 != "" {
		return 0, p, desc2
	}
	if p < len(q) && q[p] == '.' {
		if p, desc2 = digits(p + 1); desc2 != "" {
			return 0, p, desc2
		}
	}
	if p < len(q) && (q[p] == 'e' || q[p] == 'E') {
		p++
		if p < len(q) && (q[p] == '+' || q[p] == '-') {
			p++
		}
		if p, desc2 = digits(p); desc2 != "" {
			return 0, p, desc2
		}
	}
	return p, 0, ""
}

// quoted reads a "string" on one line, with \ escapes.
func quoted(q string, i int) (end, bad int, desc string) {
	for p := i + 1; ; {
		if p >= len(q) || q[p] == '\n' || q[p] == '\r' {
			return 0, p, "Unterminated string."
		}
		r, w := utf8.DecodeRuneInString(q[p:])
		switch {
		case r == '"':
			return p + 1, 0, ""
		case r < 0x20 && r != '\t':
			return 0, p, fmt.Sprintf("Invalid character within String: %s.", charDesc(q, p))
		case r != '\\':
			p += w
			continue
		}
		p++
		if p >= len(q) {
			return 0, p, "Invalid character escape sequence at the end of the request."
		}
		switch q[p] {
		case '"', '/', '\\', 'b', 'f', 'n', 'r', 't':
			p++
		case 'u':
			if p+4 >= len(q) || !isHex(q[p+1]) || !isHex(q[p+2]) || !isHex(q[p+3]) || !isHex(q[p+4]) {
				return 0, p, `Invalid character escape sequence: \u must be followed by four hexadecimal digits.`
			}
			p += 5
		default:
			return 0, p, fmt.Sprintf(`Invalid character escape sequence: \%s.`, charDesc(q, p))
		}
	}
}

func isHex(c byte) bool { return isDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// blockString reads a """block string""", in which \""" is an escaped
// delimiter.
func blockString(q string, i int) (end, bad int, desc string) {
	for p := i + 3; ; {
		if p >= len(q) {
			return 0, p, "Unterminated string."
		}
		r, w := utf8.DecodeRuneInString(q[p:])
		switch {
		case strings.HasPrefix(q[p:], `"""`):
			return p + 3, 0, ""
		case r < 0x20 && r != '\t' && r != '\n' && r != '\r':
			return 0, p, fmt.Sprintf("Invalid character within String: %s.", charDesc(q, p))
		case strings.HasPrefix(q[p:], `\"""`):
			p += 4
		default:
			p += w
		}
	}
}

// charDesc names the character at q[p] in a message.
func charDesc(q string, p int) string {
	if p >= len(q) {
		return "<EOF>"
	}
	r, _ := utf8.DecodeRuneInString(q[p:])
	if 0x20 <= r && r < 0x7f {
		return fmt.Sprintf("%q", string(r))
	}
	return fmt.Sprintf(`"\u%04X"`, r)
}

// advance returns where text that starts at line, col ends.
func advance(text string, line, col int) (int, int) {
	for i := 0; i < len(text); {
		switch text[i] {
		case '\n':
			i, line, col = i+1, line+1, 1
		case '\r':
			i, line, col = i+1, line+1, 1
			if i < len(text) && text[i] == '\n' {
				i++
			}
		default:
			_, w := utf8.DecodeRuneInString(text[i:])
			i, col = i+w, col+1
		}
	}
	return line, col
}

// locate maps a position in the text given to the parser to a place in
// the query.
func (d *document) locate(pos int) location.SourceLocation {
	i := sort.Search(len(d.at), func(i int) bool { return d.at[i] > pos }) - 1
	if i < 0 || i >= len(d.toks) {
		return d.end
	}
	t := d.toks[i]
	off := min(pos-d.at[i], t.end-t.start)
	line, col := advance(d.query[t.start:t.start+off], t.line, t.col)
	return location.SourceLocation{Line: line, Column: col}
}

// relocate places errors graphql-go made in the query.
func (d *document) relocate(errs []gqlerrors.FormattedError) {
	for i, fe := range errs {
		var ge *gqlerrors.Error
		if !errors.As(fe.OriginalError(), &ge) || len(ge.Positions) == 0 {
			continue
		}
		locs := make([]location.SourceLocation, 0, len(ge.Positions))
		for _, p := range ge.Positions {
			locs = append(locs, d.locate(p))
		}
		errs[i].Locations = locs
	}
}

// bound refuses documents that are too large for graphql-go's validator
// to check quickly: too many parts written, a fragment that spreads
// itself, or too many selections once fragments are spread, counted over
// every operation and fragment, since all are validated.
func (d *document) bound(limits Limits) *requestError {
	if n := countParts(d.ast, limits.budget()); n > limits.budget() {
		return refuse(http.StatusBadRequest, errorf(CodeQueryTooComplex, "",
			"the request has more than %d definitions, selections, arguments, directives and variables", limits.budget()))
	}
	if n, at := nested(d.ast, limits.nesting()); n > limits.nesting() {
		// Refused before graphql-go's validator, whose cost grows with
		// the depth of every part.
		rerr := refuse(http.StatusBadRequest, errorf(CodeQueryTooDeep, "",
			"the request nests fields %d deep; fields of content may nest at most %d deep (GRAPHQL_MAX_DEPTH), introspection fields %d (GRAPHQL_MAX_INTROSPECTION_DEPTH)",
			n, limits.MaxDepth, limits.MaxIntrospectionDepth))
		if at.Loc != nil {
			rerr.errs[0].Locations = []location.SourceLocation{d.locate(at.Loc.Start)}
		}
		return rerr
	}
	frags := map[string][]*ast.FragmentDefinition{}
	for _, def := range d.ast.Definitions {
		if f, ok := def.(*ast.FragmentDefinition); ok && f.Name != nil {
			frags[f.Name.Value] = append(frags[f.Name.Value], f)
		}
	}
	if f, path := fragmentCycle(d.ast, frags); f != nil {
		msg := fmt.Sprintf("Cannot spread fragment %q within itself", f.Name.Value)
		if len(path) > 0 {
			msg += fmt.Sprintf(" via %s", strings.Join(path, ", "))
		}
		var locs []location.SourceLocation
		if f.Loc != nil {
			locs = []location.SourceLocation{d.locate(f.Loc.Start)}
		}
		return &requestError{status: http.StatusBadRequest, errs: []gqlerrors.FormattedError{{
			Message: msg + ".", Locations: locs, Extensions: map[string]any{"code": CodeValidationFailed},
		}}}
	}
	if spread(d.ast, frags, limits.budget()) > limits.budget() {
		return refuse(http.StatusBadRequest, errorf(CodeQueryTooComplex, "",
			"the request selects more than %d fields once its fragments are spread (all operations and fragments together)", limits.budget()))
	}
	return nil
}

// countParts counts the parts of a document, stopping past limit.
func countParts(doc *ast.Document, limit int) int {
	n := 0
	dirs := func(ds []*ast.Directive) {
		for _, dir := range ds {
			n += 1 + len(dir.Arguments)
		}
	}
	var set func(s *ast.SelectionSet)
	set = func(s *ast.SelectionSet) {
		if s == nil {
			return
		}
		for _, sel := range s.Selections {
			if n++; n > limit {
				return
			}
			switch sel := sel.(type) {
			case *ast.Field:
				n += len(sel.Arguments)
				dirs(sel.Directives)
				set(sel.SelectionSet)
			case *ast.InlineFragment:
				dirs(sel.Directives)
				set(sel.SelectionSet)
			case *ast.FragmentSpread:
				dirs(sel.Directives)
			}
		}
	}
	for _, def := range doc.Definitions {
		if n++; n > limit {
			break
		}
		switch def := def.(type) {
		case *ast.OperationDefinition:
			n += len(def.VariableDefinitions)
			dirs(def.Directives)
			set(def.SelectionSet)
		case *ast.FragmentDefinition:
			n += len(def.VariableDefinitions)
			dirs(def.Directives)
			set(def.SelectionSet)
		}
	}
	return n
}

// spreadNames lists the fragments a selection set spreads, at any depth.
func spreadNames(s *ast.SelectionSet, out []string) []string {
	if s == nil {
		return out
	}
	for _, sel := range s.Selections {
		switch sel := sel.(type) {
		case *ast.Field:
			out = spreadNames(sel.SelectionSet, out)
		case *ast.InlineFragment:
			out = spreadNames(sel.SelectionSet, out)
		case *ast.FragmentSpread:
			if sel.Name != nil {
				out = append(out, sel.Name.Value)
			}
		}
	}
	return out
}

// fragmentCycle finds a fragment that spreads itself, directly or through
// others, and the fragments on the way. Every definition of a name counts,
// so that a repeated name cannot hide a cycle.
func fragmentCycle(doc *ast.Document, frags map[string][]*ast.FragmentDefinition) (*ast.FragmentDefinition, []string) {
	spreads := map[string][]string{}
	for name, defs := range frags {
		for _, f := range defs {
			spreads[name] = spreadNames(f.SelectionSet, spreads[name])
		}
	}
	const (
		unseen = iota
		onPath
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(name string) (start string, found bool)
	visit = func(name string) (string, bool) {
		switch state[name] {
		case onPath:
			return name, true
		case done:
			return "", false
		}
		state[name] = onPath
		path = append(path, name)
		for _, next := range spreads[name] {
			if _, known := frags[next]; !known {
				continue
			}
			if start, found := visit(next); found {
				return start, true
			}
		}
		path = path[:len(path)-1]
		state[name] = done
		return "", false
	}
	for _, def := range doc.Definitions {
		f, ok := def.(*ast.FragmentDefinition)
		if !ok || f.Name == nil {
			continue
		}
		if start, found := visit(f.Name.Value); found {
			i := slices.Index(path, start)
			return frags[start][0], path[i+1:]
		}
	}
	return nil, nil
}

// spread counts the selections of every operation and fragment once
// fragments are spread (a fragment's count is worked out once), stopping
// past limit. Fragments must not form cycles.
func spread(doc *ast.Document, frags map[string][]*ast.FragmentDefinition, limit int) int {
	memo := map[string]int{}
	var set func(s *ast.SelectionSet) int
	fragment := func(name string) int {
		if n, ok := memo[name]; ok {
			return n
		}
		n := 0
		for _, f := range frags[name] {
			n = min(n+set(f.SelectionSet), limit+1)
		}
		memo[name] = n
		return n
	}
	set = func(s *ast.SelectionSet) int {
		if s == nil {
			return 0
		}
		n := 0
		for _, sel := range s.Selections {
			n++
			switch sel := sel.(type) {
			case *ast.Field:
				n += set(sel.SelectionSet)
			case *ast.InlineFragment:
				n += set(sel.SelectionSet)
			case *ast.FragmentSpread:
				if sel.Name != nil {
					n += fragment(sel.Name.Value)
				}
			}
			if n > limit {
				return limit + 1
			}
		}
		return n
	}
	total := 0
	for _, def := range doc.Definitions {
		switch def := def.(type) {
		case *ast.OperationDefinition:
			total += set(def.SelectionSet)
		case *ast.FragmentDefinition:
			total += set(def.SelectionSet)
		}
		if total > limit {
			return limit + 1
		}
	}
	return total
}
