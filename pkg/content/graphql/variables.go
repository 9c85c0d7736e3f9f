package graphql

import (
	"encoding/json"

	"github.com/graphql-go/graphql/language/ast"
)

// numbersOfVariables gives the variables op declares as Int or Float
// (lists of them too) the numbers graphql-go takes. Variables are read
// with their numbers as json.Number, so that free-form JSON values keep
// them exactly as written, and graphql-go's Int and Float refuse
// json.Number. A number that is not one is left as it is, for graphql-go
// to refuse with the variable's name.
func numbersOfVariables(op *ast.OperationDefinition, vars map[string]any) {
	for _, def := range op.VariableDefinitions {
		if def.Variable == nil || def.Variable.Name == nil {
			continue
		}
		name := def.Variable.Name.Value
		if v, ok := vars[name]; ok {
			vars[name] = numberAs(def.Type, v)
		}
	}
}

// numberAs converts v to the number of t (Int, Float, or lists of them).
func numberAs(t ast.Type, v any) any {
	switch t := t.(type) {
	case *ast.NonNull:
		return numberAs(t.Type, v)
	case *ast.List:
		if l, ok := v.([]any); ok {
			out := make([]any, len(l))
			for i, e := range l {
				out[i] = numberAs(t.Type, e)
			}
			return out
		}
		return numberAs(t.Type, v) // a single value stands for a list of one
	case *ast.Named:
		n, ok := v.(json.Number)
		if !ok || t.Name == nil {
			return v
		}
		switch t.Name.Value {
		case "Int":
			if i, err := n.Int64(); err == nil {
				return int(i)
			}
		case "Float":
			if f, err := n.Float64(); err == nil {
				return f
			}
		}
	}
	return v
}
