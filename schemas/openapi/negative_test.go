package openapi_test

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/assistantcms/cms/schemas/openapi"
)

// edited returns the bundled document changed by edit.
func edited(t *testing.T, edit func(root *yaml.Node)) []byte {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal(openapi.Bundled(), &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc.Content[0])
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// without removes key from mapping n, failing when it is not there, so
// that an edit cannot silently miss.
func without(t *testing.T, n *yaml.Node, key string) {
	t.Helper()
	for i := 0; n != nil && i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			n.Content = slices.Delete(n.Content, i, i+2)
			return
		}
	}
	t.Fatalf("the document has no %q to remove", key)
}

// ragAnswer is a RAG answer as the api gives it.
const ragAnswer = `{"result":"Bring it back within 30 days.","hasAnswer":true,"sources":[{"url":"https://example.com/returns","title":"Returns"}]}`

// respond is a recorded answer to req, for validation.
func respond(req *http.Request, status int, body string) *http.Response {
	return &http.Response{
		StatusCode: status, Request: req,
		Header: http.Header{"Content-Type": {"application/json; charset=utf-8"}},
		Body:   io.NopCloser(strings.NewReader(body)),
	}
}

// TestUndocumentedIsCaught shows that the checks fail when the document
// falls behind the code: a route the api registers but the document lacks
// is reported both by the route comparison and by the validator, and a
// response field the strict schema does not list fails validation.
func TestUndocumentedIsCaught(t *testing.T) {
	paths := func(root *yaml.Node) *yaml.Node { return lookup(root, "paths") }
	ragSchema := func(root *yaml.Node) *yaml.Node {
		return lookup(lookup(lookup(root, "components"), "schemas"), "RAGAnswer")
	}
	for _, tc := range []struct {
		name string
		edit func(t *testing.T, root *yaml.Node)
		// want is a substring of the validator's report on a GET /cms/rag
		// answered 200 with ragAnswer.
		want string
		// undocumented is the route the comparison must report, if any.
		undocumented string
	}{
		{
			name:         "a registered path removed",
			edit:         func(t *testing.T, root *yaml.Node) { without(t, paths(root), "/cms/rag") },
			want:         "GET Path '/cms/rag' not found",
			undocumented: "GET /cms/rag",
		},
		{
			name: "a response property removed from a strict schema",
			edit: func(t *testing.T, root *yaml.Node) {
				s := ragSchema(root)
				if v := lookup(s, "additionalProperties"); v == nil || v.Value != "false" {
					t.Fatal("RAGAnswer is not strict (additionalProperties: false)")
				}
				without(t, lookup(s, "properties"), "hasAnswer")
				req := lookup(s, "required")
				req.Content = slices.DeleteFunc(req.Content, func(n *yaml.Node) bool { return n.Value == "hasAnswer" })
			},
			want: "hasAnswer",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := edited(t, func(root *yaml.Node) { tc.edit(t, root) })
			req := newRequest(t, http.MethodGet, "http://127.0.0.1:18000/cms/rag?question=returns")
			req.Header.Set("Authorization", "Bearer cms_0123456789abcdef_secret")

			// The unedited document accepts the same exchange, so the
			// failure below is the edit's.
			if ok, errs := newValidator(t, openapi.Bundled()).ValidateHttpRequestResponse(req, respond(req, http.StatusOK, ragAnswer)); !ok {
				t.Fatalf("the served document refuses a good exchange:%s", describe(errs))
			}
			ok, errs := newValidator(t, spec).ValidateHttpRequestResponse(req, respond(req, http.StatusOK, ragAnswer))
			if ok {
				t.Fatal("the edited document accepts the exchange")
			}
			if report := describe(errs); !strings.Contains(report, tc.want) {
				t.Errorf("the report does not mention %q:%s", tc.want, report)
			}

			if tc.undocumented != "" {
				_, m, err := load(spec, "")
				if err != nil {
					t.Fatal(err)
				}
				documented := operations(m)
				if got := missing(registered(t, documented), documented); !slices.Equal(got, []string{tc.undocumented}) {
					t.Errorf("the comparison reports %v as undocumented, want [%s]", got, tc.undocumented)
				}
			}
		})
	}
}
