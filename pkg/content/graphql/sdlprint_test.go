package graphql

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	gql "github.com/graphql-go/graphql"
)

// introspection asks for everything SDL shows.
const introspection = `query {
  __schema {
    queryType { name }
    mutationType { name }
    types {
      kind name description
      fields { name description args { name description type { ...T } defaultValue } type { ...T } }
      inputFields { name description type { ...T } defaultValue }
      enumValues { name description }
    }
  }
}
fragment T on __Type { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } } }`

type typeRef struct {
	Kind   string   `json:"kind"`
	Name   string   `json:"name"`
	OfType *typeRef `json:"ofType"`
}

func (t *typeRef) String() string {
	switch t.Kind {
	case "NON_NULL":
		return t.OfType.String() + "!"
	case "LIST":
		return "[" + t.OfType.String() + "]"
	}
	return t.Name
}

type inputValue struct {
	Name         string  `json:"name"`
	Description  string  `json:"description"`
	Type         typeRef `json:"type"`
	DefaultValue *string `json:"defaultValue"`
}

type fieldDef struct {
	Name        string       `json:"name"`
	Description string       `json:"description"`
	Args        []inputValue `json:"args"`
	Type        typeRef      `json:"type"`
}

type typeDef struct {
	Kind        string       `json:"kind"`
	Name        string       `json:"name"`
	Description string       `json:"description"`
	Fields      []fieldDef   `json:"fields"`
	InputFields []inputValue `json:"inputFields"`
	EnumValues  []enumValue  `json:"enumValues"`
}

type enumValue struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

var builtinScalars = []string{"Boolean", "Float", "ID", "Int", "String"}

// sdl prints the schema the endpoint serves, as introspection describes
// it: types by name, fields and arguments by name, descriptions as block
// strings. schemas/graphql/schema.graphql holds what it prints.
func (h *Handler) sdl(ctx context.Context) (string, error) {
	res := gql.Do(gql.Params{Schema: h.schema, RequestString: introspection, Context: ctx})
	if len(res.Errors) > 0 {
		return "", fmt.Errorf("introspect the schema: %v", res.Errors)
	}
	raw, err := json.Marshal(res.Data)
	if err != nil {
		return "", err
	}
	var data struct {
		Schema struct {
			QueryType    struct{ Name string }  `json:"queryType"`
			MutationType *struct{ Name string } `json:"mutationType"`
			Types        []typeDef              `json:"types"`
		} `json:"__schema"`
	}
	if err := json.Unmarshal(raw, &data); err != nil {
		return "", err
	}
	types := data.Schema.Types
	slices.SortFunc(types, func(a, b typeDef) int { return strings.Compare(a.Name, b.Name) })
	var b strings.Builder
	for _, t := range types {
		if strings.HasPrefix(t.Name, "__") || (t.Kind == "SCALAR" && slices.Contains(builtinScalars, t.Name)) {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		description(&b, "", t.Description)
		switch t.Kind {
		case "SCALAR":
			fmt.Fprintf(&b, "scalar %s\n", t.Name)
		case "OBJECT":
			fmt.Fprintf(&b, "type %s {\n", t.Name)
			for _, f := range t.Fields {
				description(&b, "  ", f.Description)
				fmt.Fprintf(&b, "  %s%s: %s\n", f.Name, args(f.Args), f.Type.String())
			}
			b.WriteString("}\n")
		case "INPUT_OBJECT":
			fmt.Fprintf(&b, "input %s {\n", t.Name)
			fields := slices.Clone(t.InputFields)
			slices.SortFunc(fields, func(a, b inputValue) int { return strings.Compare(a.Name, b.Name) })
			for _, f := range fields {
				description(&b, "  ", f.Description)
				fmt.Fprintf(&b, "  %s: %s%s\n", f.Name, f.Type.String(), defaultValue(f.DefaultValue))
			}
			b.WriteString("}\n")
		case "ENUM":
			fmt.Fprintf(&b, "enum %s {\n", t.Name)
			// graphql-go keeps an enum's values in a map: in name order.
			slices.SortFunc(t.EnumValues, func(a, b enumValue) int { return strings.Compare(a.Name, b.Name) })
			for _, v := range t.EnumValues {
				description(&b, "  ", v.Description)
				fmt.Fprintf(&b, "  %s\n", v.Name)
			}
			b.WriteString("}\n")
		default:
			return "", fmt.Errorf("type %s: kind %s is not printed", t.Name, t.Kind)
		}
	}
	return b.String(), nil
}

func description(b *strings.Builder, indent, d string) {
	if d == "" {
		return
	}
	fmt.Fprintf(b, "%s\"\"\"%s\"\"\"\n", indent, strings.ReplaceAll(d, `"""`, `\"""`))
}

// args prints a field's arguments by name; on lines of their own when any
// has a description.
func args(list []inputValue) string {
	if len(list) == 0 {
		return ""
	}
	list = slices.Clone(list)
	slices.SortFunc(list, func(a, b inputValue) int { return strings.Compare(a.Name, b.Name) })
	described := slices.ContainsFunc(list, func(a inputValue) bool { return a.Description != "" })
	var b strings.Builder
	b.WriteString("(")
	for i, a := range list {
		if described {
			b.WriteString("\n")
			description(&b, "    ", a.Description)
			b.WriteString("    ")
		} else if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %s%s", a.Name, a.Type.String(), defaultValue(a.DefaultValue))
	}
	if described {
		b.WriteString("\n  ")
	}
	b.WriteString(")")
	return b.String()
}

func defaultValue(v *string) string {
	if v == nil {
		return ""
	}
	return " = " + *v
}
