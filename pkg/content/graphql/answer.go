package graphql

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	gql "github.com/graphql-go/graphql"
	"github.com/graphql-go/graphql/language/ast"

	"github.com/assistantcms/cms/pkg/content"
)

// An answer is bounded while it is resolved, not only once built. Every
// object is charged for its fields before graphql-go builds it, by what
// makes it: the root by the endpoint before the request runs, a record
// or a list of records, or of objects within a record, by the resolver
// that returns it, k objects costing k times the selections made on one
// (see weigh). graphql-go answers __typename without a resolver of ours
// and weighs every selection on every object, answered or left out, so a
// field charging only itself would leave those free: hundreds of aliases
// of __typename under a list of a thousand records built a million fields.
// Every field charges the bytes it adds to the answer's JSON as it is
// resolved, and a list of strings or JSON values one field for each item. Past either limit the charge and every later one are
// refused, so that graphql-go stops building the answer. Records are read
// and decoded once per request however many aliases select them, so that
// aliases add to the answer's count but not to what the process holds.

type executionKey struct{}

// execution is what the resolvers of one request share.
type execution struct {
	maxFields, maxBytes int64
	// bytesLimit names the setting maxBytes comes from.
	bytesLimit string
	// budget is the process's, charged as the answer grows; held is what
	// this answer holds of it.
	budget  *answerBudget
	spender spender
	held    int64

	mu      sync.Mutex
	fields  int64
	bytes   int64
	refused *refusal
	// applied names the mutations written, in order, for the answer
	// when a later field is refused.
	applied []string
	records map[recordKey]*record
	lists   map[listKey][]*record
	// lives holds, by app, the version its runtimes read (zero: the
	// draft), read once per request so that its fields read one state.
	lives map[string]int64
	// weights keeps what one object costs for each list of selections
	// weighed, by its first field: graphql-go resolves a field under the
	// same selections once per parent object.
	weights map[*ast.Field][]weighed
}

type weighed struct {
	fields []*ast.Field
	weight
}

type recordKey struct {
	kind    content.Kind
	app, id string
}

type listKey struct {
	kind content.Kind
	app  string
}

// refusal is the field at which the answer went over a limit.
type refusal struct {
	err   *codedError
	path  []any
	field *ast.Field
}

// FieldsPerRequest is how many fields of an answer cost as much of the
// token's rate limit as a request: an answer of the most fields allowed
// (GRAPHQL_MAX_COST, 20,000) costs 200 requests.
const FieldsPerRequest = 100

// BytesPerRequest is how many bytes of an answer cost as much of the
// token's rate limit as a request: what a runtime reads, a few kilobytes,
// costs a few requests; an answer of a runtime token's most
// (GRAPHQL_MAX_READER_ANSWER_BYTES, 1 MiB) about 1,000, so that at the
// default rate a token has about a megabyte of answers built a second.
const BytesPerRequest = 1 << 10

// answered is what was charged when resolving ended, fields and bytes:
// those of the answer, or, if it was refused, those built before the
// refusal.
func (x *execution) answered() (fields, bytes int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.fields, x.bytes
}

// requests is what an answer of fields and bytes costs of its token's
// rate, beyond the one request it counted: its fields or its bytes,
// whichever weigh more.
func requests(fields, bytes int64) float64 {
	return max(float64(fields)/FieldsPerRequest, float64(bytes)/BytesPerRequest)
}

// newExecution starts counting at the cost of the root: its selections
// (introspection, counted exactly before, included). A token that
// cannot write content gets the smaller answers of
// MaxReaderAnswerBytes.
func newExecution(l Limits, root weight, budget *answerBudget, s spender, writer bool) *execution {
	x := &execution{maxFields: int64(l.MaxCost), maxBytes: l.MaxAnswerBytes, bytesLimit: "GRAPHQL_MAX_ANSWER_BYTES",
		budget: budget, spender: s, fields: root.fields, bytes: root.bytes,
		records: map[recordKey]*record{}, lists: map[listKey][]*record{}, lives: map[string]int64{}, weights: map[*ast.Field][]weighed{}}
	if !writer && l.MaxReaderAnswerBytes < x.maxBytes {
		x.maxBytes, x.bytesLimit = l.MaxReaderAnswerBytes, "GRAPHQL_MAX_READER_ANSWER_BYTES, for tokens without content:write"
	}
	return x
}

// start charges the root to the budget; false when it was refused (see
// refusedAt).
func (x *execution) start() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if r := x.budget.take(x.spender, x.bytes); r != nil {
		x.refused = &refusal{err: r.error("the query's root")}
		return false
	}
	x.held = x.bytes
	return true
}

// release gives back what the answer held of the budget, once written.
func (x *execution) release() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.budget.give(x.spender, x.held)
	x.held = 0
}

func withExecution(ctx context.Context, x *execution) context.Context {
	return context.WithValue(ctx, executionKey{}, x)
}

// executionOf is the request's execution; nil (no limits) outside one.
func executionOf(ctx context.Context) *execution {
	x, _ := ctx.Value(executionKey{}).(*execution)
	return x
}

// charge counts fields and bytes of the answer at the field p resolves.
// Past a limit it refuses that field and every later one.
func (x *execution) charge(p gql.ResolveParams, fields, bytes int64) error {
	if x == nil {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.refused != nil {
		return x.refused.err
	}
	// A refused charge is not counted: what was refused is never built,
	// and the token pays for what was (answered).
	fields, bytes = addCost(x.fields, fields), addCost(x.bytes, bytes)
	var err *codedError
	switch {
	case fields > x.maxFields:
		err = errorf(CodeAnswerTooLarge, "", "the answer holds more than %d fields (GRAPHQL_MAX_COST), counted while resolving %s; select fewer fields, aliases or records",
			x.maxFields, responsePath(p.Info.Path.AsArray()))
	case bytes > x.maxBytes:
		err = errorf(CodeAnswerTooLarge, "", "the answer is larger than %d bytes (%s), counted while resolving %s; select fewer fields, aliases or records",
			x.maxBytes, x.bytesLimit, responsePath(p.Info.Path.AsArray()))
	case bytes > x.bytes:
		if r := x.budget.take(x.spender, bytes-x.bytes); r != nil {
			err = r.error(responsePath(p.Info.Path.AsArray()))
			break
		}
		x.held += bytes - x.bytes
		fallthrough
	default:
		x.fields, x.bytes = fields, bytes
		return nil
	}
	x.refused = &refusal{err: err, path: p.Info.Path.AsArray()}
	if len(p.Info.FieldASTs) > 0 {
		x.refused.field = p.Info.FieldASTs[0]
	}
	return err
}

// chargeObjects charges the field p resolves with n objects, each with
// the selections of p, and bytes more.
func (x *execution) chargeObjects(p gql.ResolveParams, n int, bytes int64) error {
	if x == nil {
		return nil
	}
	var w weight
	if n > 0 {
		w = x.weightOf(p)
	}
	return x.charge(p, mulCost(int64(n), w.fields), addCost(bytes, mulCost(int64(n), w.bytes)))
}

// weightOf is what one object that the field p returns costs, worked out
// once for each list of selections.
func (x *execution) weightOf(p gql.ResolveParams) weight {
	fields := p.Info.FieldASTs
	if len(fields) == 0 {
		return weight{}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, w := range x.weights[fields[0]] {
		if slices.Equal(w.fields, fields) {
			return w.weight
		}
	}
	typ, _ := gql.GetNamed(p.Info.ReturnType).(*gql.Object)
	sets := make([]*ast.SelectionSet, 0, len(fields))
	for _, f := range fields {
		sets = append(sets, f.SelectionSet)
	}
	w := weigh(typ, sets, p.Info.Fragments)
	x.weights[fields[0]] = append(x.weights[fields[0]], weighed{fields: slices.Clone(fields), weight: w})
	return w
}

// weight is what one object costs before graphql-go builds it.
type weight struct {
	fields, bytes int64
}

// weigh is what graphql-go builds on one object of typ for the sets:
// one field for each selection of a field, fragments spread once, as it
// spreads them, and the bytes of __typename, which it answers itself.
// A selection repeated, or one that @skip or @include may leave out,
// counts as well: graphql-go weighs each on every object, allocating
// for every condition; so does a fragment spread again with a condition,
// which it weighs each time until one is taken. __schema and __type,
// which only the root may select, are counted exactly before the
// request runs.
func weigh(typ *gql.Object, sets []*ast.SelectionSet, frags map[string]ast.Definition) weight {
	var w weight
	typeName := int64(0)
	if typ != nil {
		typeName = stringSize(typ.Name())
	}
	var spread map[string]bool
	var walk func(set *ast.SelectionSet)
	walk = func(set *ast.SelectionSet) {
		if set == nil {
			return
		}
		for _, s := range set.Selections {
			switch s := s.(type) {
			case *ast.Field:
				switch s.Name.Value {
				case "__schema", "__type":
					continue
				case "__typename":
					key := s.Name.Value
					if s.Alias != nil && s.Alias.Value != "" {
						key = s.Alias.Value
					}
					w.bytes = addCost(w.bytes, stringSize(key)+2+typeName)
				}
				w.fields = addCost(w.fields, 1)
			case *ast.InlineFragment:
				walk(s.SelectionSet)
			case *ast.FragmentSpread:
				name := s.Name.Value
				if spread[name] {
					if len(s.Directives) > 0 {
						w.fields = addCost(w.fields, 1)
					}
					continue
				}
				if spread == nil {
					spread = map[string]bool{}
				}
				spread[name] = true
				if f, ok := frags[name].(*ast.FragmentDefinition); ok {
					walk(f.SelectionSet)
				}
			}
		}
	}
	for _, set := range sets {
		walk(set)
	}
	return w
}

// wrote records a mutation that changed content.
func (x *execution) wrote(p gql.ResolveParams) {
	if x == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.applied = append(x.applied, fmt.Sprint(p.Info.Path.Key))
}

// refusedAt is the refusal, if any, and the mutations written before it.
func (x *execution) refusedAt() (*refusal, []string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.refused, x.applied
}

// record is a record read before in the request; ok is false if it was
// not read (a nil record was not found).
func (x *execution) record(k recordKey) (rec *record, ok bool) {
	if x == nil {
		return nil, false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	rec, ok = x.records[k]
	return rec, ok
}

func (x *execution) keepRecord(k recordKey, rec *record) {
	if x == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.records[k] = rec
}

// live is the live version of the app read before in the request.
func (x *execution) live(app string) (int64, bool) {
	if x == nil {
		return 0, false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	v, ok := x.lives[app]
	return v, ok
}

func (x *execution) keepLive(app string, v int64) {
	if x == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.lives[app] = v
}

// list is a list of records read before in the request.
func (x *execution) list(k listKey) ([]*record, bool) {
	if x == nil {
		return nil, false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	recs, ok := x.lists[k]
	return recs, ok
}

func (x *execution) keepList(k listKey, recs []*record) {
	if x == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.lists[k] = recs
}

// responsePath spells a place in the answer as handlers[3].content.
func responsePath(path []any) string {
	var b strings.Builder
	for _, k := range path {
		switch k := k.(type) {
		case int:
			b.WriteString("[" + strconv.Itoa(k) + "]")
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			fmt.Fprint(&b, k)
		}
	}
	return b.String()
}

// record is a stored record as the output types read it. Its fields are
// decoded on first use, its document built on first use, and the sizes of
// its parts measured once.
type record struct {
	kind content.Kind
	rec  content.Record
	org  string

	mu     sync.Mutex
	fields map[string]any
	err    error
	doc    json.RawMessage
	sizes  map[string]int64
}

func newRecord(kind content.Kind, rec content.Record, orgID string) *record {
	return &record{kind: kind, rec: rec, org: orgID}
}

// value is one field of the record and, unless objects (a list of
// objects, whose items are charged as they are resolved), the size of its
// JSON.
func (r *record) value(name string, objects bool) (any, int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// The document and the fields the store keeps apart are answered
	// without decoding the record.
	var direct string
	switch name {
	case "document":
		// As REST answers it, from the stored JSON.
		if r.doc == nil {
			r.doc = r.rec.AppendJSON(nil, r.org)
		}
		return r.doc, int64(len(r.doc)), nil
	case r.kind.IDField():
		direct = r.rec.ID
	case "appId":
		direct = r.rec.AppID
	case "organizationId":
		direct = r.org
	case "createdAt":
		direct = r.rec.CreatedAt.UTC().Format(content.TimeLayout)
	case "updatedAt":
		direct = r.rec.UpdatedAt.UTC().Format(content.TimeLayout)
	case "revision":
		return r.rec.Revision, int64(len(strconv.FormatInt(r.rec.Revision, 10))), nil
	default:
		return r.decoded(name, objects)
	}
	return direct, stringSize(direct), nil
}

// decoded is a field read from the decoded record; its size is measured
// once, however many aliases select it.
func (r *record) decoded(name string, objects bool) (any, int64, error) {
	if r.fields == nil && r.err == nil {
		r.fields, r.err = view(r.kind, r.rec, r.org)
		r.sizes = map[string]int64{}
	}
	if r.err != nil {
		return nil, 0, r.err
	}
	v := r.fields[name]
	if objects {
		return v, 0, nil
	}
	size, ok := r.sizes[name]
	if !ok {
		size = jsonSize(v)
		r.sizes[name] = size
	}
	return v, size, nil
}

// metered gives every field of a content type a resolver that charges
// the request's execution for what the field adds to the answer.
func metered(fields gql.Fields) gql.Fields {
	for name, f := range fields {
		if f.Resolve == nil {
			_, objects := gql.GetNamed(f.Type).(*gql.Object)
			t := f.Type
			if nn, ok := t.(*gql.NonNull); ok {
				t = nn.OfType
			}
			_, list := t.(*gql.List)
			f.Resolve = fieldResolver(name, objects, list)
		}
	}
	return fields
}

// fieldResolver reads a field from a record or a nested object and
// charges its size; a list of objects charges their fields, a list of
// strings or JSON values (list) its items.
func fieldResolver(name string, objects, list bool) gql.FieldResolveFn {
	return func(p gql.ResolveParams) (any, error) {
		var v any
		var size int64
		switch src := p.Source.(type) {
		case *record:
			var err error
			if v, size, err = src.value(name, objects); err != nil {
				return nil, err
			}
		case map[string]any:
			v = src[name]
			if !objects {
				size = jsonSize(v)
			}
		}
		x := executionOf(p.Context)
		if objects {
			// The objects are charged for their fields before
			// graphql-go builds them; brackets, and braces and a comma
			// for each.
			l, _ := v.([]any)
			if err := x.chargeObjects(p, len(l), keySize(p)+2+3*int64(len(l))); err != nil {
				return nil, err
			}
			return v, nil
		}
		// The field itself was charged with the object it is on. Each
		// item of a list counts one, like a field: graphql-go completes
		// each (about 0.7 KB), which the bytes of short items, 3 for an
		// empty string, would not bound.
		items := int64(0)
		if l, ok := v.([]any); ok && list {
			items = int64(len(l))
		}
		if err := x.charge(p, items, keySize(p)+size); err != nil {
			return nil, err
		}
		return v, nil
	}
}

// keySize is the size of the field's name in the answer, with its
// quotes, colon and comma.
func keySize(p gql.ResolveParams) int64 {
	if k, ok := p.Info.Path.Key.(string); ok {
		return stringSize(k) + 2
	}
	return 2
}

// jsonSize is the size of v as encoding/json writes it, for the values
// records decode to.
func jsonSize(v any) int64 {
	switch v := v.(type) {
	case nil:
		return 4
	case bool:
		if v {
			return 4
		}
		return 5
	case string:
		return stringSize(v)
	case json.Number:
		return int64(len(v))
	case json.RawMessage:
		return int64(len(v))
	case map[string]any:
		n := int64(2)
		for k, x := range v {
			n += stringSize(k) + 2 + jsonSize(x) // colon and comma
		}
		return n
	case []any:
		n := int64(2)
		for _, x := range v {
			n += jsonSize(x) + 1
		}
		return n
	}
	b, _ := json.Marshal(v)
	return int64(len(b))
}

// stringSize is the size of s as a JSON string as encoding/json writes
// it: HTML characters, control characters and bad UTF-8 escaped.
func stringSize(s string) int64 {
	n := int64(2)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && w == 1, r == '\u2028', r == '\u2029':
			n += 6
		default:
			n += int64(w)
		}
		i += w
	}
	return n
}
