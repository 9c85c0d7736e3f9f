package graphql

import (
	"fmt"

	gql "github.com/graphql-go/graphql"
	"github.com/graphql-go/graphql/gqlerrors"
	"github.com/graphql-go/graphql/language/ast"
	"github.com/graphql-go/graphql/language/location"
)

// validationRules are graphql-go's rules but OverlappingFieldsCanBeMerged,
// which compares fields pairwise (seconds for a few thousand fields of
// one name) and which mergeable replaces.
func validationRules() []gql.ValidationRuleFn {
	return []gql.ValidationRuleFn{
		gql.ArgumentsOfCorrectTypeRule,
		gql.DefaultValuesOfCorrectTypeRule,
		gql.FieldsOnCorrectTypeRule,
		gql.FragmentsOnCompositeTypesRule,
		gql.KnownArgumentNamesRule,
		gql.KnownDirectivesRule,
		gql.KnownFragmentNamesRule,
		gql.KnownTypeNamesRule,
		gql.LoneAnonymousOperationRule,
		gql.NoFragmentCyclesRule,
		gql.NoUndefinedVariablesRule,
		gql.NoUnusedFragmentsRule,
		gql.NoUnusedVariablesRule,
		gql.PossibleFragmentSpreadsRule,
		gql.ProvidedNonNullArgumentsRule,
		gql.ScalarLeafsRule,
		gql.UniqueArgumentNamesRule,
		gql.UniqueFragmentNamesRule,
		gql.UniqueInputFieldNamesRule,
		gql.UniqueOperationNamesRule,
		gql.UniqueVariableNamesRule,
		gql.VariablesAreInputTypesRule,
		gql.VariablesInAllowedPositionRule,
	}
}

// mergeable checks a valid document as OverlappingFieldsCanBeMerged does,
// in time linear in its fields once fragments are spread: the fields a
// selection set answers under one name must be one field with the same
// arguments, and their selections taken together mergeable in turn. The
// schema has no interfaces or unions, so the fields of a valid selection
// set all have one parent type and need no other comparison.
func (d *document) mergeable() []gqlerrors.FormattedError {
	frags := map[string]*ast.FragmentDefinition{}
	for _, def := range d.ast.Definitions {
		if f, ok := def.(*ast.FragmentDefinition); ok {
			frags[f.Name.Value] = f
		}
	}
	var errs []gqlerrors.FormattedError
	for _, def := range d.ast.Definitions {
		var set *ast.SelectionSet
		switch def := def.(type) {
		case *ast.OperationDefinition:
			set = def.SelectionSet
		case *ast.FragmentDefinition:
			set = def.SelectionSet
		}
		for _, c := range conflicts([]*ast.SelectionSet{set}, frags) {
			locs := []location.SourceLocation{d.locate(c.a.Loc.Start), d.locate(c.b.Loc.Start)}
			errs = append(errs, gqlerrors.FormattedError{
				Message: fmt.Sprintf("Fields %q conflict because %s. Use different aliases on the fields to fetch both if this was intentional.",
					c.name, c.reason),
				Locations:  locs,
				Extensions: map[string]any{"code": CodeValidationFailed},
			})
		}
	}
	return errs
}

// conflict is two fields answering under one name that cannot be merged.
type conflict struct {
	name, reason string
	a, b         *ast.Field
}

// conflicts finds the conflicts among the fields the sets select, taken
// as one selection set.
func conflicts(sets []*ast.SelectionSet, frags map[string]*ast.FragmentDefinition) []conflict {
	var names []string
	byName := map[string][]*ast.Field{}
	var collect func(s *ast.SelectionSet)
	collect = func(s *ast.SelectionSet) {
		if s == nil {
			return
		}
		for _, sel := range s.Selections {
			switch sel := sel.(type) {
			case *ast.Field:
				name := sel.Name.Value
				if sel.Alias != nil {
					name = sel.Alias.Value
				}
				if _, seen := byName[name]; !seen {
					names = append(names, name)
				}
				byName[name] = append(byName[name], sel)
			case *ast.InlineFragment:
				collect(sel.SelectionSet)
			case *ast.FragmentSpread:
				if f, ok := frags[sel.Name.Value]; ok {
					collect(f.SelectionSet)
				}
			}
		}
	}
	for _, s := range sets {
		collect(s)
	}
	var out []conflict
	for _, name := range names {
		fields := byName[name]
		first := fields[0]
		reason := ""
		var other *ast.Field
		for _, f := range fields[1:] {
			switch {
			case f.Name.Value != first.Name.Value:
				reason = fmt.Sprintf("%s and %s are different fields", first.Name.Value, f.Name.Value)
			case !sameArguments(first.Arguments, f.Arguments):
				reason = "they have differing arguments"
			default:
				continue
			}
			other = f
			break
		}
		if other != nil {
			out = append(out, conflict{name: name, reason: reason, a: first, b: other})
			continue
		}
		subs := make([]*ast.SelectionSet, 0, len(fields))
		for _, f := range fields {
			subs = append(subs, f.SelectionSet)
		}
		inner := conflicts(subs, frags)
		if len(fields) == 1 {
			out = append(out, inner...) // within the one field's selection
		} else if len(inner) > 0 {
			out = append(out, conflict{name: name, a: first, b: fields[1],
				reason: fmt.Sprintf("subfields %q conflict because %s", inner[0].name, inner[0].reason)})
		}
	}
	return out
}

func sameArguments(a, b []*ast.Argument) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		found := false
		for _, y := range b {
			if x.Name.Value == y.Name.Value {
				found = sameValue(x.Value, y.Value)
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// sameValue compares values as written, as graphql-go does by printing
// them.
func sameValue(a, b ast.Value) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if a.GetKind() != b.GetKind() {
		return false
	}
	switch a := a.(type) {
	case *ast.ListValue:
		b := b.(*ast.ListValue)
		if len(a.Values) != len(b.Values) {
			return false
		}
		for i := range a.Values {
			if !sameValue(a.Values[i], b.Values[i]) {
				return false
			}
		}
		return true
	case *ast.ObjectValue:
		b := b.(*ast.ObjectValue)
		if len(a.Fields) != len(b.Fields) {
			return false
		}
		for i := range a.Fields {
			if a.Fields[i].Name.Value != b.Fields[i].Name.Value || !sameValue(a.Fields[i].Value, b.Fields[i].Value) {
				return false
			}
		}
		return true
	case *ast.Variable:
		return a.Name.Value == b.(*ast.Variable).Name.Value
	}
	return a.GetValue() == b.GetValue()
}
