package graphql

import (
	"strings"

	"github.com/graphql-go/graphql/language/ast"
)

// Limits protect the server from costly requests.
type Limits struct {
	// MaxBodyBytes bounds a request body; large enough for thousands of
	// entity values in one mutation.
	MaxBodyBytes int64
	// MaxDepth bounds how deeply fields nest.
	MaxDepth int
	// MaxFields bounds the number of fields a request selects once its
	// fragments are spread: a measure of how much work it asks for.
	MaxFields int
}

// Defaults for Limits.
const (
	DefaultMaxBodyBytes = 4 << 20
	DefaultMaxDepth     = 10
	DefaultMaxFields    = 500
)

func (l Limits) withDefaults() Limits {
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxFields <= 0 {
		l.MaxFields = DefaultMaxFields
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

// measure returns the depth of the operation's fields and how many it
// selects, fragments spread. Introspection fields are not counted: what
// they return is bounded by the schema. The document's size once spread
// is bounded before (document.bound), and counting stops past maxFields.
func measure(doc *ast.Document, op *ast.OperationDefinition, maxFields int) (depth, fields int) {
	frags := map[string]*ast.FragmentDefinition{}
	for _, d := range doc.Definitions {
		if f, ok := d.(*ast.FragmentDefinition); ok {
			frags[f.Name.Value] = f
		}
	}
	var walk func(set *ast.SelectionSet, level int, seen map[string]bool)
	walk = func(set *ast.SelectionSet, level int, seen map[string]bool) {
		if set == nil || fields > maxFields {
			return
		}
		for _, s := range set.Selections {
			switch s := s.(type) {
			case *ast.Field:
				if strings.HasPrefix(s.Name.Value, "__") {
					continue
				}
				fields++
				depth = max(depth, level)
				walk(s.SelectionSet, level+1, seen)
			case *ast.InlineFragment:
				walk(s.SelectionSet, level, seen)
			case *ast.FragmentSpread:
				name := s.Name.Value
				if f, ok := frags[name]; ok && !seen[name] {
					seen[name] = true
					walk(f.SelectionSet, level, seen)
					delete(seen, name)
				}
			}
		}
	}
	walk(op.SelectionSet, 1, map[string]bool{})
	return depth, fields
}
