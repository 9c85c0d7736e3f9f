package graphql

import (
	"encoding/json"
	"math"

	gql "github.com/graphql-go/graphql"
	"github.com/graphql-go/graphql/language/ast"
)

// newJSONScalar carries free-form parts (data, nlu, responses, paths) as
// plain JSON values.
func newJSONScalar() *gql.Scalar {
	return gql.NewScalar(gql.ScalarConfig{
		Name:        "JSON",
		Description: "Any JSON value: free-form parts such as data, nlu, responses and paths.",
		Serialize:   func(v any) any { return v },
		ParseValue:  func(v any) any { return v },
		ParseLiteral: func(v ast.Value) any {
			// nil makes the value invalid: graphql-go gives literals no
			// variables, so one inside would be stored as null.
			out, ok := literal(v)
			if !ok {
				return nil
			}
			return out
		},
	})
}

// newRevisionScalar is a record's revision: a whole number, in answers
// as in arguments. Not Int: variables keep JSON numbers as json.Number,
// which Int does not take, and a revision may outgrow 32 bits; up to 2^53,
// which JavaScript clients read exactly.
func newRevisionScalar() *gql.Scalar {
	parse := func(v any) any {
		var n int64
		switch v := v.(type) {
		case json.Number:
			var err error
			if n, err = v.Int64(); err != nil {
				return nil
			}
		case float64:
			if v != math.Trunc(v) || math.Abs(v) >= 1<<53 {
				return nil
			}
			n = int64(v)
		case int:
			n = int64(v)
		case int64:
			n = v
		default:
			return nil
		}
		if n < 0 || n >= 1<<53 {
			return nil
		}
		return n
	}
	return gql.NewScalar(gql.ScalarConfig{
		Name:        "Revision",
		Description: "A record's revision: a whole number from 0 to 2^53-1.",
		Serialize:   func(v any) any { return v },
		ParseValue:  parse,
		ParseLiteral: func(v ast.Value) any {
			if iv, ok := v.(*ast.IntValue); ok {
				return parse(json.Number(iv.Value))
			}
			return nil
		},
	})
}

// literal turns an inline GraphQL value into the JSON value it spells;
// ok is false when it holds a variable.
func literal(v ast.Value) (any, bool) {
	switch v := v.(type) {
	case *ast.ObjectValue:
		m := make(map[string]any, len(v.Fields))
		for _, f := range v.Fields {
			x, ok := literal(f.Value)
			if !ok {
				return nil, false
			}
			m[f.Name.Value] = x
		}
		return m, true
	case *ast.ListValue:
		out := make([]any, 0, len(v.Values))
		for _, e := range v.Values {
			x, ok := literal(e)
			if !ok {
				return nil, false
			}
			out = append(out, x)
		}
		return out, true
	case *ast.IntValue:
		return json.Number(v.Value), true
	case *ast.FloatValue:
		// GraphQL numbers are spelled as JSON's; kept as written, as
		// numbers in variables are, even beyond a float64.
		return json.Number(v.Value), true
	case *ast.StringValue:
		return v.Value, true
	case *ast.BooleanValue:
		return v.Value, true
	case *ast.EnumValue:
		return v.Value, true
	}
	return nil, false
}

// The schema mirrors schemas/graphql/schema.graphql; a test holds the two
// together.

func nonNull(t gql.Type) gql.Type { return gql.NewNonNull(t) }

func listOf(t gql.Type) gql.Type { return gql.NewNonNull(gql.NewList(gql.NewNonNull(t))) }

func field(t gql.Type, desc string) *gql.Field { return &gql.Field{Type: t, Description: desc} }

func input(t gql.Type, desc string) *gql.InputObjectFieldConfig {
	return &gql.InputObjectFieldConfig{Type: t, Description: desc}
}

// intentFields are the fields a handler shares with its intent.
func intentFields(jsonScalar, revision *gql.Scalar, slot *gql.Object) gql.Fields {
	return gql.Fields{
		"appId":             field(nonNull(gql.ID), "The app the record belongs to."),
		"organizationId":    field(nonNull(gql.ID), "The organization owning the app."),
		"intentId":          field(nonNull(gql.ID), "The identifier, unique within the app."),
		"name":              field(gql.String, ""),
		"utterancePatterns": field(listOf(gql.String), "Phrasings that select the intent; ${slot} marks a slot."),
		"slots":             field(listOf(slot), ""),
		"langCode":          field(gql.String, ""),
		"defaultLocale":     field(gql.String, ""),
		"locales":           field(jsonScalar, ""),
		"contexts":          field(jsonScalar, ""),
		"substitutions":     field(jsonScalar, ""),
		"nlu":               field(jsonScalar, ""),
		"graphCoords":       field(jsonScalar, ""),
		"createdAt":         field(nonNull(gql.String), "When the record was created (RFC 3339, UTC)."),
		"updatedAt":         field(nonNull(gql.String), "When the record last changed (RFC 3339, UTC)."),
		"revision":          field(nonNull(revision), "This state's revision: send it back as ifRevision, and a write made after another changed the record is refused with CONFLICT."),
		"document":          field(nonNull(jsonScalar), "The whole record as stored, every field included, as REST answers it."),
	}
}

func intentInputFields(jsonScalar *gql.Scalar, slotInput *gql.InputObject, withID bool) gql.InputObjectConfigFieldMap {
	f := gql.InputObjectConfigFieldMap{
		"name":              input(gql.String, ""),
		"utterancePatterns": input(gql.NewList(gql.NewNonNull(gql.String)), ""),
		"slots":             input(gql.NewList(gql.NewNonNull(slotInput)), "Each slot's type is an entityId of the app or a built-in type."),
		"langCode":          input(gql.String, ""),
		"defaultLocale":     input(gql.String, ""),
		"locales":           input(jsonScalar, ""),
		"contexts":          input(jsonScalar, ""),
		"substitutions":     input(jsonScalar, ""),
		"nlu":               input(jsonScalar, ""),
		"graphCoords":       input(jsonScalar, ""),
		"extra":             input(jsonScalar, "Further fields of the record, as a JSON object; kept as they are."),
	}
	if withID {
		f["intentId"] = input(nonNull(gql.ID), "")
	}
	return f
}

func merge(a, b gql.Fields) gql.Fields {
	out := gql.Fields{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func mergeInput(a, b gql.InputObjectConfigFieldMap) gql.InputObjectConfigFieldMap {
	out := gql.InputObjectConfigFieldMap{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// types are the schema's named types, for the resolvers to refer to.
type types struct {
	intent, handler, entity *gql.Object
	revision, json          *gql.Scalar
}

// buildTypes makes the schema's object types and the inputs of its
// mutations, by name.
func buildTypes() (types, map[string]*gql.InputObject) {
	jsonScalar, revision := newJSONScalar(), newRevisionScalar()
	slot, slotInput := slotTypes(jsonScalar)
	handlerOnly, handlerOnlyInput := handlerOnlyFields(jsonScalar)
	value, valueInput := entityValueTypes(jsonScalar)
	entityInput := entityInputFields(jsonScalar, valueInput)
	t := types{
		intent: gql.NewObject(gql.ObjectConfig{Name: "Intent", Description: "An intent of the app's model.", Fields: metered(intentFields(jsonScalar, revision, slot))}),
		handler: gql.NewObject(gql.ObjectConfig{Name: "Handler", Description: "An intent plus how to respond to it.",
			Fields: metered(merge(intentFields(jsonScalar, revision, slot), handlerOnly))}),
		entity:   entityType(jsonScalar, revision, value),
		revision: revision,
		json:     jsonScalar,
	}
	inputs := map[string]*gql.InputObject{
		"AddIntentInput":     gql.NewInputObject(gql.InputObjectConfig{Name: "AddIntentInput", Fields: intentInputFields(jsonScalar, slotInput, true)}),
		"UpdateIntentInput":  gql.NewInputObject(gql.InputObjectConfig{Name: "UpdateIntentInput", Description: "Fields given replace the stored ones; others stay.", Fields: intentInputFields(jsonScalar, slotInput, false)}),
		"AddHandlerInput":    gql.NewInputObject(gql.InputObjectConfig{Name: "AddHandlerInput", Fields: mergeInput(intentInputFields(jsonScalar, slotInput, true), handlerOnlyInput)}),
		"UpdateHandlerInput": gql.NewInputObject(gql.InputObjectConfig{Name: "UpdateHandlerInput", Description: "Fields given replace the stored ones; others stay.", Fields: mergeInput(intentInputFields(jsonScalar, slotInput, false), handlerOnlyInput)}),
		"AddEntityInput": gql.NewInputObject(gql.InputObjectConfig{Name: "AddEntityInput", Fields: mergeInput(entityInput, gql.InputObjectConfigFieldMap{
			"appId":    input(gql.ID, "The app; may be left out with an app token."),
			"entityId": input(nonNull(gql.ID), ""),
		})}),
		"UpdateEntityInput": gql.NewInputObject(gql.InputObjectConfig{Name: "UpdateEntityInput", Description: "Fields given replace the stored ones; others stay.", Fields: entityInput}),
		"EntityValueInput":  valueInput,
	}
	return t, inputs
}

// slotTypes are an intent's slot, as answered and as given.
func slotTypes(jsonScalar *gql.Scalar) (*gql.Object, *gql.InputObject) {
	slot := gql.NewObject(gql.ObjectConfig{Name: "Slot", Fields: metered(gql.Fields{
		"name":   field(nonNull(gql.String), ""),
		"type":   field(nonNull(gql.String), "An entityId of the app or a built-in type."),
		"isList": field(gql.Boolean, ""),
		"nlu":    field(jsonScalar, ""),
	})})
	slotInput := gql.NewInputObject(gql.InputObjectConfig{Name: "SlotInput", Fields: gql.InputObjectConfigFieldMap{
		"name":   input(nonNull(gql.String), ""),
		"type":   input(nonNull(gql.String), ""),
		"isList": input(gql.Boolean, ""),
		"nlu":    input(jsonScalar, ""),
	}})
	return slot, slotInput
}

// handlerOnlyFields are what a handler has beyond its intent's fields:
// its content, forward and redirect maps (each a list of keys) and its
// data, as answered and as given.
func handlerOnlyFields(jsonScalar *gql.Scalar) (gql.Fields, gql.InputObjectConfigFieldMap) {
	contentEntry := gql.NewObject(gql.ObjectConfig{Name: "ContentEntry", Description: "One key of a handler's content map.",
		Fields: metered(gql.Fields{
			"key":             field(nonNull(gql.String), ""),
			"handlerResponse": field(listOf(jsonScalar), "The responses under the key."),
		})})
	pathsEntry := gql.NewObject(gql.ObjectConfig{Name: "PathsEntry", Description: "One key of a handler's forward or redirect map.",
		Fields: metered(gql.Fields{
			"key":   field(nonNull(gql.String), ""),
			"paths": field(listOf(jsonScalar), "Paths, each an object with at least an intentId."),
		})})
	contentEntryInput := gql.NewInputObject(gql.InputObjectConfig{Name: "ContentEntryInput", Fields: gql.InputObjectConfigFieldMap{
		"key":             input(nonNull(gql.String), ""),
		"handlerResponse": input(listOf(jsonScalar), ""),
	}})
	pathsEntryInput := gql.NewInputObject(gql.InputObjectConfig{Name: "PathsEntryInput", Fields: gql.InputObjectConfigFieldMap{
		"key":   input(nonNull(gql.String), ""),
		"paths": input(listOf(jsonScalar), ""),
	}})
	fields := gql.Fields{
		"type":        field(gql.String, "For example InSessionIntent or ConversationHandler."),
		"content":     field(listOf(contentEntry), "The content map as a list of keys."),
		"forward":     field(listOf(pathsEntry), "The forward map as a list of keys."),
		"redirect":    field(listOf(pathsEntry), "The redirect map as a list of keys."),
		"data":        field(jsonScalar, ""),
		"permissions": field(jsonScalar, ""),
	}
	inputs := gql.InputObjectConfigFieldMap{
		"type":        input(gql.String, ""),
		"content":     input(gql.NewList(gql.NewNonNull(contentEntryInput)), "Replaces the whole content map; keys must be unique."),
		"forward":     input(gql.NewList(gql.NewNonNull(pathsEntryInput)), "Replaces the whole forward map; keys must be unique."),
		"redirect":    input(gql.NewList(gql.NewNonNull(pathsEntryInput)), "Replaces the whole redirect map; keys must be unique."),
		"data":        input(jsonScalar, ""),
		"permissions": input(jsonScalar, ""),
	}
	return fields, inputs
}

// entityValueTypes are a value of an entity, as answered and as given.
func entityValueTypes(jsonScalar *gql.Scalar) (*gql.Object, *gql.InputObject) {
	value := gql.NewObject(gql.ObjectConfig{Name: "EntityValue", Fields: metered(gql.Fields{
		"name":        field(nonNull(gql.String), ""),
		"canonicalId": field(gql.String, ""),
		"synonyms":    field(listOf(gql.String), ""),
	})})
	valueInput := gql.NewInputObject(gql.InputObjectConfig{Name: "EntityValueInput", Fields: gql.InputObjectConfigFieldMap{
		"name":        input(nonNull(gql.String), ""),
		"canonicalId": input(gql.String, ""),
		"synonyms":    input(gql.NewList(gql.NewNonNull(gql.String)), ""),
		"extra":       input(jsonScalar, "Further fields of the value, as a JSON object."),
	}})
	return value, valueInput
}

// entityInputFields are the fields an entity is added or updated with.
func entityInputFields(jsonScalar *gql.Scalar, valueInput *gql.InputObject) gql.InputObjectConfigFieldMap {
	return gql.InputObjectConfigFieldMap{
		"displayName": input(gql.String, ""),
		"type":        input(gql.String, "REGEX or VALUE_SYNONYMS."),
		"values":      input(gql.NewList(gql.NewNonNull(valueInput)), "Replaces all values."),
		"nlu":         input(jsonScalar, ""),
		"extra":       input(jsonScalar, "Further fields of the record, as a JSON object; kept as they are."),
	}
}

// entityType is an entity as answered.
func entityType(jsonScalar, revision *gql.Scalar, value *gql.Object) *gql.Object {
	return gql.NewObject(gql.ObjectConfig{Name: "Entity", Description: "An entity of the app's model.", Fields: metered(gql.Fields{
		"appId":          field(nonNull(gql.ID), ""),
		"organizationId": field(nonNull(gql.ID), ""),
		"entityId":       field(nonNull(gql.ID), ""),
		"displayName":    field(gql.String, ""),
		"type":           field(gql.String, "REGEX or VALUE_SYNONYMS."),
		"values":         field(listOf(value), ""),
		"nlu":            field(jsonScalar, ""),
		"createdAt":      field(nonNull(gql.String), ""),
		"updatedAt":      field(nonNull(gql.String), ""),
		"revision":       field(nonNull(revision), "This state's revision: send it back as ifRevision, and a write made after another changed the record is refused with CONFLICT."),
		"document":       field(nonNull(jsonScalar), "The whole record as stored, every field included, as REST answers it."),
	})})
}
