package graphql

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/tenancy"
)

// TestHistory: a management token reads a record's revisions, the
// difference between two, the app's audit log, and restores a record and
// the whole app; each restore is a new change.
func TestHistory(t *testing.T) {
	e := newEnv(t, Limits{}, nil)
	before := time.Now()
	for _, name := range []string{"Launch two", "Launch three"} {
		if a := e.post("app1", `mutation($n: String) { updateHandler(handlerId: "LaunchRequest", handler: {name: $n}) { revision } }`, map[string]any{"n": name}); len(a.Errors) > 0 {
			t.Fatalf("update: %s", a.raw)
		}
	}
	a := e.post("app1", `{ revisions(kind: HANDLER, id: "LaunchRequest") { kind id revision deleted changedAt auditId document } }`, nil)
	revs, _ := a.Data["revisions"].([]any)
	if len(revs) != 3 {
		t.Fatalf("revisions: %s", a.raw)
	}
	newest, oldest := revs[0].(map[string]any), revs[2].(map[string]any)
	if newest["kind"] != "HANDLER" || newest["document"].(map[string]any)["name"] != "Launch three" || oldest["document"].(map[string]any)["name"] != "Launch" {
		t.Errorf("revisions, newest first: %s", a.raw)
	}
	if a := e.post("app1", `{ revisions(kind: HANDLER, id: "LaunchRequest", first: 1, before: `+fmt.Sprint(newest["revision"])+`) { revision } }`, nil); jsonOf(a.Data) != fmt.Sprintf(`{"revisions":[{"revision":%v}]}`, revs[1].(map[string]any)["revision"]) {
		t.Errorf("the page before the newest: %s", a.raw)
	}
	diff := e.post("app1", fmt.Sprintf(`{ revisionDiff(kind: HANDLER, id: "LaunchRequest", from: %v, to: %v) { path before after } }`, oldest["revision"], newest["revision"]), nil)
	if jsonOf(diff.Data) != `{"revisionDiff":[{"after":"Launch three","before":"Launch","path":"name"}]}` {
		t.Errorf("revisionDiff: %s", diff.raw)
	}
	log := e.post("app1", `{ auditLog(kind: HANDLER, id: "LaunchRequest") { operation subject tokenId localUser updated } }`, nil)
	if entries, _ := log.Data["auditLog"].([]any); len(entries) != 3 || entries[0].(map[string]any)["operation"] != "updateHandler" || entries[0].(map[string]any)["tokenId"] == "" || entries[2].(map[string]any)["operation"] != "import" {
		t.Errorf("auditLog: %s", log.raw)
	}

	// Back to the first state, as a new revision.
	a = e.post("app1", fmt.Sprintf(`mutation { restoreRecord(kind: HANDLER, id: "LaunchRequest", revision: %v, ifRevision: %v) { revision document } }`, oldest["revision"], newest["revision"]), nil)
	restored, _ := a.Data["restoreRecord"].(map[string]any)
	if restored == nil || restored["document"].(map[string]any)["name"] != "Launch" || restored["revision"].(float64) <= newest["revision"].(float64) {
		t.Fatalf("restoreRecord: %s", a.raw)
	}
	if a := e.post("app1", fmt.Sprintf(`mutation { restoreRecord(kind: HANDLER, id: "LaunchRequest", revision: %v, ifRevision: %v) { revision } }`, oldest["revision"], newest["revision"]), nil); a.codes()[0] != "CONFLICT@ifRevision" {
		t.Errorf("a restore from a stale read: %s", a.raw)
	}
	// The whole app, to before the updates; the other app is left alone.
	e.post("app1", `mutation { deleteEntity(entityId: "COLOR") { entityId } }`, nil)
	a = e.post("app1", `mutation($at: String!) { restoreApp(at: $at) { created updated deleted unchanged } }`, map[string]any{"at": before.UTC().Format(time.RFC3339Nano)})
	if jsonOf(a.Data) != `{"restoreApp":{"created":1,"deleted":0,"unchanged":2,"updated":0}}` {
		t.Errorf("restoreApp: %s", a.raw)
	}
	if a := e.post("app1", `{ entity(entityId: "COLOR") { values { name } } handler(intentId: "LaunchRequest") { name } }`, nil); jsonOf(a.Data) != `{"entity":{"values":[{"name":"red"}]},"handler":{"name":"Launch"}}` {
		t.Errorf("after restoreApp: %s", a.raw)
	}
	if a := e.post("app1", `mutation { restoreApp(at: "yesterday") { created } }`, nil); a.codes()[0] != "BAD_USER_INPUT@at" {
		t.Errorf("restoreApp at a bad time: %s", a.raw)
	}
}

// TestHistoryIsForAuthors: a runtime token (content:read, events:write),
// as a web page carries it, reads no history and restores nothing; another
// organization's token gets what it gets for any of the app's records.
func TestHistoryIsForAuthors(t *testing.T) {
	e := newEnv(t, Limits{}, nil)
	e.addToken("runtime", tenancy.RuntimeScopes)
	e.addToken("write", tenancy.ContentWrite|tenancy.ContentRead)
	for _, q := range []string{
		`{ revisions(appId: "app-1", kind: HANDLER, id: "LaunchRequest") { document } }`,
		`{ revisionDiff(appId: "app-1", kind: HANDLER, id: "LaunchRequest", from: 1, to: 2) { path } }`,
		`{ auditLog(appId: "app-1") { tokenId userAgent } }`,
	} {
		if a := e.post("runtime", q, nil); len(a.Errors) != 1 || a.codes()[0] != "INSUFFICIENT_SCOPE@" || strings.Contains(a.raw, "Launch") {
			t.Errorf("runtime token, %.40s: %s", q, a.raw)
		}
		if a := e.post("org2", q, nil); len(a.Errors) != 1 || a.codes()[0] != "FORBIDDEN@appId" || strings.Contains(a.raw, "Launch") {
			t.Errorf("another organization's token, %.40s: %s", q, a.raw)
		}
		if a := e.post("write", q, nil); len(a.Errors) > 0 && a.codes()[0] != "NOT_FOUND@to" {
			t.Errorf("a management token, %.40s: %s", q, a.raw)
		}
	}
	snapshot := e.snapshot()
	for _, m := range []string{
		`mutation { restoreRecord(kind: HANDLER, id: "LaunchRequest", revision: 1) { revision } }`,
		`mutation { restoreApp(at: "2020-01-01T00:00:00Z") { created } }`,
	} {
		if a := e.post("runtime", m, nil); len(a.Errors) != 1 || a.codes()[0] != "INSUFFICIENT_SCOPE@" {
			t.Errorf("runtime token, %.40s: %s", m, a.raw)
		}
	}
	if e.snapshot() != snapshot {
		t.Error("a runtime token changed the app")
	}
}

// TestHistoryReadsChargeWhatTheyHold: revisions hold their documents until
// the answer is written, selected or not. Aliases that select only
// revision numbers of a large record's states are refused once those
// documents pass the answer's bound, instead of holding them all.
func TestHistoryReadsChargeWhatTheyHold(t *testing.T) {
	e := newEnv(t, Limits{MaxAnswerBytes: 1 << 20}, nil)
	big := strings.Repeat("x", 200<<10)
	for i := range 4 {
		if a := e.post("app1", `mutation($n: String) { updateHandler(handlerId: "LaunchRequest", handler: {name: $n}) { revision } }`,
			map[string]any{"n": fmt.Sprint(i, big)}); len(a.Errors) > 0 {
			t.Fatalf("update: %.300s", a.raw)
		}
	}
	// One alias holds 5 states of about 200 KiB: within the bound.
	if a := e.post("app1", `{ a: revisions(kind: HANDLER, id: "LaunchRequest") { revision } }`, nil); len(a.Errors) > 0 {
		t.Fatalf("one alias: %.300s", a.raw)
	}
	a := e.post("app1", `{ a: revisions(kind: HANDLER, id: "LaunchRequest") { revision } b: revisions(kind: HANDLER, id: "LaunchRequest") { revision } }`, nil)
	if len(a.Errors) == 0 || a.codes()[0] != "ANSWER_TOO_LARGE@" {
		t.Errorf("two aliases holding 2 MiB of documents under a 1 MiB answer bound: %.300s", a.raw)
	}
}
