package contentapi

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// TestPublishedReads: of an app that publishes, runtime tokens read the
// live version through every route (records, FAQ, search), preview and
// management tokens the draft; a publish and a rollback change what
// runtimes read at once when announced, and their ETags with it.
func TestPublishedReads(t *testing.T) {
	e := newEnvWith(t, fixtureBundle, map[string]tenancy.Token{
		"app1":    {OrganizationID: "org-1", AppID: "app-1"},
		"runtime": {OrganizationID: "org-1", AppID: "app-1", Scopes: tenancy.RuntimeScopes},
		"preview": {OrganizationID: "org-1", AppID: "app-1", Scopes: tenancy.PreviewScopes},
	}, ServiceConfig{})
	ctx := contenttest.Acting(t.Context())
	announce := func() { e.svc.API().Invalidate("app-1") }
	handler := func(token string) (name, etag string) {
		t.Helper()
		r := e.get("/cms/handler/LaunchRequest", token)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", token, r.status, r.body)
		}
		var got struct {
			Handler struct{ Name string } `json:"handler"`
		}
		if err := json.Unmarshal([]byte(r.body), &got); err != nil {
			t.Fatal(err)
		}
		return got.Handler.Name, r.header.Get("ETag")
	}
	faq := func(token string) string {
		t.Helper()
		r := e.get("/cms/faq/query?question=when+do+you+open", token)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", token, r.status, r.body)
		}
		return r.body
	}
	search := func(token string) string {
		t.Helper()
		return e.get("/cms/search?question=tandem+hire", token).body
	}
	suggest := func(token string) string {
		t.Helper()
		return e.get("/cms/suggestions?key=k1&queryText=do+you+hire&type=FAQ", token).body
	}
	// Search indexes are rebuilt in the background when the revision
	// moves, the last one answering meanwhile: what they answer is awaited.
	await := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10 s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, token := range []string{"runtime", "preview"} { // warm every cache
		handler(token)
		faq(token)
		search(token)
		suggest(token)
	}

	if _, err := e.store.SetPublishing(ctx, "app-1", true); err != nil {
		t.Fatal(err)
	}
	announce()
	if _, err := e.store.UpdateRecord(ctx, "app-1", content.KindHandler, "LaunchRequest", 0, func(r content.Record) (content.Record, error) {
		r.Doc = json.RawMessage(strings.Replace(string(r.Doc), `"name":"Launch"`, `"name":"Welcome"`, 1))
		return r, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.UpdateRecord(ctx, "app-1", content.KindFAQ, "hours", 0, func(r content.Record) (content.Record, error) {
		r.Doc = json.RawMessage(strings.Replace(string(r.Doc), `At nine on weekdays.`, `At ten from Monday.`, 1))
		return r, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.CreateRecord(ctx, content.Record{AppID: "app-1", Kind: content.KindDocument, ID: "tandem",
		Doc: json.RawMessage(`{"document":"Tandem hire costs forty a day.","id":"tandem","title":"Tandem hire"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.CreateRecord(ctx, content.Record{AppID: "app-1", Kind: content.KindFAQ, ID: "tandems",
		Doc: json.RawMessage(`{"answer":"Yes, by the day.","id":"tandems","questions":["Do you hire tandems?"]}`)}); err != nil {
		t.Fatal(err)
	}
	announce()
	for _, token := range []string{"preview", "app1"} {
		await(token+" reads the draft's FAQ", func() bool { return strings.Contains(faq(token), "At ten from Monday.") })
		if !strings.Contains(suggest(token), "Do you hire tandems?") {
			t.Errorf("%s is not suggested the draft's FAQ: %s", token, suggest(token))
		}
	}
	if strings.Contains(suggest("runtime"), "tandems") {
		t.Errorf("a runtime is suggested the draft's FAQ: %s", suggest("runtime"))
	}

	liveName, liveTag := handler("runtime")
	if liveName != "Launch" || !strings.Contains(faq("runtime"), "At nine on weekdays.") || strings.Contains(search("runtime"), "Tandem hire costs") {
		t.Errorf("a runtime reads the draft: handler %q, faq %s, search %s", liveName, faq("runtime"), search("runtime"))
	}
	for _, token := range []string{"preview", "app1"} {
		if name, _ := handler(token); name != "Welcome" || !strings.Contains(faq(token), "At ten from Monday.") || !strings.Contains(search(token), "Tandem hire costs") {
			t.Errorf("%s does not read the draft: handler %q, faq %s, search %s", token, name, faq(token), search(token))
		}
	}

	if _, _, err := e.store.Publish(ctx, "app-1"); err != nil {
		t.Fatal(err)
	}
	announce()
	await("a runtime reads the published FAQ", func() bool { return strings.Contains(faq("runtime"), "At ten from Monday.") })
	name, tag := handler("runtime")
	if name != "Welcome" || tag == liveTag || !strings.Contains(faq("runtime"), "At ten from Monday.") || !strings.Contains(search("runtime"), "Tandem hire costs") {
		t.Errorf("a runtime after publishing: handler %q (ETag %s, before %s), faq %s, search %s", name, tag, liveTag, faq("runtime"), search("runtime"))
	}
	if r := e.get("/cms/handler/LaunchRequest", "runtime", "If-None-Match", liveTag); r.status != 200 {
		t.Errorf("the ETag of the version before matched after publishing: %d", r.status)
	}

	if _, err := e.store.Rollback(ctx, "app-1", 1); err != nil {
		t.Fatal(err)
	}
	announce()
	await("a runtime reads the FAQ rolled back to", func() bool { return strings.Contains(faq("runtime"), "At nine on weekdays.") })
	if name, tag := handler("runtime"); name != "Launch" || tag != liveTag || !strings.Contains(faq("runtime"), "At nine on weekdays.") || strings.Contains(search("runtime"), "Tandem hire costs") {
		t.Errorf("a runtime after rolling back: handler %q (ETag %s, want %s), faq %s", name, tag, liveTag, faq("runtime"))
	}
	if name, _ := handler("preview"); name != "Welcome" {
		t.Errorf("a rollback changed the draft: %q", name)
	}
	// A record the live version lacks is not found by runtimes.
	if r := e.get("/cms/handler/NoSuch", "runtime"); r.status != 404 {
		t.Errorf("a missing handler: %d", r.status)
	}
}
