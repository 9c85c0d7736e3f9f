package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/bundle"
	"github.com/assistantcms/cms/pkg/content/contentdb"
	"github.com/assistantcms/cms/pkg/tenancy"
)

const demoBundle = "../../../deploy/demo/content.yaml"

// decodeAny reads a bundle file as plain JSON-shaped values.
func decodeAny(t *testing.T, path string) map[string]any {
	t.Helper()
	file, err := bundle.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Re-encode through Write so both sides have the same shape.
	var sb strings.Builder
	if err := bundle.Write(&sb, &file.Bundle, bundle.JSON); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(sb.String()), &m); err != nil {
		t.Fatal(err)
	}
	// Exports list records by ID; a file may hold them in any order.
	for k, v := range m {
		list, _ := v.([]any)
		sort.Slice(list, func(i, j int) bool {
			a, _ := json.Marshal(list[i])
			b, _ := json.Marshal(list[j])
			return string(a) < string(b)
		})
		m[k] = list
	}
	return m
}

func TestImportExportRoundTrip(t *testing.T) {
	e := newEnv(t)
	out := e.must("import", demoBundle)
	if !regexp.MustCompile(`imported .* \d+ created, 0 updated, 0 unchanged`).MatchString(out) {
		t.Errorf("import output %q", out)
	}
	// A second import changes nothing.
	if out := e.must("import", demoBundle); !strings.Contains(out, " 0 created, 0 updated,") {
		t.Errorf("second import %q", out)
	}
	dir := t.TempDir()
	for _, name := range []string{"out.json", "out.yaml"} {
		path := filepath.Join(dir, name)
		e.must("export", "-o", path)
		got, want := decodeAny(t, path), decodeAny(t, demoBundle)
		if !jsonSame(got, want) {
			gj, _ := json.MarshalIndent(got, "", " ")
			wj, _ := json.MarshalIndent(want, "", " ")
			t.Errorf("%s differs from the imported bundle:\n%.2000s\nwant\n%.2000s", name, gj, wj)
		}
	}
	// The exported file imports back as unchanged.
	if out := e.must("import", filepath.Join(dir, "out.json")); !strings.Contains(out, " 0 created, 0 updated,") {
		t.Errorf("import of the export %q", out)
	}
	// Standard output, one app.
	stdout := e.must("export", "--app", "demo-app", "--format", "yaml")
	if !strings.Contains(stdout, "intentId: LaunchRequest") {
		t.Errorf("YAML export of demo-app lacks its handlers:\n%.500s", stdout)
	}
	if r := e.run("export", "--app", "ghost"); r.code != ExitFailure || !strings.Contains(r.stderr, "ghost") {
		t.Errorf("export of a missing app: %d %q", r.code, r.stderr)
	}
}

func jsonSame(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func TestImportErrorsNameRecordAndPath(t *testing.T) {
	e := newEnv(t)
	e.must("import", demoBundle)
	before := e.must("export")
	dir := t.TempDir()
	for _, tt := range []struct {
		name, file, content string
		want                []string
	}{
		{"bad field", "bad.json", `{"handlers":[{"appId":"demo-app","intentId":"Ok"},{"appId":"demo-app","intentId":"X","content":{"X":"hello"}}]}`,
			[]string{`handlers[1] (intentId "X"): content.X: must be an array`}},
		{"several problems", "bad.yaml", "faqs:\n  - appId: demo-app\n    id: f1\n    questions: []\n  - appId: demo-app\n    answer: 42\n",
			[]string{`faqs[0] (id "f1"): questions: must hold at least one question`, `faqs[0] (id "f1"): answer: is required`,
				`faqs[1]: id: is required`, `faqs[1]: answer: must be a string, not a number`}},
		{"unknown app", "ghost.json", `{"handlers":[{"appId":"demo-app","intentId":"New"},{"appId":"ghost","intentId":"X"}]}`,
			[]string{`handlers[1] (intentId "X"): appId: app "ghost" does not exist`, "nothing was changed"}},
		{"duplicate", "dup.json", `{"entities":[{"appId":"demo-app","entityId":"E"},{"appId":"demo-app","entityId":"E"}]}`,
			[]string{`entities[1] (entityId "E"): same identifier as entities[0]`}},
		{"unknown list", "list.json", `{"handler":[]}`, []string{"handler: unknown list"}},
		{"not JSON", "broken.json", `{"handlers":[`, []string{"read JSON"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.file)
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			r := e.run("import", path)
			if r.code != ExitFailure {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
		})
	}
	if after := e.must("export"); after != before {
		t.Errorf("failed imports changed the database")
	}
}

// BenchmarkImport100k imports a bundle of 100,000 records (handlers,
// intents and FAQs of 20 apps) into a new database, as `api import` does:
// read, check, write in one transaction.
//
//	go test -run XXX -bench Import100k -benchtime 3x ./pkg/content/admin
func BenchmarkImport100k(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "big.json")
	var sb strings.Builder
	sb.WriteString(`{"organizations":[{"id":"o","name":"O"}],"apps":[`)
	for a := range 20 {
		if a > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"appId":"app-%d","organizationId":"o","name":"App %d"}`, a, a)
	}
	sb.WriteString(`],"handlers":[`)
	const perKind = 33_333
	for i := range perKind {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"appId":"app-%d","intentId":"Intent%d","name":"Intent %d","type":"InSessionIntent",`+
			`"content":{"Intent%d":[{"outputSpeech":{"displayText":"Answer %d","ssml":"<speak>Answer %d</speak>"}}]},`+
			`"forward":{"HelpIntent":[{"intentId":"HelpIntent","type":"START"}]},"data":{"n":%d}}`, i%20, i, i, i, i, i, i)
	}
	sb.WriteString(`],"intents":[`)
	for i := range perKind {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"appId":"app-%d","intentId":"Intent%d","utterancePatterns":["say %d","tell me %d"]}`, i%20, i, i, i)
	}
	sb.WriteString(`],"faqs":[`)
	for i := range 100_000 - 2*perKind {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"appId":"app-%d","id":"faq-%d","questions":["question %d?"],"answer":"answer %d"}`, i%20, i, i, i)
	}
	sb.WriteString(`]}`)
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		db := filepath.Join(dir, fmt.Sprintf("db-%d", i))
		var stdout, stderr strings.Builder
		code := Run(b.Context(), []string{"import", path}, &stdout, &stderr, func(ctx context.Context) (content.Store, error) {
			return contentdb.OpenDB(ctx, db)
		})
		if code != ExitOK || !strings.Contains(stdout.String(), "100021 created") {
			b.Fatalf("exit %d: %s %s", code, stdout.String(), stderr.String())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/import")
}

// TestExportWithTokensMovesADatabase moves everything, tokens included, to
// another database, as moving from SQLite to PostgreSQL does.
func TestExportWithTokensMovesADatabase(t *testing.T) {
	from, to := newEnv(t), newEnv(t)
	from.must("import", demoBundle)
	appSecret := strings.TrimSpace(from.must("token", "create", "--app", "demo-app", "--name", "runtime", "--quiet"))
	from.must("token", "create", "--org", "demo-org", "--name", "all runtimes")
	old := strings.TrimSpace(from.must("token", "create", "--app", "demo-app", "--name", "old", "--quiet"))
	from.must("token", "revoke", strings.Split(old, "_")[1])
	path := filepath.Join(t.TempDir(), "all.json")
	from.must("export", "--tokens", "-o", path)

	// Tokens are credentials: a plain import refuses them.
	if r := to.run("import", path); r.code != ExitFailure || !strings.Contains(r.stderr, "holds 3 access tokens; import them with --tokens") {
		t.Errorf("import without --tokens: %d %q", r.code, r.stderr)
	}
	if out := to.must("import", "--tokens", path); !strings.Contains(out, "tokens: 3 created, 0 revoked, 0 unchanged") {
		t.Errorf("first import: %q", out)
	}
	ctx := t.Context()
	want, err := from.store().ListTokens(ctx, tenancy.TokenFilter{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := to.store().ListTokens(ctx, tenancy.TokenFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tokens after the move:\n%+v\nwant\n%+v", got, want)
	}
	// The secret issued by the old database works against the new one.
	authn, err := auth.NewAuthenticator(to.store(), auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"Authorization": {"Bearer " + appSecret}}
	if p, err := authn.Authenticate(ctx, h); err != nil || p.AppID != "demo-app" {
		t.Errorf("the moved token authenticates as %+v, %v; want demo-app", p, err)
	}
	if _, err := authn.Authenticate(ctx, http.Header{"Authorization": {"Bearer " + old}}); err == nil {
		t.Error("the revoked token works after the move")
	}
	// Again: nothing changes. A revocation made since moves over.
	if out := to.must("import", "--tokens", path); !strings.Contains(out, "tokens: 0 created, 0 revoked, 3 unchanged") || !strings.Contains(out, " 0 created, 0 updated,") {
		t.Errorf("second import: %q", out)
	}
	from.must("token", "revoke", strings.Split(appSecret, "_")[1])
	from.must("export", "--tokens", "-o", path)
	if out := to.must("import", "--tokens", path); !strings.Contains(out, "tokens: 0 created, 1 revoked, 2 unchanged") {
		t.Errorf("import after a revocation: %q", out)
	}
	// A token that exists with another hash is never overwritten.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	forged := regexp.MustCompile(`"hash": ?"[0-9a-f]{64}"`).ReplaceAllString(string(b), `"hash":"`+strings.Repeat("ab", 32)+`"`)
	if err := os.WriteFile(path, []byte(forged), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := to.run("import", "--tokens", path); r.code != ExitFailure || !strings.Contains(r.stderr, "exists with another secret or owner") {
		t.Errorf("import of a token with another hash: %d %q", r.code, r.stderr)
	}
}
