package bundle

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/tenancy"
)

func TestReadYAML(t *testing.T) {
	src := `
organizations:
  - {id: o, name: O}
apps:
  - appId: a
    organizationId: o
    name: "A"
    launched: 2024-05-01
handlers:
  - appId: a
    intentId: I
    data: {n: 3, f: 1.5, big: 12345678901234, yes: "yes", flag: true, none: null}
`
	f, err := Read(strings.NewReader(src), YAML)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Bundle.Organizations) != 1 || len(f.Bundle.Apps) != 1 || len(f.Bundle.Records) != 1 {
		t.Fatalf("bundle %+v", f.Bundle)
	}
	if got := string(f.Bundle.Records[0].Doc); got != `{"data":{"big":12345678901234,"f":1.5,"flag":true,"n":3,"none":null,"yes":"yes"},"intentId":"I"}` {
		t.Errorf("handler doc %s", got)
	}
	// A YAML date stays text, as JSON has no dates.
	if got := string(f.Bundle.Apps[0].Doc); got != `{"launched":"2024-05-01T00:00:00Z"}` {
		t.Errorf("app doc %s", got)
	}
}

func TestReadErrors(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		f         Format
		want      string
	}{
		{"empty", "", JSON, "the bundle is empty"},
		{"not an object", `[]`, JSON, "a bundle must be an object"},
		{"two values", `{} {}`, JSON, "more than one value"},
		{"list not a list", `{"handlers":{}}`, JSON, "handlers: must be a list"},
		{"NaN", "handlers:\n  - {appId: a, intentId: I, data: {x: .nan}}\n", YAML, "handlers[0].data.x: NaN is not a JSON number"},
		{"non-string key", "handlers:\n  - {appId: a, intentId: I, data: {1: x}}\n", YAML, "keys must be strings"},
		{"organization field", `{"organizations":[{"id":"o","name":"O","extra":1}]}`, JSON, `organizations[0] (id "o"): extra: is not a field of an organization`},
		{"binary that is not text", "handlers:\n  - {appId: a, intentId: I, data: {b: !!binary /w==}}\n", YAML, "handlers[0].data.b: is not UTF-8 text"},
		{"too deep", `{"handlers":[{"appId":"a","intentId":"I","data":{"x":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}}]}`, JSON,
			`handlers[0] (intentId "I"): data.x` + strings.Repeat("[0]", content.MaxNesting-2) + `: nests arrays and objects more than 128 deep`},
		{"duplicate app", `{"apps":[{"appId":"a","organizationId":"o","name":"A"},{"appId":"a","organizationId":"o","name":"B"}]}`, JSON,
			`apps[1] (appId "a"): same identifier as apps[0] (appId "a")`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tt.src), tt.f)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Read = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestManyProblemsAreCapped(t *testing.T) {
	var sb strings.Builder
	sb.WriteString(`{"faqs":[`)
	for i := range 120 {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"appId":"a"}`)
	}
	sb.WriteString(`]}`)
	_, err := Read(strings.NewReader(sb.String()), JSON)
	var e *Error
	if !errors.As(err, &e) || len(e.Problems) != maxProblems || e.More != 3*120-maxProblems {
		t.Fatalf("err %v", err)
	}
	if !strings.Contains(e.Error(), "and 310 more") {
		t.Errorf("message %q", e.Error())
	}
}

func TestWriteYAMLReadsBack(t *testing.T) {
	src := `{"organizations":[{"id":"o","name":"O"}],"apps":[{"appId":"a","organizationId":"o","name":"A"}],
	"handlers":[{"appId":"a","intentId":"I","data":{"s":"123","t":"true","e":"","sp":" lead","nl":"a\nb","n":1.50}}]}`
	back, out := throughYAML(t, src)
	// Strings that look like numbers or booleans stay strings.
	if got, want := string(back.Bundle.Records[0].Doc), `{"data":{"e":"","n":1.5,"nl":"a\nb","s":"123","sp":" lead","t":"true"},"intentId":"I"}`; got != want {
		t.Errorf("after YAML round trip %s, want %s\n%s", got, want, out)
	}
}

// throughYAML reads src as JSON, writes it as YAML and reads that back,
// returning what was read back and the YAML.
func throughYAML(t *testing.T, src string) (*File, string) {
	t.Helper()
	f, err := Read(strings.NewReader(src), JSON)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := Write(&out, &f.Bundle, YAML); err != nil {
		t.Fatal(err)
	}
	back, err := Read(strings.NewReader(out.String()), YAML)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	return back, out.String()
}

// TestWriteYAMLKeepsValues covers what YAML reads as something else than
// JSON does: a "<<" key, read unquoted as a merge key, and numbers beyond
// a float64, which the export refuses rather than changes.
func TestWriteYAMLKeepsValues(t *testing.T) {
	src := `{"handlers":[{"appId":"a","intentId":"I","data":{"<<":{"a":1},"n":12345678901234567890,"f":0.1,"e":-1.5e300}}]}`
	back, yaml := throughYAML(t, src)
	if got, want := string(back.Bundle.Records[0].Doc), `{"data":{"<<":{"a":1},"e":-1.5e+300,"f":0.1,"n":12345678901234567890},"intentId":"I"}`; got != want {
		t.Errorf("after YAML round trip %s, want %s\n%s", got, want, yaml)
	}

	// Characters YAML input may not hold raw (DEL, C1 controls,
	// non-characters), which encoding/json leaves unescaped.
	ctl, err := Read(strings.NewReader(`{"apps":[{"appId":"a","organizationId":"o","name":"del\u007f c1\u0080 nel\u0085 \ufffe\uffff","x":"\u009f"}]}`), JSON)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := Write(&out, &ctl.Bundle, YAML); err != nil {
		t.Fatalf("YAML export of control characters: %v", err)
	}
	if back, err := Read(strings.NewReader(out.String()), YAML); err != nil || !reflect.DeepEqual(back.Bundle.Apps, ctl.Bundle.Apps) {
		t.Errorf("control characters after YAML: %v %+v, want %+v\n%s", err, back, ctl.Bundle.Apps, out.String())
	}

	for _, n := range []string{"123456789012345678901234567890", "1e350", "0.10000000000000000001"} {
		f, err := Read(strings.NewReader(`{"handlers":[{"appId":"a","intentId":"I","data":{"big":[`+n+`]}}]}`), JSON)
		if err != nil {
			t.Fatal(err)
		}
		var ne *NumberError
		err = Write(io.Discard, &f.Bundle, YAML)
		if !errors.As(err, &ne) || ne.Path != "handlers[0].data.big[0]" || ne.Number != n {
			t.Errorf("%s: YAML export error %v, want one naming handlers[0].data.big[0]", n, err)
		}
		if err := Write(io.Discard, &f.Bundle, JSON); err != nil {
			t.Errorf("%s: JSON export: %v", n, err)
		}
	}
}

func TestExplain(t *testing.T) {
	f, err := Read(strings.NewReader(`{"intents":[{"appId":"a","intentId":"X"},{"appId":"b","intentId":"Y"}]}`), JSON)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Explain(&content.ItemError{Section: content.SectionRecords, Index: 1, Err: content.Problem{Path: "appId", Message: "no such app"}})
	if err.Error() != `intents[1] (intentId "Y"): appId: no such app` {
		t.Errorf("Explain = %q", err)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body, wantErr string
	}{
		{"b.json", `{"organizations":[{"id":"o","name":"O"}]}`, ""},
		{"b.yaml", "organizations:\n  - {id: o, name: O}\n", ""},
		{"bad.yaml", "organizations: [{id: o}]\n", "b/bad.yaml"},
		{"missing.json", "", "open bundle"},
	} {
		path := filepath.Join(dir, tc.name)
		if tc.body != "" {
			if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		file, err := ReadFile(path)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(tc.wantErr, "b/")) {
				t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case len(file.Bundle.Organizations) != 1 || file.Bundle.Organizations[0].ID != "o":
			t.Errorf("%s: organizations %+v", tc.name, file.Bundle.Organizations)
		}
	}
}

func TestTokens(t *testing.T) {
	hash := strings.Repeat("0f", 32)
	good := `{"organizations":[{"id":"o","name":"O"}],"tokens":[` +
		`{"id":"0123456789abcdef","hash":"` + hash + `","organizationId":"o","appId":"a","name":"web","createdAt":"2026-01-02T03:04:05.123Z","revokedAt":"2026-02-01T00:00:00Z"},` +
		`{"id":"fedcba9876543210","hash":"` + hash + `","organizationId":"o","createdAt":"2026-01-02T03:04:05Z"},` +
		`{"id":"00000000000000aa","hash":"` + hash + `","organizationId":"o","scopes":["events:write","content:read"],"createdAt":"2026-01-02T03:04:05Z"}]}`
	f, err := Read(strings.NewReader(good), JSON)
	if err != nil {
		t.Fatal(err)
	}
	// Tokens of a bundle written before scopes keep what they could do.
	for i, want := range []tenancy.Scopes{tenancy.LegacyScopes, tenancy.LegacyScopes, tenancy.RuntimeScopes} {
		if got := f.Bundle.Tokens[i].Scopes; got != want {
			t.Errorf("token %d: scopes %s, want %s", i, got, want)
		}
	}
	if len(f.Bundle.Tokens) != 3 || f.Bundle.Tokens[0].AppID != "a" || !f.Bundle.Tokens[0].Revoked() || f.Bundle.Tokens[1].Revoked() ||
		f.Bundle.Tokens[0].CreatedAt.Format(time.RFC3339Nano) != "2026-01-02T03:04:05.123Z" || len(f.Bundle.Tokens[1].Hash) != 32 {
		t.Fatalf("tokens %+v", f.Bundle.Tokens)
	}
	// Written and read back, the tokens are the same.
	for _, format := range []Format{JSON, YAML} {
		var sb strings.Builder
		if err := Write(&sb, &f.Bundle, format); err != nil {
			t.Fatal(err)
		}
		back, err := Read(strings.NewReader(sb.String()), format)
		if err != nil {
			t.Fatalf("%s: %v\n%s", format, err, sb.String())
		}
		if !reflect.DeepEqual(back.Bundle.Tokens, f.Bundle.Tokens) {
			t.Errorf("%s: tokens %+v, want %+v", format, back.Bundle.Tokens, f.Bundle.Tokens)
		}
	}
	for _, tc := range []struct{ token, want string }{
		{`{"id":"t1","hash":"abc","organizationId":"o","createdAt":"2026-01-02T03:04:05Z"}`, `tokens[0] (id "t1"): hash: must be 64 hexadecimal characters`},
		{`{"id":"t1","hash":"` + hash + `","organizationId":"o"}`, `tokens[0] (id "t1"): createdAt: is required`},
		{`{"id":"t1","hash":"` + hash + `","organizationId":"o","createdAt":"yesterday"}`, `createdAt: must be an RFC 3339 time`},
		// In UTC these have no four-digit year: written out, they would not read again.
		{`{"id":"t1","hash":"` + hash + `","organizationId":"o","createdAt":"0000-01-01T00:30:00+01:00"}`, `createdAt: must be a time between the years 0000 and 9999 in UTC`},
		{`{"id":"t1","hash":"` + hash + `","organizationId":"o","createdAt":"2026-01-01T00:00:00Z","revokedAt":"9999-12-31T23:00:00-05:00"}`, `revokedAt: must be a time between the years 0000 and 9999 in UTC`},
		{`{"id":"t1","hash":"` + hash + `","createdAt":"2026-01-02T03:04:05Z","secret":"x"}`, `organizationId: is required`},
		{`{"id":"t1","hash":"` + hash + `","organizationId":"o","createdAt":"2026-01-02T03:04:05Z","secret":"x"}`, `secret: is not a field of a token`},
		{`{"id":"t1","hash":"` + hash + `","organizationId":"o","createdAt":"2026-01-02T03:04:05Z","scopes":["content:read","admin"]}`, `scopes[1]: "admin" is not a scope (content:draft, content:read, content:write, events:read, events:write)`},
		{`{"id":"t1","hash":"` + hash + `","organizationId":"o","createdAt":"2026-01-02T03:04:05Z","scopes":["content:read,content:write"]}`, `scopes[0]: "content:read,content:write" is not a scope`},
		{`{"id":"t1","hash":"` + hash + `","organizationId":"o","createdAt":"2026-01-02T03:04:05Z","scopes":[]}`, `scopes: must name at least one scope`},
		{`{"id":"t1","hash":"` + hash + `","organizationId":"o","createdAt":"2026-01-02T03:04:05Z","scopes":"content:read"}`, `scopes: must be an array, not a string`},
	} {
		_, err := Read(strings.NewReader(`{"tokens":[`+tc.token+`]}`), JSON)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.token, err, tc.want)
		}
	}
}
