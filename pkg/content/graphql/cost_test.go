package graphql

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/pkg/content"
)

// doubling nests fields { type { ofType { ofType { ... } } } } levels
// deep under __type(name: "__Type"): each level roughly doubles what
// introspection answers.
func doubling(levels int) string {
	inner := "name"
	for range levels {
		inner = "fields { name type { ofType { ofType { " + inner + " } } } }"
	}
	return `{ __type(name: "__Type") { ` + inner + ` } }`
}

// answerFields counts the fields of an answer's data, as the cost counts
// them: every member of every object.
func answerFields(v any) int64 {
	n := int64(0)
	switch v := v.(type) {
	case map[string]any:
		for _, x := range v {
			n += 1 + answerFields(x)
		}
	case []any:
		for _, x := range v {
			n += answerFields(x)
		}
	}
	return n
}

// allocated is what the process allocated while f ran: the server runs in
// the test's process.
func allocated(f func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func testHandler(t testing.TB, limits Limits) *Handler {
	t.Helper()
	h, err := New(limits, nil, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// cost weighs query as the endpoint does.
func (h *Handler) costOf(t testing.TB, query string, vars map[string]any) costReport {
	t.Helper()
	d, rerr := parseQuery(query, h.limits, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if rerr != nil {
		t.Fatalf("%q: %v", query, rerr.errs)
	}
	op := operation(d.ast, "")
	if op == nil {
		t.Fatalf("%q: no operation", query)
	}
	return h.cost.measure(d.ast, op, vars, h.limits.MaxCost)
}

// TestIntrospectionCostIsItsAnswer holds the cost of introspection to the
// number of fields graphql-go answers, on the served schema: introspection
// is counted exactly, GraphiQL's query included.
func TestIntrospectionCostIsItsAnswer(t *testing.T) {
	limits := Limits{MaxCost: 1 << 40, MaxIntrospectionDepth: 100}
	e := newEnv(t, limits, nil)
	h := testHandler(t, limits)
	for _, tc := range []struct {
		name, query string
		vars        map[string]any
		data        int64 // fields of the answer that are not introspection
	}{
		{"GraphiQL", graphiQLIntrospection, nil, 0},
		{"the SDL printer", introspection, nil, 0},
		{"types and fields", `{ __schema { types { name kind fields { name args { name type { name } } } inputFields { name } enumValues { name } } } }`, nil, 0},
		{"deprecated included", `{ __schema { types { fields(includeDeprecated: true) { name } enumValues(includeDeprecated: true) { name } possibleTypes { name } interfaces { name } } } }`, nil, 0},
		{"directives", `{ __schema { directives { name locations args { name type { kind ofType { name } } } } queryType { name } mutationType { fields { name } } subscriptionType { name } } }`, nil, 0},
		{"a type by name", `{ __type(name: "Handler") { fields { name type { kind ofType { kind ofType { name } } } } } }`, nil, 0},
		{"a type by variable", `query($n: String!) { __type(name: $n) { inputFields { name type { name } } } }`, map[string]any{"n": "AddHandlerInput"}, 0},
		{"an unknown type", `{ __type(name: "Nope") { name fields { name } } }`, nil, 0},
		{"__typename", `{ __typename __schema { __typename types { __typename name } } }`, nil, 1},
		{"aliases", `{ a: __type(name: "Query") { fields { name } } b: __type(name: "Mutation") { fields { name } } }`, nil, 0},
		{"fragments", `{ __schema { types { ...T } } } fragment T on __Type { name fields { ...F } } fragment F on __Field { name type { name } }`, nil, 0},
		{"doubling, 4 levels", doubling(4), nil, 0},
		{"doubling, 8 levels", doubling(8), nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := h.costOf(t, tc.query, tc.vars)
			a := e.post("app1", tc.query, tc.vars)
			if a.status != 200 || len(a.Errors) > 0 {
				t.Fatalf("%d %.300s", a.status, a.raw)
			}
			if got := answerFields(a.Data); c.cost != got || c.meta != got-tc.data {
				t.Errorf("cost %d (introspection %d), but the answer holds %d fields", c.cost, c.meta, got)
			}
		})
	}
}

// TestCostWeighsListsAndAliases checks the estimate of content fields:
// each field counts once on every object it is answered on, lists count
// ListSize items, aliases are fields of their own and merged fields count
// once.
func TestCostWeighsListsAndAliases(t *testing.T) {
	h := testHandler(t, Limits{ListSize: 20})
	for _, tc := range []struct {
		query string
		cost  int64
	}{
		{`{ handlers { intentId } }`, 1 + 20},
		{`{ a: handlers { intentId } b: handlers { intentId } }`, 2 * (1 + 20)},
		{`{ handlers { intentId } handlers { name } }`, 1 + 20*2},
		{`{ handlers { intentId name intentId } }`, 1 + 20*2},
		{`{ handlers { content { key handlerResponse } } }`, 1 + 20*(1+20*2)},
		{`{ handler(intentId: "x") { content { key } document } }`, 1 + (1 + 20) + 1},
		{`{ entity(entityId: "C") { values { name synonyms } } }`, 1 + 1 + 20*2},
		{`{ handlers { ...F ... on Handler { name } } } fragment F on Handler { intentId slots { name } }`, 1 + 20*(1+1+20+1)},
		{`mutation { addIntent(intent: {intentId: "x"}) { intentId slots { name } } }`, 1 + 1 + 1 + 20},
		{`{ __typename handlers { __typename } }`, 1 + 1 + 20},
		{`{ __type(name: "Slot") { name } intents { intentId } }`, 2 + 1 + 20},
		{fmt.Sprintf("{ %s }", strings.Repeat("__typename ", 30)), 1},
	} {
		if c := h.costOf(t, tc.query, nil); c.cost != tc.cost {
			t.Errorf("%s: cost %d, want %d", tc.query, c.cost, tc.cost)
		}
	}
	// The list size is a setting.
	if c := testHandler(t, Limits{ListSize: 3}).costOf(t, `{ handlers { content { key } } }`, nil); c.cost != 1+3*(1+3) {
		t.Errorf("with lists of 3: cost %d, want %d", c.cost, 1+3*(1+3))
	}
}

// heavyRead is what an authoring tool may load at once: every field of
// every handler, intent and entity.
const heavyRead = `{
	handlers { appId organizationId intentId name type langCode defaultLocale locales contexts substitutions nlu graphCoords createdAt updatedAt
		utterancePatterns slots { name type isList nlu } data permissions
		content { key handlerResponse } forward { key paths } redirect { key paths } }
	intents { intentId name utterancePatterns slots { name type } createdAt updatedAt }
	entities { entityId displayName type nlu values { name canonicalId synonyms } }
}`

// introspectionAliases selects, under n aliases, a doubling from every
// type of the schema: 18 fields, nested 18 deep, answering 959.
func introspectionAliases(n int) string {
	return aliases(n, `__schema { types { fields { type { ofType { ofType { fields { type { ofType { ofType { `+
		`fields { type { ofType { ofType { fields { type { ofType { name } } } } } } } } } } } } } } } } }`)
}

// TestIntrospectionBounded sends introspection queries whose answers
// double with each level, as one query and under aliases. Introspection
// used to be left out of every limit: 10 levels answered 0.9 MB,
// allocating 126 MB, 14 levels 15 MB. Now each is refused before it
// runs, by the depth allowed to introspection or by its cost, with the
// cost, the limit and the costliest field, while the process allocates
// little.
func TestIntrospectionBounded(t *testing.T) {
	def := newEnv(t, Limits{}, nil)
	deep := newEnv(t, Limits{MaxIntrospectionDepth: 100}, nil)
	tooDeep := func(n int) []string {
		return []string{fmt.Sprintf("the request nests fields %d deep;", n), "introspection fields 20 (GRAPHQL_MAX_INTROSPECTION_DEPTH)"}
	}
	tooCostly := func(cost, field string) []string {
		return []string{"the request costs " + cost + ", more than the 20000 allowed (GRAPHQL_MAX_COST)", "the costliest field is " + field}
	}
	for _, tc := range []struct {
		name  string
		e     *env
		query string
		code  string
		msg   []string
	}{
		{"5 levels", def, doubling(5), CodeQueryTooDeep, tooDeep(22)},
		{"10 levels", def, doubling(10), CodeQueryTooDeep, tooDeep(42)},
		{"14 levels", def, doubling(14), CodeQueryTooDeep, tooDeep(58)},
		{"25 aliases of a doubling from every type", def, introspectionAliases(25), CodeQueryTooComplex, tooCostly("33000", "a0.types")},
		{"9 levels, deeper allowed", deep, doubling(9), CodeQueryTooComplex, tooCostly("32425", "__type.fields")},
		{"10 levels, deeper allowed", deep, doubling(10), CodeQueryTooComplex, tooCostly("64937", "__type.fields")},
		{"14 levels, deeper allowed", deep, doubling(14), CodeQueryTooComplex, tooCostly("1040297", "__type.fields")},
		{"20 levels, deeper allowed", deep, doubling(20), CodeQueryTooComplex, tooCostly("66584489", "__type.fields")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a answer
			start := time.Now()
			alloc := allocated(func() { a = tc.e.post("app1", tc.query, nil) })
			took := time.Since(start)
			if a.status != 400 || strings.Join(a.codes(), "") != tc.code+"@" || len(a.Errors) != 1 {
				t.Fatalf("%d %.500s", a.status, a.raw)
			}
			for _, want := range tc.msg {
				if !strings.Contains(a.Errors[0].Message, want) {
					t.Errorf("message %q lacks %q", a.Errors[0].Message, want)
				}
			}
			if len(a.Errors[0].Locations) != 1 {
				t.Errorf("the error does not place the field: %s", a.raw)
			}
			if tc.code == CodeQueryTooComplex && (a.Errors[0].Extensions["maxCost"] != float64(DefaultMaxCost) || a.Errors[0].Extensions["cost"] == nil) {
				t.Errorf("extensions %v", a.Errors[0].Extensions)
			}
			// Depth is refused before graphql-go validates the query; its
			// validator allocates most of what a refused cost takes.
			maxAlloc := uint64(1 << 20)
			if tc.code == CodeQueryTooComplex {
				maxAlloc = 16 << 20
			}
			if alloc > maxAlloc || took > 2*time.Second {
				t.Errorf("refusing it allocated %d KiB and took %v", alloc>>10, took)
			}
		})
	}
	if a := def.post("app1", doubling(5), nil); jsonOf(a.Errors[0].Locations) != `[{"column":214,"line":1}]` {
		t.Errorf("the depth error is not placed at the first field too deep: %s", a.raw)
	}
	if a := deep.post("app1", doubling(9), nil); jsonOf(a.Errors[0].Locations) != `[{"column":28,"line":1}]` ||
		a.Errors[0].Extensions["costliestField"] != "__type.fields" || a.Errors[0].Extensions["cost"] != float64(32425) {
		t.Errorf("the cost error does not place the costliest field: %s", a.raw)
	}
	// Within the limits, introspection answers: GraphiQL's own query, a
	// doubling of 4 levels (929 fields), aliases under the cost.
	for _, q := range []string{graphiQLIntrospection, doubling(4), introspectionAliases(15)} {
		if a := def.post("app1", q, nil); a.status != 200 || len(a.Errors) > 0 {
			t.Errorf("%.60q: %d %.300s", q, a.status, a.raw)
		}
	}
	// Ordinary reads pass.
	for _, q := range []string{heavyRead, `{ handler(intentId: "LaunchRequest") { document } }`} {
		if a := def.post("app1", q, nil); a.status != 200 || len(a.Errors) > 0 {
			t.Errorf("%.60q: %d %.300s", q, a.status, a.raw)
		}
	}
}

// largeEntity stores an entity of about 1 MB in app-1: 10,000 values.
func largeEntity(t testing.TB, e *env, id string) int {
	t.Helper()
	values := make([]any, 11_000)
	for i := range values {
		values[i] = map[string]any{"name": fmt.Sprintf("product %05d", i), "canonicalId": fmt.Sprintf("sku-%06d", i),
			"synonyms": []any{fmt.Sprintf("item %d", i), fmt.Sprintf("article %d", i)}}
	}
	rec, ps := content.ParseRecord(content.KindEntity, map[string]any{"entityId": id, "values": values}, "app-1", "")
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	if _, err := e.store.CreateRecord(contenttest.Acting(context.Background()), rec); err != nil {
		t.Fatal(err)
	}
	return len(rec.Doc)
}

func aliases(n int, field string) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		fmt.Fprintf(&b, " a%d: %s", i, field)
	}
	return b.String() + " }"
}

// TestAliasesOfALargeRecordRefused selects a 1 MB entity under 50 aliases,
// which used to answer 50 MB to a 1.6 KB query: the answer is refused
// once it passes GRAPHQL_MAX_ANSWER_BYTES, or once it holds more fields
// than GRAPHQL_MAX_COST, while the process allocates a fraction of what
// the answer would have been.
func TestAliasesOfALargeRecordRefused(t *testing.T) {
	e := newEnv(t, Limits{}, nil)
	size := largeEntity(t, e, "BIG")
	if size < 900<<10 {
		t.Fatalf("the entity is %d bytes", size)
	}
	bytesOver := "the answer is larger than 16777216 bytes (GRAPHQL_MAX_ANSWER_BYTES), counted while resolving a"
	for _, tc := range []struct {
		name, query string
		msg         []string
		maxAlloc    uint64
	}{
		{"document", aliases(50, `entity(entityId: "BIG") { document }`), []string{bytesOver, ".document;"}, 8 << 20},
		{"document through a list", aliases(50, `entities { entityId document }`), []string{bytesOver, "].document;"}, 8 << 20},
		{"values", aliases(50, `entity(entityId: "BIG") { values { name synonyms canonicalId } }`),
			[]string{"the answer holds more than 20000 fields (GRAPHQL_MAX_COST), counted while resolving a", ".values;"}, 24 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a answer
			alloc := allocated(func() { a = e.post("app1", tc.query, nil) })
			if a.status != 422 || strings.Join(a.codes(), "") != "ANSWER_TOO_LARGE@" || len(a.Errors) != 1 || a.Data != nil {
				t.Fatalf("%d %.500s", a.status, a.raw)
			}
			for _, m := range tc.msg {
				if !strings.Contains(a.Errors[0].Message, m) {
					t.Errorf("message %q lacks %q", a.Errors[0].Message, m)
				}
			}
			if len(a.Errors[0].Path) < 2 || len(a.Errors[0].Locations) != 1 {
				t.Errorf("the error does not place the field: %s", a.raw)
			}
			if alloc > tc.maxAlloc {
				t.Errorf("refusing it allocated %d MiB, more than %d MiB", alloc>>20, tc.maxAlloc>>20)
			}
			t.Logf("%d %s; %d MiB allocated", a.status, a.Errors[0].Message, alloc>>20)
		})
	}
	// Under the cap, aliases of one record answer in full; the record was
	// read once.
	a := e.post("app1", aliases(10, `entity(entityId: "BIG") { document }`), nil)
	if a.status != 200 || len(a.Errors) > 0 || len(a.raw) < 10*size || len(a.raw) > DefaultMaxAnswerBytes {
		t.Fatalf("10 aliases: %d, %d bytes %.300s", a.status, len(a.raw), a.raw)
	}
	doc := a.Data["a9"].(map[string]any)["document"].(map[string]any)
	if doc["entityId"] != "BIG" || doc["appId"] != "app-1" || len(doc["values"].([]any)) != 11_000 {
		t.Errorf("document %.300s", jsonOf(doc))
	}
}

// manyIntents stores n intents more in app-1.
func manyIntents(t testing.TB, e *env, n int) {
	t.Helper()
	for i := range n {
		rec, ps := content.ParseRecord(content.KindIntent, map[string]any{"intentId": fmt.Sprintf("Intent%04d", i), "name": "an intent"}, "app-1", "")
		if len(ps) > 0 {
			t.Fatal(ps)
		}
		if _, err := e.store.CreateRecord(contenttest.Acting(context.Background()), rec); err != nil {
			t.Fatal(err)
		}
	}
}

// TestListsLongerThanAssumed: aliases of a list of 1,201 records pass
// the estimate (20 items a list) but are refused once the answer holds
// more than GRAPHQL_MAX_COST fields, counted while it is resolved.
func TestListsLongerThanAssumed(t *testing.T) {
	e := newEnv(t, Limits{}, nil)
	manyIntents(t, e, 1200)
	var a answer
	alloc := allocated(func() { a = e.post("app1", aliases(10, `intents { intentId name }`), nil) })
	if a.status != 422 || strings.Join(a.codes(), "") != "ANSWER_TOO_LARGE@" || a.Data != nil ||
		!strings.Contains(a.Errors[0].Message, "the answer holds more than 20000 fields (GRAPHQL_MAX_COST), counted while resolving a") {
		t.Fatalf("10 aliases of 1,201 intents: %d %.500s", a.status, a.raw)
	}
	if alloc > 64<<20 {
		t.Errorf("refusing it allocated %d MiB", alloc>>20)
	}
	t.Logf("%s; %d MiB allocated", a.Errors[0].Message, alloc>>20)
	if a := e.post("app1", aliases(5, `intents { intentId name }`), nil); a.status != 200 || len(a.Data["a4"].([]any)) != 1201 {
		t.Errorf("5 aliases (12,015 fields): %d %.300s", a.status, a.raw)
	}
}

// TestAnswerCountedWhileResolving: lists longer than the estimate assumes
// are counted as they are resolved, fields and bytes (a list's fields as
// it is read, before its objects are built), and introspection,
// which is not charged while it runs, is held to the byte limit when its
// answer is encoded. A refused mutation names those written before it
// and writes nothing after it.
func TestAnswerCountedWhileResolving(t *testing.T) {
	few := newEnv(t, Limits{MaxCost: 100, ListSize: 1}, nil)
	for i := range 60 {
		if a := few.post("app1", fmt.Sprintf(`mutation { addIntent(intent: {intentId: "I%02d"}) { intentId } }`, i), nil); a.status != 200 || len(a.Errors) > 0 {
			t.Fatalf("add an intent: %d %s", a.status, a.raw)
		}
	}
	a := few.post("app1", `{ intents { intentId name } }`, nil)
	if a.status != 422 || strings.Join(a.codes(), "") != "ANSWER_TOO_LARGE@" ||
		!strings.Contains(a.Errors[0].Message, "the answer holds more than 100 fields (GRAPHQL_MAX_COST), counted while resolving intents;") {
		t.Errorf("61 intents of 2 fields, at most 100 fields: %d %s", a.status, a.raw)
	}
	if a := few.post("app1", `{ intents { intentId } }`, nil); a.status != 200 || len(a.Data["intents"].([]any)) != 61 {
		t.Errorf("61 intents of 1 field: %d %.300s", a.status, a.raw)
	}

	small := newEnv(t, Limits{MaxAnswerBytes: 10_000}, nil)
	a = small.post("app1", graphiQLIntrospection, nil)
	if a.status != 422 || strings.Join(a.codes(), "") != "ANSWER_TOO_LARGE@" ||
		!strings.Contains(a.Errors[0].Message, "larger than 10000 bytes (GRAPHQL_MAX_ANSWER_BYTES)") {
		t.Errorf("introspection over 10,000 bytes: %d %.300s", a.status, a.raw)
	}
	a = small.post("app1", `mutation($x: JSON) {
		a: addIntent(intent: {intentId: "Big", extra: $x}) { intentId document }
		b: addIntent(intent: {intentId: "After"}) { intentId } }`, map[string]any{"x": map[string]any{"note": strings.Repeat("n", 12_000)}})
	if a.status != 422 || strings.Join(a.codes(), "") != "ANSWER_TOO_LARGE@" ||
		!strings.Contains(a.Errors[0].Message, "counted while resolving a.document; select fewer fields, aliases or records; mutations applied: a") ||
		jsonOf(a.Errors[0].Extensions["applied"]) != `["a"]` {
		t.Errorf("a mutation answering more than the limit: %d %.500s", a.status, a.raw)
	}
	if small.stored("app-1", content.KindIntent, "Big") == nil || small.stored("app-1", content.KindIntent, "After") != nil {
		t.Errorf("the first mutation must be written (and said so), the second not run")
	}
}

// BenchmarkCost measures the cost check on a typical read and on
// GraphiQL's introspection query.
//
//	go test -run XXX -bench Cost ./pkg/content/graphql
func BenchmarkCost(b *testing.B) {
	h := testHandler(b, Limits{})
	for _, tc := range []struct{ name, query string }{{"read", heavyRead}, {"GraphiQL", graphiQLIntrospection}} {
		d, rerr := parseQuery(tc.query, h.limits, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if rerr != nil {
			b.Fatal(rerr.errs)
		}
		op := operation(d.ast, "")
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if c := h.cost.measure(d.ast, op, nil, h.limits.MaxCost); c.cost > int64(h.limits.MaxCost) {
					b.Fatal(c.cost)
				}
			}
		})
	}
}
