package graphql

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/graphql-go/graphql/language/ast"
	"github.com/graphql-go/graphql/language/lexer"
	"github.com/graphql-go/graphql/language/parser"
	"github.com/graphql-go/graphql/language/source"
)

// fuzzLimits are small, so that fuzzing reaches every limit.
func fuzzLimits() Limits {
	return Limits{MaxBodyBytes: 8 << 10, MaxDepth: 2, MaxIntrospectionDepth: 4, MaxFields: 25, MaxCost: 60, ListSize: 3, MaxAnswerBytes: 2 << 10}
}

// querySeeds are queries as clients write them and queries built to hurt
// the parser, the validator or the limits.
func querySeeds() []string {
	return []string{
		`{ handlers { intentId name type content { key handlerResponse } forward { key paths } } }`,
		`query Q($id: ID!) { intent(intentId: $id) { intentId utterancePatterns slots { name type } document } }`,
		`{ entity(entityId: "COLOR") { entityId values { name synonyms canonicalId } } entities { entityId } }`,
		`mutation($h: AddHandlerInput!) { addHandler(handler: $h) { intentId createdAt } }`,
		`mutation { updateEntity(entityId: "COLOR", entity: {displayName: "Colour", extra: {rank: 2}}) { displayName } }`,
		`mutation { replaceEntityValues(entityId: "COLOR", values: [{name: "blue", synonyms: ["navy"]}]) { values { name } } }`,
		`mutation { deleteIntent(intentId: "OrderStatus") { intentId } }`,
		`{ __schema { queryType { name } types { name kind } } __type(name: "Handler") { fields { name } } }`,
		`{ handlers { ...H } } fragment H on Handler { intentId ... on Handler { name } }`,
		`query A { intents { intentId } } query B { handlers { intentId } }`,
		`{ a: handler(appId: "app-2", intentId: "OtherApp") { document } b: handlers(appId: "app-3") { intentId } }`,
		`{ handlers { ...A } } fragment A on Handler { ...B } fragment B on Handler { ...A }`,
		`{ handlers { ...A } } fragment A on Handler { intentId ...A }`,
		`{ x: handlers { intentId } x: handlers { name } }`,
		`{ handlers { a: intentId a: name } }`,
		strings.Repeat("{ handlers ", 300) + strings.Repeat("}", 300),
		`mutation { addHandler(handler: {intentId: "D", data: ` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}) { intentId } }`,
		`{ ` + strings.Repeat("__typename ", 40) + `}`,
		`{ handlers { ...F1 } } fragment F1 on Handler { ...F0 ...F0 ...F0 } fragment F0 on Handler { intentId name type }`,
		"# comment é\n{ handlers { intentId } }",
		"query { # état\n handlers { #éééééééé\nintentId } }",
		"\ufeff{ handlers { intentId } }",
		`{ handler(intentId: "\u00e9\n") { intentId } }`,
		`{ handler(intentId: "\uZZZZ") { intentId } }`,
		`{ handler(intentId: """block \""" string""") { intentId } }`,
		`{ handler(intentId: """unterminated`,
		`{ handler(intentId: 0012) { intentId } }`,
		`{ handler(intentId: -1.5e+3) { intentId } }`,
		`{ handlers { intentId } ..`,
		`{ handlers @include(if: true) @skip(if: false) { intentId } }`,
		`query($v: JSON) { handlers { intentId } }`,
		`subscription { handlers { intentId } }`,
		`type Query { x: Int }`,
		`{ __type(name: "__Type") { fields { name type { ofType { ofType { fields { name } } } } } } }`,
		`{ a: __type(name: "__Type") { fields { name type { name } } } b: __schema { types { fields { args { name } } } } }`,
		`{ a: handler(intentId: "LaunchRequest") { document } b: handler(intentId: "LaunchRequest") { document } c: handlers { document content { handlerResponse } } }`,
		`{ a: handlers { content { key handlerResponse } } b: entities { values { name synonyms } } c: intents { slots { name } } }`,
		`{ __typename handlers { __typename a: __typename b: __typename content { __typename k: __typename } ...T } } fragment T on Handler { __typename t: __typename }`,
		`query($s: Boolean!) { entities { values { name @skip(if: $s) __typename @include(if: $s) __typename @skip(if: true) } } }`,
	}
}

// fuzzSeedBodies are POST bodies: each seed query, with variables where
// it needs them, and bodies that are not one request.
func fuzzSeedBodies() [][]byte {
	var bodies [][]byte
	for _, q := range querySeeds() {
		req := map[string]any{"query": q}
		switch {
		case strings.Contains(q, "$id"):
			req["variables"] = map[string]any{"id": "OrderStatus"}
		case strings.Contains(q, "$h"):
			req["variables"] = map[string]any{"h": map[string]any{"intentId": "Hours", "utterancePatterns": []any{"when are you open"},
				"content": []any{map[string]any{"key": "Hours", "handlerResponse": []any{map[string]any{"outputSpeech": "9 to 5"}}}}}}
		case strings.Contains(q, "$s"):
			req["variables"] = map[string]any{"s": true}
		case strings.Contains(q, "query A"):
			req["operationName"] = "B"
		}
		b, _ := json.Marshal(req)
		bodies = append(bodies, b)
	}
	return append(bodies,
		[]byte(`[{"query":"{ handlers { intentId } }"},{"query":"{ intents { intentId } }"}]`),
		[]byte(`{"query":"{ handlers { intentId } }","variables":[1]}`),
		[]byte(`{"query":1}`),
		[]byte(`{"query":"{ handlers { intentId } }","operationName":"Nope"}`),
		[]byte(`{"query":"{ handlers { intentId } }"} {}`),
		[]byte(`{"query":"query($d: JSON) { handlers { intentId } }","variables":{"d":`+strings.Repeat("[", 200)+strings.Repeat("]", 200)+`}}`),
		[]byte(`{"query":"mutation($d: JSON) { addHandler(handler: {intentId: \"Deep\", data: $d}) { intentId } }","variables":{"d":`+strings.Repeat(`{"a":`, 140)+`1`+strings.Repeat("}", 140)+`}}`),
		[]byte(`{"query":"{ handlers { intentId } }","variables":{"x":"`+strings.Repeat("x", 9000)+`"}}`),
		[]byte(``),
		[]byte(`null`),
	)
}

// fuzzSeedQueryStrings are GET query strings.
func fuzzSeedQueryStrings() []string {
	return []string{
		url.Values{"query": {`{ handlers { intentId } }`}}.Encode(),
		url.Values{"query": {`query Q($id: ID!) { intent(intentId: $id) { intentId } }`}, "variables": {`{"id":"OrderStatus"}`}, "operationName": {"Q"}}.Encode(),
		url.Values{"query": {`mutation { deleteIntent(intentId: "OrderStatus") { intentId } }`}}.Encode(),
		url.Values{"query": {`{ handlers { intentId } }`}, "variables": {`[`}}.Encode(),
		"query=%ZZ&variables=%7B",
		"",
	}
}

// foreignMarkers are written only in records of apps other than app-1:
// no answer to app-1's token may contain them.
func foreignMarkers() [][]byte {
	return [][]byte{[]byte("app-2-private-9f4c"), []byte("app-3-private-71ae")}
}

// FuzzDecodeRequest sends arbitrary bodies (POST) and query strings (GET)
// through the endpoint on a real store, as app-1's token, and checks what
// holds for every request: an answer in JSON with a known status (never
// 5xx, which would mean the store or the server failed), errors with
// messages and codes, limits kept, and nothing of another app's records.
func FuzzDecodeRequest(f *testing.F) {
	bodies, strs := fuzzSeedBodies(), fuzzSeedQueryStrings()
	for i := range max(len(bodies), len(strs)) {
		f.Add(bodies[i%len(bodies)], strs[i%len(strs)])
	}
	limits := fuzzLimits()
	e := newEnv(f, limits, nil)
	handler := e.srv.Config.Handler
	token := "Bearer " + e.tokens["app1"]
	f.Fuzz(func(t *testing.T, body []byte, rawQuery string) {
		post := httptest.NewRequest(http.MethodPost, "/cms/graphql", bytes.NewReader(body))
		get := httptest.NewRequest(http.MethodGet, "/cms/graphql", nil)
		get.URL.RawQuery = rawQuery
		for _, req := range []*http.Request{post, get} {
			req.Header.Set("Authorization", token)
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, req)
			checkAnswer(t, limits, req.Method, body, rawQuery, rec)
		}
	})
}

// checkAnswer checks one answer of FuzzDecodeRequest.
func checkAnswer(t *testing.T, limits Limits, method string, body []byte, rawQuery string, rec *httptest.ResponseRecorder) {
	t.Helper()
	raw := rec.Body.Bytes()
	var a struct {
		Data   json.RawMessage `json:"data"`
		Errors []gqlError      `json:"errors"`
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s: %d with Content-Type %q: %q", method, rec.Code, ct, raw)
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("%s: %d answer is not JSON (%v): %q", method, rec.Code, err, raw)
	}
	for _, m := range foreignMarkers() {
		if bytes.Contains(raw, m) {
			t.Fatalf("%s: the answer shows another app's record: %s", method, raw)
		}
	}
	codes := map[string]bool{}
	for _, e := range a.Errors {
		if strings.Contains(e.Message, malformed) {
			t.Fatalf("%s: graphql-go's parser or validator panicked: %s", method, raw)
		}
		code, _ := e.Extensions["code"].(string)
		if e.Message == "" || code == "" {
			t.Fatalf("%s: an error without a message or code: %s", method, raw)
		}
		codes[code] = true
	}
	// Codes each status may carry; UNAVAILABLE or INTERNAL would mean the
	// store failed or a resolver panicked.
	allowed := map[int][]string{
		http.StatusOK: {CodeForbidden, CodeBadAppID, CodeBadUserInput, CodeNotFound, CodeAlreadyExists, CodeMissingReference},
		http.StatusBadRequest: {CodeBadRequest, CodeParseFailed, CodeValidationFailed, CodeQueryTooDeep, CodeQueryTooComplex,
			CodeBadUserInput},
		http.StatusMethodNotAllowed:      {CodeMutationNotAllowed},
		http.StatusRequestEntityTooLarge: {CodeRequestTooLarge},
		http.StatusUnprocessableEntity:   {CodeAnswerTooLarge},
	}
	want, known := allowed[rec.Code]
	if !known {
		t.Fatalf("%s: status %d: %s", method, rec.Code, raw)
	}
	for code := range codes {
		if !slices.Contains(want, code) {
			t.Fatalf("%s: status %d with code %s: %s", method, rec.Code, code, raw)
		}
	}
	if rec.Code != http.StatusOK && len(a.Errors) == 0 {
		t.Fatalf("%s: status %d without errors: %s", method, rec.Code, raw)
	}
	if rec.Code == http.StatusOK && len(a.Data) == 0 && len(a.Errors) == 0 {
		t.Fatalf("%s: 200 with neither data nor errors: %s", method, raw)
	}
	if rec.Code == http.StatusMethodNotAllowed && method != http.MethodGet {
		t.Fatalf("%s: 405 for a POST: %s", method, raw)
	}
	if method == http.MethodPost && (int64(len(body)) > limits.MaxBodyBytes) != (rec.Code == http.StatusRequestEntityTooLarge) {
		t.Fatalf("POST of %d bytes (limit %d): %d %s", len(body), limits.MaxBodyBytes, rec.Code, raw)
	}
	if rec.Code != http.StatusOK {
		return
	}
	if int64(len(raw)) > limits.MaxAnswerBytes+1 { // and a newline
		t.Fatalf("%s: 200 with an answer of %d bytes (limit %d)", method, len(raw), limits.MaxAnswerBytes)
	}

	// What ran kept within the limits, counted here anew.
	var query, opName string
	if method == http.MethodPost {
		var r struct {
			Query         string `json:"query"`
			OperationName string `json:"operationName"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("POST answered 200 for a body that is not a request (%v): %q", err, body)
		}
		query, opName = r.Query, r.OperationName
	} else {
		v, _ := url.ParseQuery(rawQuery)
		query, opName = v.Get("query"), v.Get("operationName")
	}
	// graphql-go's parser misreads some queries with comments or byte
	// order marks in them (which the endpoint removes); those are not
	// counted.
	doc, err := parser.Parse(parser.ParseParams{Source: &source.Source{Body: []byte(query)}})
	if err != nil {
		return
	}
	depth, metaDepth, fields := selected(doc, opName, limits.MaxFields)
	if depth > limits.MaxDepth || metaDepth > limits.MaxIntrospectionDepth || fields > limits.MaxFields {
		t.Fatalf("%s: 200 for a request selecting %d fields, %d deep, introspection %d deep (limits %d, %d, %d): %q", method, fields, depth,
			metaDepth, limits.MaxFields, limits.MaxDepth, limits.MaxIntrospectionDepth, query)
	}
}

// selected counts the fields the operation selects once fragments are
// spread, __typename left out, and how deep fields of content and of
// introspection nest, walking a stack; counting stops past limit.
func selected(doc *ast.Document, opName string, limit int) (depth, metaDepth, fields int) {
	frags := map[string]*ast.FragmentDefinition{}
	var ops []*ast.OperationDefinition
	for _, d := range doc.Definitions {
		switch d := d.(type) {
		case *ast.FragmentDefinition:
			frags[d.Name.Value] = d
		case *ast.OperationDefinition:
			if opName == "" || d.Name != nil && d.Name.Value == opName {
				ops = append(ops, d)
			}
		}
	}
	if len(ops) != 1 {
		return 0, 0, 0
	}
	type item struct {
		sel   ast.Selection
		level int
		meta  bool
	}
	var stack []item
	push := func(s *ast.SelectionSet, level int, meta bool) {
		if s != nil {
			for _, sel := range s.Selections {
				stack = append(stack, item{sel, level, meta})
			}
		}
	}
	push(ops[0].SelectionSet, 1, false)
	for len(stack) > 0 && fields <= limit {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch s := it.sel.(type) {
		case *ast.Field:
			if s.Name.Value == "__typename" {
				continue
			}
			fields++
			meta := it.meta || strings.HasPrefix(s.Name.Value, "__")
			if meta {
				metaDepth = max(metaDepth, it.level)
			} else {
				depth = max(depth, it.level)
			}
			push(s.SelectionSet, it.level+1, meta)
		case *ast.InlineFragment:
			push(s.SelectionSet, it.level, it.meta)
		case *ast.FragmentSpread:
			if f := frags[s.Name.Value]; f != nil {
				push(f.SelectionSet, it.level, it.meta)
			}
		}
	}
	return depth, metaDepth, fields
}

// FuzzLexQuery holds the endpoint's lexer to graphql-go's: a query it
// refuses, graphql-go's lexer refuses too, and one it accepts, reshaped
// one token per line, graphql-go reads as the same tokens, so that its
// parser can fail only at the start of a token.
func FuzzLexQuery(f *testing.F) {
	for _, q := range querySeeds() {
		f.Add(q)
	}
	for _, q := range []string{`"\u12"`, `"\`, `"""\"""x"""`, "\"a\rb\"", "1.", "-", "0x1", ".", "..", "#\x01", "\"\xff\"", "a\xffb", "é"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		d := &document{query: q}
		rerr := d.lex()
		var body []byte
		for _, tok := range d.toks {
			body = append(append(body, q[tok.start:tok.end]...), '\n')
		}
		if rerr != nil {
			if code, _ := rerr.errs[0].Extensions["code"].(string); code != CodeParseFailed {
				return // nesting or size, not the lexer's concern
			}
			if len(q) > 4<<10 {
				return // graphql-go's error would cost time quadratic in its column
			}
			// The tokens read, then the rest from the one refused:
			// graphql-go's lexer must read the same tokens and fail
			// on the next.
			rest := 0
			if len(d.toks) > 0 {
				rest = d.toks[len(d.toks)-1].end
			}
			got, err := lexAll(append(body, q[rest:]...))
			if err == nil || len(got) != len(d.toks) {
				t.Fatalf("refused %q (%s), which graphql-go's lexer reads as %d tokens (error %v)", q, rerr.errs[0].Message, len(got), err)
			}
			return
		}
		got, err := lexAll(body)
		if err != nil {
			t.Fatalf("accepted %q, which graphql-go's lexer refuses once reshaped: %v", q, err)
		}
		if len(got) != len(d.toks) {
			t.Fatalf("%q: %d tokens, graphql-go reads %d", q, len(d.toks), len(got))
		}
		at := 0
		for i, tok := range d.toks {
			if got[i].Start != at || got[i].End != at+tok.end-tok.start {
				t.Fatalf("%q: token %d %q, graphql-go reads bytes %d to %d of %q", q, i, q[tok.start:tok.end], got[i].Start, got[i].End, body)
			}
			at += tok.end - tok.start + 1
		}
	})
}

// lexAll reads every token of body with graphql-go's lexer.
func lexAll(body []byte) ([]lexer.Token, error) {
	next := lexer.Lex(&source.Source{Body: bytes.Clone(body)})
	var out []lexer.Token
	for {
		tok, err := next(0)
		if err != nil {
			return out, err
		}
		if tok.Kind == lexer.EOF {
			return out, nil
		}
		out = append(out, tok)
	}
}
