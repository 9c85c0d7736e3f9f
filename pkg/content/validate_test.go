package content

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/assistantcms/cms/pkg/tenancy"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}

func TestParseRecordProblems(t *testing.T) {
	for _, tt := range []struct {
		kind Kind
		doc  string
		want []string // "path: message" of every problem, in order
	}{
		{KindHandler, `{"appId":"a","intentId":"I","content":{"I":[{"outputSpeech":"hi"}]},"forward":{"X":[{"intentId":"X"}]}}`, nil},
		{KindHandler, `[]`, []string{"must be an object, not an array"}},
		{KindHandler, `{"intentId":"I"}`, []string{"appId: is required"}},
		{KindHandler, `{"appId":"a","intentId":""}`, []string{"intentId: must not be empty"}},
		{KindHandler, `{"appId":"a","intentId":"a/b"}`, []string{"intentId: must not contain '/', since it appears in URL paths"}},
		{KindHandler, `{"appId":"a","intentId":"x\u0001"}`, []string{"intentId: must not contain control characters"}},
		{KindHandler, `{"appId":"a","intentId":"` + strings.Repeat("x", 257) + `"}`, []string{"intentId: is longer than 256 bytes"}},
		{KindHandler, `{"appId":"a","intentId":7}`, []string{"intentId: must be a string, not a number"}},
		{KindHandler, `{"appId":"a","intentId":"I","content":{"I":"hi","J":["x"]}}`,
			[]string{"content.I: must be an array, not a string", "content.J[0]: must be an object, not a string"}},
		{KindHandler, `{"appId":"a","intentId":"I","forward":{"X":[{"type":"START"}]},"redirect":[]}`,
			[]string{"forward.X[0].intentId: is required", "redirect: must be an object, not an array"}},
		{KindHandler, `{"appId":"a","intentId":"I","data":"x"}`, []string{"data: must be an object, not a string"}},
		{KindIntent, `{"appId":"a","intentId":"I","utterancePatterns":["a",1],"slots":[{"name":"s"},{"name":"t","type":"E","isList":"yes"}]}`,
			[]string{"utterancePatterns[1]: must be a string, not a number", "slots[0].type: is required", "slots[1].isList: must be a boolean, not a string"}},
		{KindEntity, `{"appId":"a","entityId":"E","type":"LIST","values":[{"synonyms":["x",null]}]}`,
			[]string{"type: must be REGEX or VALUE_SYNONYMS, not \"LIST\"", "values[0].name: is required", "values[0].synonyms[1]: must be a string, not null"}},
		{KindFAQ, `{"appId":"a","id":"f","questions":[],"answer":""}`,
			[]string{"questions: must hold at least one question", "answer: must not be empty"}},
		{KindFAQ, `{"appId":"a","id":"f"}`, []string{"questions: is required", "answer: is required"}},
		{KindDocument, `{"appId":"a","id":"d","location":1}`, []string{"document: is required", "location: must be a string, not a number"}},
	} {
		t.Run(tt.doc, func(t *testing.T) {
			_, problems := ParseRecord(tt.kind, decode(t, tt.doc), "", "")
			var got []string
			for _, p := range problems {
				got = append(got, p.Error())
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("problems\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestParseRecordKeepsFieldsAndDropsServerOnes(t *testing.T) {
	r, problems := ParseRecord(KindHandler, decode(t, `{"appId":"a","organizationId":"o","createdAt":"x","updatedAt":"y",
		"intentId":"I","zeta":1.50,"alpha":{"nested":[1,"<b>&</b>"]}}`), "", "")
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if r.AppID != "a" || r.ID != "I" || r.Kind != KindHandler {
		t.Errorf("record %+v", r)
	}
	// Keys sorted, numbers as written, markup not escaped.
	if want := `{"alpha":{"nested":[1,"<b>&</b>"]},"intentId":"I","zeta":1.50}`; string(r.Doc) != want {
		t.Errorf("doc %s, want %s", r.Doc, want)
	}
	// Written to an app by the caller: the document may omit appId, and
	// must not contradict it.
	if _, problems := ParseRecord(KindIntent, decode(t, `{"intentId":"I"}`), "given", ""); len(problems) > 0 {
		t.Errorf("appId given by the caller: %v", problems)
	}
	if _, problems := ParseRecord(KindIntent, decode(t, `{"appId":"other","intentId":"I"}`), "given", "x"); len(problems) != 1 ||
		problems[0].Path != "x.appId" {
		t.Errorf("contradicting appId: %v", problems)
	}
}

func TestRenderedRecord(t *testing.T) {
	r, _ := ParseRecord(KindEntity, decode(t, `{"appId":"a\"b","entityId":"E","values":[]}`), "", "")
	out := string(r.AppendJSON(nil, "org"))
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if m["appId"] != `a"b` || m["organizationId"] != "org" || m["entityId"] != "E" || m["createdAt"] == nil {
		t.Errorf("rendered %s", out)
	}
	empty := Record{AppID: "a", Doc: []byte(`{}`)}
	if err := json.Unmarshal(empty.AppendJSON(nil, "o"), &m); err != nil {
		t.Errorf("empty doc renders invalid JSON: %v", err)
	}
}

func TestParseApp(t *testing.T) {
	a, problems := ParseApp(decode(t, `{"appId":"a","organizationId":"o","name":"A","channels":[{"id":"w","type":"CHAT","key":"k"},{"id":"v"}],"summary":"s"}`), "")
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if a.Name != "A" || len(a.Channels) != 2 || a.Channels[0].Key != "k" || a.Channels[1].Key != "" {
		t.Errorf("app %+v", a)
	}
	if string(a.Doc) != `{"channels":[{"id":"w","key":"k","type":"CHAT"},{"id":"v"}],"summary":"s"}` {
		t.Errorf("doc %s", a.Doc)
	}
	if got := tenancy.ChannelsOf(a.Doc); len(got) != 2 || got[0] != (tenancy.Channel{ID: "w", Type: "CHAT", Key: "k"}) {
		t.Errorf("tenancy.ChannelsOf %+v", got)
	}
	_, problems = ParseApp(decode(t, `{"appId":"a","channels":[{"id":"w","key":"k"},{"id":"x","key":"k"}]}`), "")
	var got []string
	for _, p := range problems {
		got = append(got, p.Error())
	}
	want := []string{"organizationId: is required", "name: is required", `channels[1].key: "k" is the key of another channel of this app`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("problems %q, want %q", got, want)
	}
}

func TestNULIsRefusedEverywhere(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  any
		want string
	}{
		{"top-level field", map[string]any{"entityId": "E", "displayName": "a\x00b"}, "displayName: must not contain the NUL character"},
		{"nested value", map[string]any{"entityId": "E", "values": []any{map[string]any{"name": "x\x00"}}}, "values[0].name: must not contain the NUL character"},
		{"key", map[string]any{"entityId": "E", "extra\x00": 1}, "must not contain the NUL character (U+0000) in its name"},
	} {
		_, problems := ParseRecord(KindEntity, tc.doc, "app", "")
		var all []string
		for _, p := range problems {
			all = append(all, p.Error())
		}
		if !strings.Contains(strings.Join(all, "; "), tc.want) {
			t.Errorf("%s: problems %v, want one with %q", tc.name, all, tc.want)
		}
	}
	if _, problems := ParseOrganization(map[string]any{"id": "o", "name": "N\x00"}, ""); len(problems) == 0 {
		t.Error("an organization name with NUL was accepted")
	}
}

// TestNestingIsBounded holds documents to MaxNesting levels, the document
// itself the first: SQLite refuses JSON nested more than 1000 deep with
// an error that names nothing, so such content is refused here with its
// path, on every backend.
func TestNestingIsBounded(t *testing.T) {
	nested := func(levels int) string { // levels counts the document
		return `{"appId":"a","intentId":"I","data":` + strings.Repeat(`{"x":`, levels-2) + `[]` + strings.Repeat(`}`, levels-2) + `}`
	}
	if _, problems := ParseRecord(KindHandler, decode(t, nested(MaxNesting)), "", ""); len(problems) > 0 {
		t.Errorf("%d levels: %v", MaxNesting, problems)
	}
	_, problems := ParseRecord(KindHandler, decode(t, nested(MaxNesting+1)), "", "")
	want := "data" + strings.Repeat(".x", MaxNesting-1) + ": nests arrays and objects more than 128 deep"
	if len(problems) != 1 || problems[0].Error() != want {
		t.Errorf("%d levels: %v, want %q", MaxNesting+1, problems, want)
	}
	deep := decode(t, `{"appId":"a","organizationId":"o","name":"N","extra":[`+strings.Repeat("[", 200)+strings.Repeat("]", 200)+`]}`)
	if _, problems := ParseApp(deep, ""); len(problems) != 1 || !strings.HasPrefix(problems[0].Error(), "extra"+strings.Repeat("[0]", MaxNesting-1)+": nests") {
		t.Errorf("a deep app: %v", problems)
	}
}

// TestNumbersFitEveryBackend bounds numbers by their digits written out,
// as PostgreSQL stores them: beyond its numeric type a write failed there
// only, with an error naming nothing.
func TestNumbersFitEveryBackend(t *testing.T) {
	for n, ok := range map[string]bool{
		"0": true, "-12.50": true, "1.7976931348623157e308": true, "4.9e-324": true, "1e399": true,
		"123456789012345678901234567890.5": true, "1e400": false, "1e-400": false, "1e200000": false,
		"1e99999999999999999999": false, "1" + strings.Repeat("0", 400): false,
	} {
		_, problems := ParseRecord(KindHandler, decode(t, `{"appId":"a","intentId":"I","data":{"n":[`+n+`]}}`), "", "")
		if ok != (len(problems) == 0) {
			t.Errorf("%s: problems %v", n, problems)
		}
		if !ok && (len(problems) != 1 || !strings.HasPrefix(problems[0].Error(), "data.n[0]: is a number of more than 400 digits")) {
			t.Errorf("%s: problems %v, want one naming data.n[0]", n, problems)
		}
	}
}
