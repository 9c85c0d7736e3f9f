package graphql

import (
	"strings"
	"testing"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// TestPublishing: with publishing on, writes change the draft, which
// management and preview tokens read, while runtime tokens read the live
// version until a publish; a rollback makes an earlier version live; a
// catalogue's write may publish itself alone; runtime tokens can do none
// of it.
func TestPublishing(t *testing.T) {
	e := newEnv(t, Limits{}, nil)
	e.addToken("runtime", tenancy.RuntimeScopes)
	e.addToken("preview", tenancy.PreviewScopes)
	values := func(token string) string {
		t.Helper()
		a := e.post(token, `{ entity(entityId: "COLOR") { values { name } } }`, nil)
		if len(a.Errors) > 0 {
			t.Fatalf("%s reads the entity: %s", token, a.raw)
		}
		return jsonOf(a.Data["entity"])
	}
	must := func(query string) map[string]any {
		t.Helper()
		a := e.post("app1", query, nil)
		if len(a.Errors) > 0 {
			t.Fatalf("%.80s: %s", query, a.raw)
		}
		return a.Data
	}
	replace := func(name string, publish bool) {
		t.Helper()
		a := e.post("app1", `mutation($p: Boolean) { replaceEntityValues(entityId: "COLOR", values: [{name: "`+name+`"}], publish: $p) { entityId } }`, map[string]any{"p": publish})
		if len(a.Errors) > 0 {
			t.Fatalf("replaceEntityValues: %s", a.raw)
		}
	}

	for _, q := range []string{`{ publishing { on } }`, `{ versions { number } }`, `{ draftDiff { truncated } }`} {
		if a := e.post("runtime", q, nil); strings.Join(a.codes(), ",") != "INSUFFICIENT_SCOPE@" {
			t.Errorf("a runtime token's %s: %s", q, a.raw)
		}
	}
	for _, q := range []string{`mutation { setPublishing(on: true) { on } }`, `mutation { publish { published } }`, `mutation { rollback(version: 1) { number } }`} {
		if a := e.post("preview", q, nil); len(a.Errors) == 0 || a.Data["setPublishing"] != nil {
			t.Errorf("a preview token's %s: %s", q, a.raw)
		}
	}
	if a := e.post("app1", `mutation { publish { published } }`, nil); strings.Join(a.codes(), ",") != "BAD_USER_INPUT@" || !strings.Contains(a.raw, "setPublishing") {
		t.Errorf("publish without publishing: %s", a.raw)
	}
	// Off, every write is live at once, publish or not.
	replace("teal", true)
	if got := values("runtime"); got != `{"values":[{"name":"teal"}]}` {
		t.Fatalf("a write without publishing, as a runtime reads it: %s", got)
	}
	original := values("runtime")

	if got := jsonOf(must(`mutation { setPublishing(on: true) { on live } }`)); got != `{"setPublishing":{"live":1,"on":true}}` {
		t.Errorf("setPublishing: %s", got)
	}
	replace("navy", false)
	if got := values("runtime"); got != original {
		t.Errorf("a runtime reads the draft: %s", got)
	}
	for _, token := range []string{"app1", "preview"} {
		if got := values(token); got != `{"values":[{"name":"navy"}]}` {
			t.Errorf("%s does not read the draft: %s", token, got)
		}
	}
	diff := jsonOf(must(`{ draftDiff { live truncated changes { kind id change liveRevision draftRevision fields { path before after } } } }`))
	if !strings.Contains(diff, `"change":"changed"`) || !strings.Contains(diff, `"id":"COLOR"`) || !strings.Contains(diff, `"kind":"ENTITY"`) ||
		!strings.Contains(diff, `"before":[{"name":"teal"}]`) || !strings.Contains(diff, `"after":[{"name":"navy"}]`) || !strings.Contains(diff, `"live":1`) {
		t.Errorf("draftDiff: %s", diff)
	}

	if got := jsonOf(must(`mutation { publish { published version { number live records } } }`)); got != `{"publish":{"published":true,"version":{"live":true,"number":2,"records":`+recordsOf(t, e)+`}}}` {
		t.Errorf("publish: %s", got)
	}
	if got := values("runtime"); got != `{"values":[{"name":"navy"}]}` {
		t.Errorf("a runtime after publishing: %s", got)
	}
	if got := jsonOf(must(`mutation { publish { published version { number } } }`)); got != `{"publish":{"published":false,"version":{"number":2}}}` {
		t.Errorf("publish of what is live: %s", got)
	}
	if got := jsonOf(must(`{ versions { number live } }`)); got != `{"versions":[{"live":true,"number":2},{"live":false,"number":1}]}` {
		t.Errorf("versions: %s", got)
	}

	if got := jsonOf(must(`mutation { rollback(version: 1) { number live } }`)); got != `{"rollback":{"live":true,"number":1}}` {
		t.Errorf("rollback: %s", got)
	}
	if got := values("runtime"); got != original {
		t.Errorf("a runtime after rolling back: %s", got)
	}
	if a := e.post("app1", `mutation { rollback(version: 9) { number } }`, nil); strings.Join(a.codes(), ",") != "NOT_FOUND@version" {
		t.Errorf("rollback to a version that does not exist: %s", a.raw)
	}

	// A catalogue's write published alone: live at once, with nothing
	// else of the draft.
	must(`mutation { updateIntent(intentId: "OrderStatus", intent: {utterancePatterns: ["draft only"]}) { intentId } }`)
	replace("olive", true)
	if got := values("runtime"); got != `{"values":[{"name":"olive"}]}` {
		t.Errorf("a runtime after a published catalogue write: %s", got)
	}
	if a := e.post("runtime", `{ intent(intentId: "OrderStatus") { utterancePatterns } }`, nil); strings.Contains(a.raw, "draft only") {
		t.Errorf("a catalogue's publish published the rest of the draft: %s", a.raw)
	}

	log := jsonOf(must(`{ auditLog(first: 20) { operation subject } }`))
	for _, want := range []string{`{"operation":"setPublishing","subject":"version/1"}`, `{"operation":"publish","subject":"version/2"}`,
		`{"operation":"rollback","subject":"version/1"}`, `{"operation":"replaceEntityValues","subject":"version/3"}`} {
		if !strings.Contains(log, want) {
			t.Errorf("audit log lacks %s: %s", want, log)
		}
	}

	// Off again: runtimes read the draft.
	must(`mutation { setPublishing(on: false) { on } }`)
	if a := e.post("runtime", `{ intent(intentId: "OrderStatus") { utterancePatterns } }`, nil); !strings.Contains(a.raw, "draft only") {
		t.Errorf("a runtime with publishing off: %s", a.raw)
	}
}

// recordsOf counts the records of app-1, as a version of all of them holds.
func recordsOf(t *testing.T, e *env) string {
	t.Helper()
	n := 0
	for _, k := range content.Kinds() {
		recs, err := e.store.ListRecords(t.Context(), "app-1", k)
		if err != nil {
			t.Fatal(err)
		}
		n += len(recs)
	}
	return jsonOf(n)
}

// TestPublishesBounded: an app makes at most PublishesPerMinute versions
// a minute; a publish that finds nothing to publish is not counted, and
// another app's are its own.
func TestPublishesBounded(t *testing.T) {
	e := newEnv(t, Limits{PublishesPerMinute: 2}, nil)
	post := func(query string) answer {
		t.Helper()
		return e.post("app1", query, nil)
	}
	if a := post(`mutation { setPublishing(on: true) { live } }`); len(a.Errors) > 0 {
		t.Fatal(a.raw)
	}
	if a := post(`mutation { publish { published } }`); jsonOf(a.Data) != `{"publish":{"published":false}}` {
		t.Fatalf("a publish of nothing: %s", a.raw)
	}
	post(`mutation { addEntity(entity: {entityId: "ONE"}) { entityId } }`)
	if a := post(`mutation { publish { published } }`); jsonOf(a.Data) != `{"publish":{"published":true}}` {
		t.Fatalf("the second version: %s", a.raw)
	}
	post(`mutation { addEntity(entity: {entityId: "TWO"}) { entityId } }`)
	a := post(`mutation { publish { published } }`)
	if strings.Join(a.codes(), ",") != "RATE_LIMITED@" || !strings.Contains(a.raw, "GRAPHQL_PUBLISHES_PER_MINUTE") {
		t.Errorf("a third version in a minute: %s", a.raw)
	}
	if a := post(`mutation { rollback(version: 1) { number } }`); strings.Join(a.codes(), ",") != "RATE_LIMITED@" {
		t.Errorf("a rollback past the bound: %s", a.raw)
	}
	if a := post(`{ draftDiff { changes { id } } }`); !strings.Contains(a.raw, `"id":"TWO"`) {
		t.Errorf("the draft after a refused publish: %s", a.raw)
	}
}
