package openapi_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	vErrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi/datamodel"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"github.com/assistantcms/cms/schemas/openapi"
)

// load parses spec with libopenapi and builds its model; base is the
// directory relative file references resolve from ("" allows none).
func load(spec []byte, base string) (libopenapi.Document, *v3.Document, error) {
	cfg := &datamodel.DocumentConfiguration{}
	if base != "" {
		abs, err := filepath.Abs(base)
		if err != nil {
			return nil, nil, fmt.Errorf("locate %s: %w", base, err)
		}
		cfg.BasePath, cfg.AllowFileReferences = abs, true
	}
	doc, err := libopenapi.NewDocumentWithConfiguration(spec, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("parse the document: %w", err)
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		return nil, nil, fmt.Errorf("build the OpenAPI 3 model: %w", err)
	}
	return doc, &m.Model, nil
}

// newValidator returns a validator of requests and responses against spec.
func newValidator(t *testing.T, spec []byte) validator.Validator {
	t.Helper()
	doc, _, err := load(spec, "")
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("build the validator: %v", errs)
	}
	return v
}

// describe joins validation errors with the schema failures they hold.
func describe(errs []*vErrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "\n  %s: %s", e.Message, e.Reason)
		for _, f := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n    %s: %s", f.FieldPath, f.Reason)
		}
	}
	return b.String()
}

// TestDocumentValidates loads both forms of the document with libopenapi
// and validates them against the OpenAPI 3.1 schema: the source, whose
// event schemas are files beside it, and the bundled form the api serves.
func TestDocumentValidates(t *testing.T) {
	source, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		spec []byte
		base string
	}{
		{"source with file references", source, "."},
		{"bundled, as served", openapi.Bundled(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, m, err := load(tc.spec, tc.base)
			if err != nil {
				t.Fatal(err)
			}
			if v := doc.GetVersion(); v != "3.1.0" {
				t.Errorf("version %q, want 3.1.0", v)
			}
			v, errs := validator.NewValidator(doc)
			if len(errs) > 0 {
				t.Fatalf("build the validator: %v", errs)
			}
			if ok, errs := v.ValidateDocument(); !ok {
				t.Fatalf("the document is not valid OpenAPI 3.1:%s", describe(errs))
			}
			// The event batch resolves through its $ref to the events
			// schema, down to the per-event rules.
			put := m.Paths.PathItems.GetOrZero("/cms/app/events").Put
			batch := put.RequestBody.Content.GetOrZero("application/json").Schema.Schema()
			events := batch.Properties.GetOrZero("events").Schema()
			event := events.Items.A.Schema()
			if event == nil || event.Properties.GetOrZero("type") == nil {
				t.Fatalf("the events batch does not resolve to event.schema.json's rules")
			}
		})
	}
}

// paramRE matches path parameters as OpenAPI ({name}) and Gin (:name,
// *name) write them.
var paramRE = regexp.MustCompile(`\{[^}]+\}|[:*][^/]+`)

// route is a method and path with its parameters unnamed, so that Gin's
// /cms/handler/:id and the document's /cms/handler/{intentId} compare
// equal.
func route(method, path string) string {
	return strings.ToUpper(method) + " " + paramRE.ReplaceAllString(path, "{}")
}

// operation is a documented method and path.
type operation struct {
	method, path string
	tags         []string
}

// operations lists every operation of m by route.
func operations(m *v3.Document) map[string]operation {
	ops := map[string]operation{}
	for path, item := range m.Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			ops[route(method, path)] = operation{method: strings.ToUpper(method), path: path, tags: op.Tags}
		}
	}
	return ops
}

// missing returns the keys of want absent from have, sorted.
func missing[V, W any](want map[string]V, have map[string]W) []string {
	var out []string
	for k := range want {
		if _, ok := have[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// concrete fills a documented path's parameters, for probing routers.
func concrete(path string) string {
	return regexp.MustCompile(`\{[^}]+\}`).ReplaceAllString(path, "x")
}

// newRequest builds a request for probes, failing the test on error.
func newRequest(t *testing.T, method, url string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
