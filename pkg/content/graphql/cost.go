package graphql

import (
	"strings"

	gql "github.com/graphql-go/graphql"
	"github.com/graphql-go/graphql/language/ast"
)

// A request's cost is the number of fields its answer may hold, every
// item of a list counted, worked out on the parsed operation before
// anything runs: a field costs one on each object it is answered on.
// What introspection answers is fixed by the schema, so its fields are
// counted exactly, walking the schema's own types, fields and arguments
// (each part once per selection, so that a query whose answer doubles
// with each level is counted in time linear in its levels). A list of
// records, or of objects within a record, has no bound in the schema or
// the store, so it is assumed to hold Limits.ListSize items. Aliases are
// fields of their own; fields that graphql-go merges (one name for one
// field) count once, as it answers them once.

// costModel weighs requests against one schema.
type costModel struct {
	schema   *gql.Schema
	listSize int64
}

// costCap is where counts stop growing, far past any limit.
const costCap = int64(1) << 60

func addCost(a, b int64) int64 { return min(a+b, costCap) }

func mulCost(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > costCap/b {
		return costCap
	}
	return min(a*b, costCap)
}

// group is the fields a selection set answers under one name, as
// graphql-go merges them, and their selections (nil for a leaf).
type group struct {
	name   string
	fields []*ast.Field
	sets   []*ast.SelectionSet
}

// setsID names a list of selection sets by where it is held: each list is
// made once (by collect, whose answers are kept), so equal IDs are the
// same selections.
type setsID struct {
	first **ast.SelectionSet
	n     int
}

func idOf(sets []*ast.SelectionSet) setsID {
	if len(sets) == 0 {
		return setsID{}
	}
	return setsID{&sets[0], len(sets)}
}

// costReport is what weighing a request found.
type costReport struct {
	// cost of the whole operation; past the limit it may be a lower
	// bound (more is true).
	cost int64
	more bool
	// meta is the cost of its introspection fields (__schema, __type).
	meta int64
	// path and at name the costliest field: the root field that costs
	// the most, then, while one of its fields holds most of its cost,
	// that field, down to the first list.
	path []string
	at   *ast.Field
}

// metaKey is a part of the schema and the selections made on it.
type metaKey struct {
	val  any
	sets setsID
}

// costWalk weighs one request.
type costWalk struct {
	m     *costModel
	frags map[string]*ast.FragmentDefinition
	op    *ast.OperationDefinition
	vars  map[string]any
	memo  map[metaKey]int64
	// groups keeps what collect found for each list of selection sets.
	groups map[setsID][]group
	// work counts the parts of the schema weighed; each adds at least one
	// to the cost, so past limit the request is over it and weighing stops.
	work, limit int64
}

// measure weighs the operation op of doc, run with vars, against limit.
func (m *costModel) measure(doc *ast.Document, op *ast.OperationDefinition, vars map[string]any, limit int) costReport {
	w := &costWalk{m: m, frags: map[string]*ast.FragmentDefinition{}, op: op, vars: vars,
		memo: map[metaKey]int64{}, groups: map[setsID][]group{}, limit: int64(limit)}
	for _, d := range doc.Definitions {
		if f, ok := d.(*ast.FragmentDefinition); ok && f.Name != nil {
			w.frags[f.Name.Value] = f
		}
	}
	root := scope{typ: m.schema.QueryType(), count: 1}
	if op.Operation == ast.OperationTypeMutation {
		root.typ = m.schema.MutationType()
	}
	var r costReport
	fields := w.fields(root, []*ast.SelectionSet{op.SelectionSet})
	for _, f := range fields {
		r.cost = addCost(r.cost, f.cost)
		if f.child.meta {
			r.meta = addCost(r.meta, f.cost)
		}
	}
	r.more = w.work > w.limit
	if r.cost <= w.limit && !r.more {
		return r
	}
	parent, best := root, costliest(fields)
	for best != nil {
		r.path, r.at = append(r.path, best.name), best.fields[0]
		if best.sets == nil || best.child.size() > parent.size() {
			break
		}
		next := costliest(w.fields(best.child, best.sets))
		if next == nil || next.cost*2 <= best.cost {
			break
		}
		parent, best = best.child, next
	}
	return r
}

// scope is what a selection set is answered on: count objects of a
// content type, or parts of the schema (vals) for introspection.
type scope struct {
	typ   *gql.Object
	count int64
	meta  bool
	vals  []any
}

func (s scope) size() int64 {
	if s.meta {
		return int64(len(s.vals))
	}
	return s.count
}

// costed is one field of a selection set and what it costs on its scope.
type costed struct {
	group
	cost  int64
	child scope
}

func costliest(cs []costed) *costed {
	var best *costed
	for i := range cs {
		if best == nil || cs[i].cost > best.cost {
			best = &cs[i]
		}
	}
	return best
}

// fields weighs each field the sets select on s.
func (w *costWalk) fields(s scope, sets []*ast.SelectionSet) []costed {
	groups := w.collect(sets)
	out := make([]costed, 0, len(groups))
	for _, g := range groups {
		c := costed{group: g}
		if s.meta {
			c.cost = int64(len(s.vals))
			if c.sets != nil && g.name != "__typename" {
				c.child = scope{meta: true}
				for _, v := range s.vals {
					typ, vals := w.metaChildren(s.typ, g.fields[0], v)
					c.child.typ = typ
					c.child.vals = append(c.child.vals, vals...)
					for _, cv := range vals {
						c.cost = addCost(c.cost, w.metaCost(cv, typ, c.sets))
					}
				}
			}
		} else {
			c.cost = mulCost(s.count, w.fieldCost(s.typ, g))
			if c.sets != nil {
				c.child = w.childScope(s, g)
			}
		}
		out = append(out, c)
	}
	return out
}

// childScope is what the selections of a content field are answered on.
func (w *costWalk) childScope(s scope, g group) scope {
	f := g.fields[0]
	switch f.Name.Value {
	case "__schema":
		return scope{typ: gql.SchemaType, meta: true, vals: []any{w.m.schema}}
	case "__type":
		return scope{typ: gql.TypeType, meta: true, vals: w.namedTypes(f)}
	}
	obj, list := fieldType(s.typ, f.Name.Value)
	n := s.count
	if list {
		n = mulCost(n, w.m.listSize)
	}
	return scope{typ: obj, count: n}
}

// objectCost is what the sets cost on one object of typ.
func (w *costWalk) objectCost(typ *gql.Object, sets []*ast.SelectionSet) int64 {
	total := int64(0)
	for _, g := range w.collect(sets) {
		total = addCost(total, w.fieldCost(typ, g))
	}
	return total
}

// fieldCost is what a field costs on one object of typ, its selections
// included.
func (w *costWalk) fieldCost(typ *gql.Object, g group) int64 {
	sets := g.sets
	name := g.fields[0].Name.Value
	switch {
	case sets == nil || name == "__typename":
		return 1
	case name == "__schema":
		return addCost(1, w.metaCost(w.m.schema, gql.SchemaType, sets))
	case name == "__type":
		c := int64(1)
		for _, t := range w.namedTypes(g.fields[0]) {
			c = addCost(c, w.metaCost(t, gql.TypeType, sets))
		}
		return c
	}
	obj, list := fieldType(typ, name)
	if obj == nil {
		return 1
	}
	n := int64(1)
	if list {
		n = w.m.listSize
	}
	return addCost(1, mulCost(n, w.objectCost(obj, sets)))
}

// metaCost is what the sets cost on one part of the schema, v, of the
// introspection type typ: worked out once per part and selections.
func (w *costWalk) metaCost(v any, typ *gql.Object, sets []*ast.SelectionSet) int64 {
	k := metaKey{val: v, sets: idOf(sets)}
	if c, ok := w.memo[k]; ok {
		return c
	}
	if w.work++; w.work > w.limit {
		return 0
	}
	total := int64(0)
	for _, g := range w.collect(sets) {
		total = addCost(total, 1)
		inner := g.sets
		if inner == nil || g.name == "__typename" {
			continue
		}
		ctyp, vals := w.metaChildren(typ, g.fields[0], v)
		for _, cv := range vals {
			total = addCost(total, w.metaCost(cv, ctyp, inner))
		}
	}
	w.memo[k] = total
	return total
}

// collect groups the fields the sets select by the name they answer
// under, spreading fragments, each once per call as graphql-go does.
func (w *costWalk) collect(sets []*ast.SelectionSet) []group {
	id := idOf(sets)
	if out, ok := w.groups[id]; ok {
		return out
	}
	var out []group
	index := map[string]int{}
	seen := map[string]bool{}
	var add func(s *ast.SelectionSet)
	add = func(s *ast.SelectionSet) {
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
				i, ok := index[name]
				if !ok {
					i = len(out)
					index[name] = i
					out = append(out, group{name: name})
				}
				out[i].fields = append(out[i].fields, sel)
			case *ast.InlineFragment:
				add(sel.SelectionSet)
			case *ast.FragmentSpread:
				name := sel.Name.Value
				if f, ok := w.frags[name]; ok && !seen[name] {
					seen[name] = true
					add(f.SelectionSet)
				}
			}
		}
	}
	for _, s := range sets {
		add(s)
	}
	for i := range out {
		for _, f := range out[i].fields {
			if f.SelectionSet != nil {
				out[i].sets = append(out[i].sets, f.SelectionSet)
			}
		}
	}
	w.groups[id] = out
	return out
}

// fieldType is the object type a field of parent returns, nil for a
// leaf, and whether it returns a list of them.
func fieldType(parent *gql.Object, name string) (obj *gql.Object, list bool) {
	def := parent.Fields()[name]
	if def == nil {
		return nil, false
	}
	t := gql.Type(def.Type)
	for {
		switch x := t.(type) {
		case *gql.NonNull:
			t = x.OfType
		case *gql.List:
			t, list = x.OfType, true
		default:
			obj, _ = t.(*gql.Object)
			return obj, list
		}
	}
}

// namedTypes is what __type(name: ...) answers: the type named, none if
// there is no such type, and every type if the name cannot be known
// before the request runs.
func (w *costWalk) namedTypes(f *ast.Field) []any {
	var arg ast.Value
	for _, a := range f.Arguments {
		if a.Name != nil && a.Name.Value == "name" {
			arg = a.Value
		}
	}
	var name any
	switch v := arg.(type) {
	case *ast.StringValue:
		name = v.Value
	case *ast.Variable:
		if x, ok := w.vars[v.Name.Value]; ok {
			name = x
		} else {
			for _, d := range w.op.VariableDefinitions {
				if s, ok := d.DefaultValue.(*ast.StringValue); ok && d.Variable.Name.Value == v.Name.Value {
					name = s.Value
				}
			}
		}
	}
	if s, ok := name.(string); ok {
		if t := w.m.schema.Type(s); t != nil {
			return []any{t}
		}
		return nil
	}
	all := make([]any, 0, len(w.m.schema.TypeMap()))
	for _, t := range w.m.schema.TypeMap() {
		all = append(all, t)
	}
	return all
}

// metaChildren is what the introspection field f of the part v (of type
// typ) answers, as graphql-go's introspection resolvers answer it, and
// the type of those parts.
func (w *costWalk) metaChildren(typ *gql.Object, f *ast.Field, v any) (*gql.Object, []any) {
	key := typ.Name() + "." + f.Name.Value
	if obj, out, ok := schemaChildren(key, v); ok {
		return obj, out
	}
	if obj, out, ok := w.typeChildren(key, f, v); ok {
		return obj, out
	}
	if obj, out, ok := definitionChildren(key, v); ok {
		return obj, out
	}
	// An object field of introspection not known here (graphql-go has
	// none): counted as answered once.
	obj, _ := fieldType(typ, f.Name.Value)
	if obj == nil {
		return nil, nil
	}
	return obj, []any{v}
}

// schemaChildren answers the fields of __Schema (key is type.field);
// false for any other key.
func schemaChildren(key string, v any) (*gql.Object, []any, bool) {
	var out []any
	switch key {
	case "__Schema.types":
		for _, t := range v.(*gql.Schema).TypeMap() {
			out = append(out, t)
		}
		return gql.TypeType, out, true
	case "__Schema.queryType":
		return gql.TypeType, []any{v.(*gql.Schema).QueryType()}, true
	case "__Schema.mutationType":
		if t := v.(*gql.Schema).MutationType(); t != nil {
			out = append(out, t)
		}
		return gql.TypeType, out, true
	case "__Schema.subscriptionType":
		if t := v.(*gql.Schema).SubscriptionType(); t != nil {
			out = append(out, t)
		}
		return gql.TypeType, out, true
	case "__Schema.directives":
		for _, d := range v.(*gql.Schema).Directives() {
			out = append(out, d)
		}
		return gql.DirectiveType, out, true
	}
	return nil, nil, false
}

// typeChildren answers the list fields of __Type (key is type.field),
// deprecated members only when f asks for them; false for any other key.
func (w *costWalk) typeChildren(key string, f *ast.Field, v any) (*gql.Object, []any, bool) {
	var out []any
	switch key {
	case "__Type.fields":
		var defs gql.FieldDefinitionMap
		switch t := v.(type) {
		case *gql.Object:
			defs = t.Fields()
		case *gql.Interface:
			defs = t.Fields()
		}
		all := allowsDeprecated(f)
		for _, d := range defs {
			if all || d.DeprecationReason == "" {
				out = append(out, d)
			}
		}
		return gql.FieldType, out, true
	case "__Type.interfaces":
		if t, ok := v.(*gql.Object); ok {
			for _, i := range t.Interfaces() {
				out = append(out, i)
			}
		}
		return gql.TypeType, out, true
	case "__Type.possibleTypes":
		if t, ok := v.(gql.Abstract); ok {
			for _, p := range w.m.schema.PossibleTypes(t) {
				out = append(out, p)
			}
		}
		return gql.TypeType, out, true
	case "__Type.enumValues":
		if t, ok := v.(*gql.Enum); ok {
			all := allowsDeprecated(f)
			for _, e := range t.Values() {
				if all || e.DeprecationReason == "" {
					out = append(out, e)
				}
			}
		}
		return gql.EnumValueType, out, true
	case "__Type.inputFields":
		if t, ok := v.(*gql.InputObject); ok {
			for _, f := range t.Fields() {
				out = append(out, f)
			}
		}
		return gql.InputValueType, out, true
	case "__Type.ofType":
		switch t := v.(type) {
		case *gql.List:
			out = append(out, t.OfType)
		case *gql.NonNull:
			out = append(out, t.OfType)
		}
		return gql.TypeType, out, true
	}
	return nil, nil, false
}

// definitionChildren answers the fields of __Field, __InputValue and
// __Directive (key is type.field); false for any other key.
func definitionChildren(key string, v any) (*gql.Object, []any, bool) {
	var out []any
	switch key {
	case "__Field.args":
		for _, a := range v.(*gql.FieldDefinition).Args {
			out = append(out, a)
		}
		return gql.InputValueType, out, true
	case "__Field.type":
		return gql.TypeType, []any{v.(*gql.FieldDefinition).Type}, true
	case "__InputValue.type":
		switch a := v.(type) {
		case *gql.Argument:
			out = append(out, a.Type)
		case *gql.InputObjectField:
			out = append(out, a.Type)
		}
		return gql.TypeType, out, true
	case "__Directive.args":
		for _, a := range v.(*gql.Directive).Args {
			out = append(out, a)
		}
		return gql.InputValueType, out, true
	}
	return nil, nil, false
}

// allowsDeprecated reports whether a fields or enumValues selection may
// answer deprecated ones too: includeDeprecated true, or a variable.
func allowsDeprecated(f *ast.Field) bool {
	for _, a := range f.Arguments {
		if a.Name == nil || a.Name.Value != "includeDeprecated" {
			continue
		}
		switch v := a.Value.(type) {
		case *ast.BooleanValue:
			return v.Value
		case *ast.Variable:
			return true
		}
	}
	return false
}

// pathString spells a field's place in the answer as a.b.c.
func pathString(path []string) string { return strings.Join(path, ".") }
