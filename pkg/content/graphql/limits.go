package graphql

import (
	"net/netip"
	"strings"

	"github.com/graphql-go/graphql/language/ast"
)

// Limits protect the server from costly requests.
type Limits struct {
	// MaxBodyBytes bounds a request body; large enough for thousands of
	// entity values in one mutation.
	MaxBodyBytes int64
	// MaxDepth bounds how deeply fields of content nest.
	MaxDepth int
	// MaxIntrospectionDepth bounds how deeply fields nest under __schema
	// and __type; GraphiQL's own query nests 15 deep.
	MaxIntrospectionDepth int
	// MaxFields bounds the number of fields a request selects once its
	// fragments are spread: a measure of how much work it asks for.
	MaxFields int
	// MaxCost bounds the fields one answer may hold: estimated before the
	// request runs (each list's items counted, see ListSize) and counted
	// while it is resolved, each object's before graphql-go builds it.
	// graphql-go allocates about 2 KB per field it answers.
	MaxCost int
	// ListSize is how many items the estimate assumes a list of records,
	// or of objects within a record, returns: nothing in the schema or the
	// store bounds them.
	ListSize int
	// MaxAnswerBytes bounds the JSON of one answer, charged as fields are
	// resolved, so that an answer over it is refused before it is built.
	MaxAnswerBytes int64
	// MaxReaderAnswerBytes bounds it for a token that cannot write
	// content: a runtime's, which anyone can read from a web page. What a
	// runtime reads is kilobytes; an author's export may be megabytes.
	MaxReaderAnswerBytes int64
	// AnswerBudgetBytes bounds the JSON of all answers being built at
	// once, shared fairly between organizations, apps and tokens (see
	// answerBudget).
	AnswerBudgetBytes int64
	// WebhookAllow are the networks a webhook's URL may reach though
	// not public (egress.Check): none by default.
	WebhookAllow []netip.Prefix
	// PublishesPerMinute bounds the versions one app makes a minute
	// (publishes, rollbacks, publishing turned on, catalogue writes
	// published), a burst of as many: every version is kept, each a row
	// of keys per record, and tells the app's webhooks.
	PublishesPerMinute int
}

// Defaults for Limits.
const (
	DefaultMaxBodyBytes          = 4 << 20
	DefaultMaxDepth              = 10
	DefaultMaxIntrospectionDepth = 20
	DefaultMaxFields             = 500
	DefaultMaxCost               = 20_000
	DefaultListSize              = 20
	DefaultMaxAnswerBytes        = 16 << 20
	DefaultMaxReaderAnswerBytes  = 1 << 20
	DefaultAnswerBudgetBytes     = 64 << 20
	DefaultPublishesPerMinute    = 6
)

func (l Limits) withDefaults() Limits {
	if l.PublishesPerMinute <= 0 {
		l.PublishesPerMinute = DefaultPublishesPerMinute
	}
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxIntrospectionDepth <= 0 {
		l.MaxIntrospectionDepth = DefaultMaxIntrospectionDepth
	}
	if l.MaxFields <= 0 {
		l.MaxFields = DefaultMaxFields
	}
	if l.MaxCost <= 0 {
		l.MaxCost = DefaultMaxCost
	}
	if l.ListSize <= 0 {
		l.ListSize = DefaultListSize
	}
	if l.MaxAnswerBytes <= 0 {
		l.MaxAnswerBytes = DefaultMaxAnswerBytes
	}
	if l.MaxReaderAnswerBytes <= 0 {
		l.MaxReaderAnswerBytes = DefaultMaxReaderAnswerBytes
	}
	if l.AnswerBudgetBytes <= 0 {
		l.AnswerBudgetBytes = DefaultAnswerBudgetBytes
	}
	return l
}

// budget bounds the parts a document may have (definitions, selections,
// arguments, directives, variables) and the selections of all its
// operations and fragments once fragments are spread: room for any
// request within MaxFields plus GraphiQL's introspection query, and
// little enough that validating the document takes milliseconds.
func (l Limits) budget() int { return 1000 + 4*l.MaxFields }

// operation finds the operation a request runs: the one named, or the
// only one.
func operation(doc *ast.Document, name string) *ast.OperationDefinition {
	var found *ast.OperationDefinition
	count := 0
	for _, d := range doc.Definitions {
		op, ok := d.(*ast.OperationDefinition)
		if !ok {
			continue
		}
		count++
		if name == "" || (op.Name != nil && op.Name.Value == name) {
			found = op
		}
	}
	if name == "" && count != 1 {
		return nil
	}
	return found
}

// nesting is how deeply the selections of any operation or fragment
// may nest as written: fields of content or of introspection can nest no
// deeper once spread, and graphql-go's validator costs time and memory
// in proportion to each part's depth.
func (l Limits) nesting() int { return max(l.MaxDepth, l.MaxIntrospectionDepth) }

// shape is how deeply an operation's fields nest and how many it selects.
type shape struct {
	depth, metaDepth, fields int
}

// measure returns how deeply the operation's fields of content nest, how
// deeply introspection fields (under __schema and __type) do, and how
// many fields it selects, fragments spread. Introspection fields count
// among the fields; __typename, which clients add to every selection,
// does not: it is counted in the cost, on every object it is answered on
// (execution.chargeObjects). The document's size once
// spread is bounded before (document.bound), and counting stops past
// maxFields.
func measure(doc *ast.Document, op *ast.OperationDefinition, maxFields int) shape {
	frags := map[string]*ast.FragmentDefinition{}
	for _, d := range doc.Definitions {
		if f, ok := d.(*ast.FragmentDefinition); ok {
			frags[f.Name.Value] = f
		}
	}
	var sh shape
	var walk func(set *ast.SelectionSet, level int, meta bool, seen map[string]bool)
	walk = func(set *ast.SelectionSet, level int, meta bool, seen map[string]bool) {
		if set == nil || sh.fields > maxFields {
			return
		}
		for _, s := range set.Selections {
			switch s := s.(type) {
			case *ast.Field:
				name := s.Name.Value
				if name == "__typename" {
					continue
				}
				sh.fields++
				inMeta := meta || strings.HasPrefix(name, "__")
				if inMeta {
					sh.metaDepth = max(sh.metaDepth, level)
				} else {
					sh.depth = max(sh.depth, level)
				}
				walk(s.SelectionSet, level+1, inMeta, seen)
			case *ast.InlineFragment:
				walk(s.SelectionSet, level, meta, seen)
			case *ast.FragmentSpread:
				name := s.Name.Value
				if f, ok := frags[name]; ok && !seen[name] {
					seen[name] = true
					walk(f.SelectionSet, level, meta, seen)
					delete(seen, name)
				}
			}
		}
	}
	walk(op.SelectionSet, 1, false, map[string]bool{})
	return sh
}

// nested is how deeply fields nest as written in any operation or
// fragment, fragments not spread, and the first field deeper than limit.
func nested(doc *ast.Document, limit int) (int, *ast.Field) {
	deepest, at := 0, (*ast.Field)(nil)
	var walk func(set *ast.SelectionSet, level int)
	walk = func(set *ast.SelectionSet, level int) {
		if set == nil {
			return
		}
		for _, s := range set.Selections {
			switch s := s.(type) {
			case *ast.Field:
				if level == limit+1 && at == nil {
					at = s
				}
				deepest = max(deepest, level)
				walk(s.SelectionSet, level+1)
			case *ast.InlineFragment:
				walk(s.SelectionSet, level)
			}
		}
	}
	for _, d := range doc.Definitions {
		switch d := d.(type) {
		case *ast.OperationDefinition:
			walk(d.SelectionSet, 1)
		case *ast.FragmentDefinition:
			walk(d.SelectionSet, 1)
		}
	}
	return deepest, at
}
