package bundle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/assistantcms/cms/pkg/content"
)

// bundleSeeds are bundles as people write them and bundles aimed at the
// corners of JSON, YAML and the checks, each with its format.
func bundleSeeds() []struct {
	data string
	yaml bool
} {
	hash := strings.Repeat("ab", 32)
	return []struct {
		data string
		yaml bool
	}{
		{`{"organizations":[{"id":"o","name":"O"}],"apps":[{"appId":"a","organizationId":"o","name":"A","channels":[{"id":"web","type":"WEB","key":"k1"}]}]}`, false},
		{`{"handlers":[{"appId":"a","intentId":"I","content":{"I":[{"outputSpeech":"hi"}]},"forward":{"F":[{"intentId":"F","type":"START"}]},"data":{"n":1.50,"big":123456789012345678901234567890}}]}`, false},
		{`{"entities":[{"appId":"a","entityId":"COLOR","type":"VALUE_SYNONYMS","values":[{"name":"red","synonyms":["crimson"]}]}],"faqs":[{"appId":"a","id":"f","questions":["q?"],"answer":"yes"}],"documents":[{"appId":"a","id":"d","document":"text","location":"downtown"}]}`, false},
		{`{"tokens":[{"id":"0123456789abcdef","hash":"` + hash + `","organizationId":"o","appId":"a","createdAt":"2026-01-02T03:04:05.123+01:00","revokedAt":"2026-02-01T00:00:00Z"}]}`, false},
		{`{"handlers":[{"appId":"a","intentId":"I","content":{"I":"not a list"}},{"appId":"a","intentId":"I"},"x",{"appId":"a/b","intentId":""}],"extra":[]}`, false},
		{`{"intents":[{"appId":"a","intentId":"I","slots":[{"name":"s","type":"T","isList":"yes"}],"nul":"\u0000"}]}`, false},
		{`{"intents":[{"appId":"a","intentId":"I","deep":` + strings.Repeat("[", 130) + strings.Repeat("]", 130) + `}]}`, false},
		{`{"faqs":[{"appId":"a","id":"f","questions":[],"answer":"","url":1}]} {}`, false},
		{`{"apps":[{"appId":"\ud800","organizationId":"o","name":"\u00e9\u2028"}]}`, false},
		{"organizations:\n  - {id: o, name: O}\napps:\n  - appId: a\n    organizationId: o\n    name: A\n    launched: 2024-05-01\n    channels: [{id: web, key: k}]\n", true},
		{"handlers:\n  - &h {appId: a, intentId: I, data: {yes: yes, no: no, on: on, tilde: ~, hex: 0x1F, oct: 0o17, under: 1_000, inf: .inf}}\n  - {<<: *h, intentId: J}\n", true},
		{"handlers:\n  - appId: a\n    intentId: I\n    data: {b: !!binary /w==, t: 2001-12-14t21:59:43.10-05:00, f: 1e400, s: \"1.50\", e: \"\"}\n", true},
		{"handlers:\n  - appId: a\n    intentId: I\n    data:\n      text: |\n        two\n        lines\n      trailing: \"x \"\n      \"<<\": merge\n      \"null\": ~\n", true},
		{"intents:\n  - {appId: a, intentId: I, x: 1, x: 2}\n", true},
		{"intents:\n  - {appId: a, intentId: I, data: {1: x, [a]: y}}\n", true},
		{"a: &a [*a]\n", true},
		{"---\nfaqs: []\n---\nfaqs: [1]\n", true},
		{"", true},
		{"[]", false},
	}
}

// FuzzReadBundle reads arbitrary bytes as JSON and as YAML: reading never
// panics, each problem names its item and path, and a bundle that reads
// writes back, in either format, to a file that reads as the same bundle.
func FuzzReadBundle(f *testing.F) {
	for _, s := range bundleSeeds() {
		f.Add([]byte(s.data), s.yaml)
	}
	// How a problem names where it is: a list of the bundle, the item and
	// its identifier, then the path inside the item.
	itemPath := regexp.MustCompile(`^(organizations|apps|intents|handlers|entities|faqs|documents|tokens)(\[\d+\]( \((id|appId|intentId|entityId) ".*"\))?)?: .`)
	f.Fuzz(func(t *testing.T, data []byte, asYAML bool) {
		format := JSON
		if asYAML {
			format = YAML
		}
		file, err := Read(bytes.NewReader(data), format)
		if err != nil {
			var be *Error
			switch {
			case err.Error() == "":
				t.Fatalf("an error without a message for %q", data)
			case !errors.As(err, &be):
				return // the file is not JSON or YAML, or not an object
			case len(be.Problems) == 0:
				t.Fatalf("a bundle error without problems for %q", data)
			}
			for _, p := range be.Problems {
				// An unknown list is named by its key, which may be anything.
				if !itemPath.MatchString(p) && !strings.HasSuffix(p, ": unknown list (expected organizations, apps, intents, handlers, entities, faqs, documents, tokens)") {
					t.Fatalf("problem %q does not name where it is, for %q", p, data)
				}
			}
			return
		}
		checkRoundTrip(t, &file.Bundle)
	})
}

// checkRoundTrip writes a bundle in each format and reads it back: the
// same bundle, or, in YAML, a number refused that YAML would change.
func checkRoundTrip(t *testing.T, b *content.Bundle) {
	t.Helper()
	for _, out := range []Format{JSON, YAML} {
		var buf bytes.Buffer
		var ne *NumberError
		if err := Write(&buf, b, out); out == YAML && errors.As(err, &ne) {
			if survivesYAML(ne.Number) {
				t.Fatalf("YAML refused %s, which reads back from YAML unchanged", ne.Number)
			}
			continue // refused rather than changed
		} else if err != nil {
			t.Fatalf("write %s: %v, for\n%s", out, err, describe(b))
		}
		back, err := Read(bytes.NewReader(buf.Bytes()), out)
		if err != nil {
			t.Fatalf("%s written does not read back (%v):\n%s\nfrom\n%s", out, err, buf.Bytes(), describe(b))
		}
		if !sameBundle(&back.Bundle, b) {
			t.Fatalf("%s written reads back as another bundle:\n%s\nwant\n%s\nwritten:\n%s", out, describe(&back.Bundle), describe(b), buf.Bytes())
		}
	}
}

// TestDemoBundleRoundTrip holds the demo bundle, real content, to what
// FuzzReadBundle checks; it is too large to fuzz from quickly.
func TestDemoBundleRoundTrip(t *testing.T) {
	f, err := ReadFile("../../../deploy/demo/content.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Bundle.Records) < 100 {
		t.Fatalf("the demo bundle has %d records", len(f.Bundle.Records))
	}
	checkRoundTrip(t, &f.Bundle)
}

// sameBundle compares bundles item by item; documents are compared as
// JSON values, numbers by their decimal value, so that 1.50 and 1.5 are
// one number.
func sameBundle(a, b *content.Bundle) bool {
	if len(a.Apps) != len(b.Apps) || len(a.Records) != len(b.Records) {
		return false
	}
	for i := range a.Apps {
		x, y := a.Apps[i], b.Apps[i]
		if !sameDoc(x.Doc, y.Doc) {
			return false
		}
		x.Doc, y.Doc = nil, nil
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	for i := range a.Records {
		x, y := a.Records[i], b.Records[i]
		if !sameDoc(x.Doc, y.Doc) {
			return false
		}
		x.Doc, y.Doc = nil, nil
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return reflect.DeepEqual(a.Organizations, b.Organizations) && reflect.DeepEqual(a.Tokens, b.Tokens)
}

// describe prints a bundle for a failure message, documents as text.
func describe(b *content.Bundle) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "organizations %+v\ntokens %+v\n", b.Organizations, b.Tokens)
	for _, a := range b.Apps {
		fmt.Fprintf(&sb, "app %q org %q name %q channels %+v doc %s\n", a.ID, a.OrganizationID, a.Name, a.Channels, a.Doc)
	}
	for _, r := range b.Records {
		fmt.Fprintf(&sb, "%s %q/%q location %q doc %s\n", r.Kind, r.AppID, r.ID, r.Location, r.Doc)
	}
	return sb.String()
}

func sameDoc(a, b json.RawMessage) bool {
	x, errA := decodeNumbers(a)
	y, errB := decodeNumbers(b)
	return errA == nil && errB == nil && reflect.DeepEqual(x, y)
}

// decodeNumbers decodes JSON with every number in one spelling.
func decodeNumbers(doc json.RawMessage) (any, error) {
	if doc == nil {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return normalNumbers(v), nil
}

func normalNumbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = normalNumbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = normalNumbers(e)
		}
	case json.Number:
		return canonicalNumber(string(v))
	}
	return v
}

// survivesYAML reports whether a JSON number, written to YAML, reads back
// through the YAML decoder as the same number.
func survivesYAML(num string) bool {
	var v map[string]any
	if err := yaml.Unmarshal([]byte("x: "+num), &v); err != nil {
		return false
	}
	var back string
	switch x := v["x"].(type) {
	case int:
		back = strconv.Itoa(x)
	case uint64:
		back = strconv.FormatUint(x, 10)
	case float64:
		back = strconv.FormatFloat(x, 'g', -1, 64)
	default:
		return false
	}
	return canonicalNumber(back) == canonicalNumber(num)
}
