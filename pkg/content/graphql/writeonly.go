package graphql

import (
	"strings"

	"github.com/graphql-go/graphql/language/ast"
)

// readsBack returns the first field of a mutation's results that tells
// more of a record than what identifies it and when it changed (its IDs,
// createdAt, updatedAt, revision, __typename), or nil. A token that may write
// content but not read it gets no more than that back: otherwise any
// update with an empty change would read a whole record. Fragments are
// followed once each; the document is not validated yet.
func readsBack(doc *ast.Document, op *ast.OperationDefinition) *ast.Field {
	frags := map[string]*ast.FragmentDefinition{}
	for _, d := range doc.Definitions {
		if f, ok := d.(*ast.FragmentDefinition); ok && f.Name != nil {
			frags[f.Name.Value] = f
		}
	}
	seen := map[string]bool{}
	var walk func(set *ast.SelectionSet) *ast.Field
	walk = func(set *ast.SelectionSet) *ast.Field {
		if set == nil {
			return nil
		}
		for _, s := range set.Selections {
			switch s := s.(type) {
			case *ast.Field:
				name := s.Name.Value
				if s.SelectionSet != nil || !(name == "__typename" || strings.HasSuffix(name, "Id") || name == "createdAt" || name == "updatedAt" || name == "revision") {
					return s
				}
			case *ast.InlineFragment:
				if f := walk(s.SelectionSet); f != nil {
					return f
				}
			case *ast.FragmentSpread:
				name := s.Name.Value
				if f, ok := frags[name]; ok && !seen[name] {
					seen[name] = true
					if f := walk(f.SelectionSet); f != nil {
						return f
					}
				}
			}
		}
		return nil
	}
	if op.SelectionSet == nil {
		return nil
	}
	for _, s := range op.SelectionSet.Selections {
		// The mutations themselves, then what each answers.
		switch s := s.(type) {
		case *ast.Field:
			if f := walk(s.SelectionSet); f != nil {
				return f
			}
		default:
			if f := walk(&ast.SelectionSet{Selections: []ast.Selection{s}}); f != nil {
				return f
			}
		}
	}
	return nil
}
