package graphql

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkReplaceEntityValues10k refreshes an entity with 10,000 values
// (each with a canonical ID and two synonyms) in one replaceEntityValues
// mutation over HTTP, on the SQLite store: parse, validate, write, answer.
//
//	go test -run XXX -bench ReplaceEntityValues -benchtime 20x ./pkg/content/graphql
func BenchmarkReplaceEntityValues10k(b *testing.B) {
	e := newEnv(b, Limits{}, nil)
	values := make([]any, 10_000)
	for i := range values {
		values[i] = map[string]any{"name": fmt.Sprintf("product %d", i), "canonicalId": fmt.Sprintf("sku-%06d", i),
			"synonyms": []any{fmt.Sprintf("item %d", i), fmt.Sprintf("article %d", i)}}
	}
	body, _ := json.Marshal(map[string]any{
		"query":     `mutation($v: [EntityValueInput!]!) { replaceEntityValues(entityId: "COLOR", values: $v) { entityId updatedAt } }`,
		"variables": map[string]any{"v": values},
	})
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for range b.N {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/cms/graphql", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+e.tokens["app1"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		var a answer
		err = json.NewDecoder(resp.Body).Decode(&a)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || len(a.Errors) > 0 {
			b.Fatalf("%d %v %v", resp.StatusCode, err, a.Errors)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/mutation")
}

// BenchmarkRead answers a read of every field of every handler, intent
// and entity of the fixture over HTTP: parse, validate, weigh, resolve,
// encode.
//
//	go test -run XXX -bench Read -count 6 ./pkg/content/graphql
func BenchmarkRead(b *testing.B) {
	e := newEnv(b, Limits{}, nil)
	body, _ := json.Marshal(map[string]any{"query": `{
		handlers { appId organizationId intentId name type langCode defaultLocale locales contexts substitutions nlu graphCoords createdAt updatedAt
			utterancePatterns slots { name type isList nlu } data permissions
			content { key handlerResponse } forward { key paths } redirect { key paths } document }
		intents { intentId name utterancePatterns slots { name type } createdAt updatedAt document }
		entities { entityId displayName type nlu values { name canonicalId synonyms } document }
	}`})
	b.ReportAllocs()
	for range b.N {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/cms/graphql", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+e.tokens["app1"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		var a answer
		err = json.NewDecoder(resp.Body).Decode(&a)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || len(a.Errors) > 0 {
			b.Fatalf("%d %v %v", resp.StatusCode, err, a.Errors)
		}
	}
}
