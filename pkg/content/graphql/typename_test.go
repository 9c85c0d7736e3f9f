package graphql

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/pkg/content"
)

// typenames selects __typename under n aliases.
func typenames(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, " t%d: __typename", i)
	}
	return b.String()
}

// manyHandlers stores n handlers more in app-1, each with 60 short
// utterance patterns.
func manyHandlers(t testing.TB, e *env, n int) {
	t.Helper()
	patterns := make([]any, 60)
	for i := range patterns {
		patterns[i] = "hi"
	}
	for i := range n {
		rec, ps := content.ParseRecord(content.KindHandler, map[string]any{"intentId": fmt.Sprintf("Handler%04d", i), "name": "a handler",
			"utterancePatterns": patterns}, "app-1", "")
		if len(ps) > 0 {
			t.Fatal(ps)
		}
		if _, err := e.store.CreateRecord(contenttest.Acting(context.Background()), rec); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWhatGraphqlGoBuildsIsCharged: graphql-go answers __typename itself,
// weighs every selection on every object, answered or not, and completes
// every item of a list of strings; the field count (GRAPHQL_MAX_FIELDS)
// leaves __typename out, the estimate counts lists as GRAPHQL_LIST_SIZE
// items and lists of strings once. So hundreds of aliases of __typename
// under a list of 1,501 handlers, or under an entity's 11,000 values,
// passed every check and built about half a million fields that no
// resolver charged (678 to 713 MiB allocated), 300 conditions left out on
// each of 11,000 values allocated 1.1 GiB, and 13 aliases of 60 short
// utterance patterns on 1,501 handlers, 1.2 million items within the
// byte limit, about 0.8 GiB. Now each object is charged for all its
// selections before graphql-go builds it, and a list its items: the
// answer is refused as it is read, while the process allocates little.
func TestWhatGraphqlGoBuildsIsCharged(t *testing.T) {
	e := newEnv(t, Limits{}, nil)
	manyHandlers(t, e, 1500)
	largeEntity(t, e, "BIG")
	over := "the answer holds more than 20000 fields (GRAPHQL_MAX_COST), counted while resolving "
	for _, tc := range []struct {
		name, query, at string
	}{
		{"300 aliases of __typename under 1,501 handlers", `{ handlers {` + typenames(300) + ` } }`, "handlers;"},
		{"the same through a fragment", `{ handlers { intentId ...T } } fragment T on Handler {` + typenames(300) + ` }`, "handlers;"},
		{"40 aliases of __typename under 11,000 values", `{ entities { entityId values {` + typenames(40) + ` } } }`, "entities[0].values;"},
		{"__typename 900 times, merged, under 1,501 handlers", `{ handlers {` + strings.Repeat(" __typename", 900) + ` } }`, "handlers;"},
		{"__typename left out 300 times under 11,000 values", `{ entity(entityId: "BIG") { values { name` + strings.Repeat(" __typename @skip(if: true)", 300) + ` } } }`, "entity.values;"},
		{"13 aliases of 60 utterance patterns on 1,501 handlers", `{ handlers {` + strings.ReplaceAll(typenames(13), "__typename", "utterancePatterns") + ` } }`, "handlers["},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a answer
			alloc := allocated(func() { a = e.post("app1", tc.query, nil) })
			t.Logf("%d, %d bytes answered, %d MiB allocated", a.status, len(a.raw), alloc>>20)
			if a.status != 422 || strings.Join(a.codes(), "") != "ANSWER_TOO_LARGE@" || len(a.Errors) != 1 || a.Data != nil {
				t.Fatalf("%d %.300s", a.status, a.raw)
			}
			if msg := a.Errors[0].Message; !strings.Contains(msg, over+tc.at) {
				t.Errorf("message %q lacks %q", msg, over+tc.at)
			}
			if len(a.Errors[0].Path) == 0 || len(a.Errors[0].Locations) != 1 {
				t.Errorf("the error does not place the list: %s", a.raw)
			}
			if alloc > 32<<20 {
				t.Errorf("refusing it allocated %d MiB", alloc>>20)
			}
		})
	}
}

// TestTypenameStillAnswered: queries as Apollo Client writes them, with
// __typename in every selection set and fragment, answer as before, and
// an answer's fields are counted exactly, __typename included: with
// GRAPHQL_MAX_COST at the number of fields the answer holds it answers,
// with one less it is refused (before, __typename was not counted, so it
// answered).
func TestTypenameStillAnswered(t *testing.T) {
	e := newEnv(t, Limits{}, nil)
	apollo := `query Content($slots: Boolean!) {
		__typename
		handlers { __typename intentId ...HandlerParts content { __typename key handlerResponse } }
		entities { __typename entityId values { __typename name synonyms } }
		intent(intentId: "OrderStatus") { __typename intentId slots @include(if: $slots) { __typename name } }
	}
	fragment HandlerParts on Handler { __typename name forward { __typename key paths } }`
	a := e.post("app1", apollo, map[string]any{"slots": true})
	if a.status != 200 || len(a.Errors) > 0 {
		t.Fatalf("%d %s", a.status, a.raw)
	}
	h := a.Data["handlers"].([]any)[0].(map[string]any)
	for _, c := range []struct{ got, want any }{
		{a.Data["__typename"], "Query"},
		{h["__typename"], "Handler"},
		{h["content"].([]any)[0].(map[string]any)["__typename"], "ContentEntry"},
		{h["forward"].([]any)[0].(map[string]any)["__typename"], "PathsEntry"},
		{a.Data["entities"].([]any)[0].(map[string]any)["values"].([]any)[0].(map[string]any)["__typename"], "EntityValue"},
		{a.Data["intent"].(map[string]any)["slots"].([]any)[0].(map[string]any)["__typename"], "Slot"},
	} {
		if c.got != c.want {
			t.Errorf("__typename %v, want %v: %s", c.got, c.want, a.raw)
		}
	}
	if a := e.post("app1", `mutation { addIntent(intent: {intentId: "Typed"}) { __typename intentId } }`, nil); a.status != 200 ||
		jsonOf(a.Data) != `{"addIntent":{"__typename":"Intent","intentId":"Typed"}}` {
		t.Errorf("a mutation: %d %s", a.status, a.raw)
	}

	// 24 fields, 9 of them __typename, on app-1's handler (2 content
	// entries, 1 forward), intent (1 slot) and entity (1 value).
	exact := `{ __typename
		handlers { __typename intentId content { __typename key } forward { __typename key } }
		intent(intentId: "OrderStatus") { __typename intentId slots { __typename name } }
		entities { __typename entityId values { __typename name } } }`
	for _, tc := range []struct {
		maxCost, status int
	}{{24, 200}, {23, 422}} {
		limits := Limits{MaxCost: tc.maxCost, ListSize: 1}
		if c := testHandler(t, limits).costOf(t, exact, nil); c.cost > int64(tc.maxCost) {
			t.Fatalf("the estimate (%d) refuses it before it runs", c.cost)
		}
		a := newEnv(t, limits, nil).post("app1", exact, nil)
		if a.status != tc.status {
			t.Errorf("at most %d fields: %d %s", tc.maxCost, a.status, a.raw)
		}
		if a.status == 200 && answerFields(a.Data) != 24 {
			t.Errorf("the answer holds %d fields: %s", answerFields(a.Data), a.raw)
		}
		if a.status == 422 && !strings.Contains(a.Errors[0].Message, "the answer holds more than 23 fields (GRAPHQL_MAX_COST)") {
			t.Errorf("at most 23 fields: %s", a.raw)
		}
	}

	// At the root, where the estimate counts a name once, each selection
	// counts before anything runs.
	few := newEnv(t, Limits{MaxCost: 100}, nil)
	if a := few.post("app1", "{"+strings.Repeat(" __typename", 150)+" }", nil); a.status != 400 || strings.Join(a.codes(), "") != "QUERY_TOO_COMPLEX@" ||
		!strings.Contains(a.Errors[0].Message, "the request makes 150 selections at its root, each counted where a name repeats: more than the 100 allowed (GRAPHQL_MAX_COST)") {
		t.Errorf("150 selections at the root, at most 100: %d %s", a.status, a.raw)
	}
	if a := few.post("app1", "{"+strings.Repeat(" __typename", 100)+" }", nil); a.status != 200 || jsonOf(a.Data) != `{"__typename":"Query"}` {
		t.Errorf("100 selections at the root, at most 100: %d %s", a.status, a.raw)
	}
}
