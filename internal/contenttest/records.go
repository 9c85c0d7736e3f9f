package contenttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// rec builds a record from JSON text, failing the test on a problem.
func rec(t *testing.T, kind content.Kind, doc string) content.Record {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("fixture %s: %v", doc, err)
	}
	r, problems := content.ParseRecord(kind, v, "", "")
	if len(problems) > 0 {
		t.Fatalf("fixture %s: %v", doc, problems)
	}
	return r
}

func app(t *testing.T, doc string) tenancy.App {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("fixture %s: %v", doc, err)
	}
	a, problems := content.ParseApp(v, "")
	if len(problems) > 0 {
		t.Fatalf("fixture %s: %v", doc, problems)
	}
	return a
}

// bundle is two organizations, an app in each, and records of every kind.
func bundle(t *testing.T) *content.Bundle {
	return &content.Bundle{
		Organizations: []tenancy.Organization{{ID: "org-a", Name: "A"}, {ID: "org-b", Name: "B"}},
		Apps: []tenancy.App{
			app(t, `{"appId":"app-a","organizationId":"org-a","name":"App A","channels":[{"id":"web","type":"CHAT","key":"key-a"}],"future":{"x":1}}`),
			app(t, `{"appId":"app-b","organizationId":"org-b","name":"App B"}`),
		},
		Records: []content.Record{
			rec(t, content.KindIntent, `{"appId":"app-a","intentId":"Hello","utterancePatterns":["hi","hello"]}`),
			rec(t, content.KindHandler, `{"appId":"app-a","intentId":"Hello","type":"InSessionIntent","content":{"Hello":[{"outputSpeech":"Hi"}]},"custom":[1,2.50,"x"]}`),
			rec(t, content.KindHandler, `{"appId":"app-a","intentId":"Bye","content":{}}`),
			rec(t, content.KindHandler, `{"appId":"app-b","intentId":"Hello","name":"B's hello"}`),
			rec(t, content.KindEntity, `{"appId":"app-a","entityId":"COLOR","values":[{"name":"red","synonyms":["crimson"]}]}`),
			rec(t, content.KindFAQ, `{"appId":"app-a","id":"hours","questions":["When are you open?"],"answer":"9 to 5"}`),
			rec(t, content.KindDocument, `{"appId":"app-a","id":"d1","document":"Text","location":"north"}`),
		},
	}
}

func importOK(t *testing.T, s content.Store, b *content.Bundle) content.ImportStats {
	t.Helper()
	stats, err := s.Import(Acting(context.Background()), b, nil)
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	return stats
}

func testImportAndRead(t *testing.T, s content.Store) {
	ctx := context.Background()
	b := bundle(t)
	if stats := importOK(t, s, b); stats.Created != b.Len() || stats.Updated != 0 || stats.Unchanged != 0 {
		t.Errorf("stats %+v, want %d created", stats, b.Len())
	}
	a, err := s.App(ctx, "app-a")
	must(t, err, "App")
	if a.Name != "App A" || a.OrganizationID != "org-a" || len(a.Channels) != 1 || a.Channels[0].Key != "key-a" {
		t.Errorf("app %+v", a)
	}
	if !jsonEqual(a.Doc, `{"channels":[{"id":"web","type":"CHAT","key":"key-a"}],"future":{"x":1}}`) {
		t.Errorf("app doc %s", a.Doc)
	}
	h, err := s.Record(ctx, "app-a", content.KindHandler, "Hello")
	must(t, err, "Record")
	if !jsonEqual(h.Doc, `{"intentId":"Hello","type":"InSessionIntent","content":{"Hello":[{"outputSpeech":"Hi"}]},"custom":[1,2.50,"x"]}`) {
		t.Errorf("handler doc %s", h.Doc)
	}
	if h.CreatedAt.IsZero() || !h.UpdatedAt.Equal(h.CreatedAt) {
		t.Errorf("times %v %v", h.CreatedAt, h.UpdatedAt)
	}
	list, err := s.ListRecords(ctx, "app-a", content.KindHandler)
	must(t, err, "ListRecords")
	if len(list) != 2 || list[0].ID != "Bye" || list[1].ID != "Hello" {
		t.Errorf("handlers of app-a: %v", recordIDs(list))
	}
	// Records are per app: app-b's Hello is its own.
	hb, err := s.Record(ctx, "app-b", content.KindHandler, "Hello")
	must(t, err, "Record")
	if !jsonEqual(hb.Doc, `{"intentId":"Hello","name":"B's hello"}`) {
		t.Errorf("app-b handler %s", hb.Doc)
	}
	ka, ch, err := s.AppByChannelKey(ctx, "key-a")
	must(t, err, "AppByChannelKey")
	if ka.ID != "app-a" || ch != "web" {
		t.Errorf("AppByChannelKey(key-a) = %s, %s", ka.ID, ch)
	}
	if _, _, err := s.AppByChannelKey(ctx, "nope"); !errors.Is(err, content.ErrNotFound) {
		t.Errorf("AppByChannelKey of an unknown key: %v", err)
	}
	d, err := s.Record(ctx, "app-a", content.KindDocument, "d1")
	must(t, err, "Record")
	if d.Location != "north" {
		t.Errorf("document location %q", d.Location)
	}
	for _, tt := range []struct {
		app  string
		kind content.Kind
		id   string
	}{
		{"app-a", content.KindHandler, "Nope"},
		{"app-b", content.KindHandler, "Bye"},
		{"app-a", content.KindIntent, "Bye"}, // a handler, not an intent
		{"nope", content.KindHandler, "Hello"},
	} {
		if _, err := s.Record(ctx, tt.app, tt.kind, tt.id); !errors.Is(err, content.ErrNotFound) {
			t.Errorf("Record(%s, %s, %s) = %v, want ErrNotFound", tt.app, tt.kind, tt.id, err)
		}
	}
	if _, err := s.Revision(ctx, "nope"); !errors.Is(err, content.ErrNotFound) {
		t.Errorf("Revision of a missing app: %v", err)
	}
}

func testImportIsIdempotent(t *testing.T, s content.Store) {
	ctx := context.Background()
	importOK(t, s, bundle(t))
	revA, err := s.Revision(ctx, "app-a")
	must(t, err, "Revision")
	revB, err := s.Revision(ctx, "app-b")
	must(t, err, "Revision")
	before, err := s.Record(ctx, "app-a", content.KindHandler, "Hello")
	must(t, err, "Record")

	b := bundle(t)
	if stats := importOK(t, s, b); stats.Unchanged != b.Len() || stats.Created+stats.Updated != 0 {
		t.Errorf("second import %+v, want all %d unchanged", stats, b.Len())
	}
	if r, _ := s.Revision(ctx, "app-a"); r != revA {
		t.Errorf("revision of app-a moved from %d to %d on an import that changed nothing", revA, r)
	}
	after, err := s.Record(ctx, "app-a", content.KindHandler, "Hello")
	must(t, err, "Record")
	if !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("updatedAt moved on an unchanged record")
	}

	// One changed record moves its app's revision only.
	b.Records[1] = rec(t, content.KindHandler, `{"appId":"app-a","intentId":"Hello","content":{}}`)
	if stats := importOK(t, s, b); stats.Updated != 1 || stats.Unchanged != b.Len()-1 {
		t.Errorf("third import %+v, want 1 updated", stats)
	}
	if r, _ := s.Revision(ctx, "app-a"); r == revA {
		t.Errorf("revision of app-a did not move when its handler changed")
	}
	if r, _ := s.Revision(ctx, "app-b"); r != revB {
		t.Errorf("revision of app-b moved when only app-a changed")
	}
	changed, err := s.Record(ctx, "app-a", content.KindHandler, "Hello")
	must(t, err, "Record")
	if !jsonEqual(changed.Doc, `{"intentId":"Hello","content":{}}`) || !changed.CreatedAt.Equal(before.CreatedAt) {
		t.Errorf("updated handler %s created %v (was %v)", changed.Doc, changed.CreatedAt, before.CreatedAt)
	}
}

func testImportIsAtomic(t *testing.T, s content.Store) {
	ctx := context.Background()
	b := bundle(t)
	// The last record names an app that exists nowhere.
	b.Records = append(b.Records, rec(t, content.KindIntent, `{"appId":"ghost","intentId":"X"}`))
	_, err := s.Import(Acting(ctx), b, nil)
	var ie *content.ItemError
	if !errors.As(err, &ie) || ie.Section != content.SectionRecords || ie.Index != len(b.Records)-1 {
		t.Fatalf("Import = %v, want an ItemError for records[%d]", err, len(b.Records)-1)
	}
	var p content.Problem
	if !errors.As(err, &p) || p.Path != "appId" {
		t.Errorf("error %v does not name the appId field", err)
	}
	if _, err := s.Organization(ctx, "org-a"); !errors.Is(err, content.ErrNotFound) {
		t.Errorf("a failed import left organization org-a behind: %v", err)
	}
	if _, err := s.App(ctx, "app-a"); !errors.Is(err, content.ErrNotFound) {
		t.Errorf("a failed import left app-a behind: %v", err)
	}
}

func testImportErrors(t *testing.T, s content.Store) {
	ctx := context.Background()
	importOK(t, s, bundle(t))
	for _, tt := range []struct {
		name    string
		b       content.Bundle
		section content.Section
		path    string
	}{
		{"app moving organization", content.Bundle{Apps: []tenancy.App{app(t, `{"appId":"app-a","organizationId":"org-b","name":"A"}`)}},
			content.SectionApps, "organizationId"},
		{"missing organization", content.Bundle{Apps: []tenancy.App{app(t, `{"appId":"app-c","organizationId":"org-z","name":"C"}`)}},
			content.SectionApps, "organizationId"},
		{"channel key of another app", content.Bundle{Apps: []tenancy.App{app(t, `{"appId":"app-b","organizationId":"org-b","name":"B","channels":[{"id":"w"},{"id":"x","key":"key-a"}]}`)}},
			content.SectionApps, "channels[1].key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Import(Acting(ctx), &tt.b, nil)
			var ie *content.ItemError
			var p content.Problem
			if !errors.As(err, &ie) || ie.Section != tt.section || ie.Index != 0 || !errors.As(err, &p) || p.Path != tt.path {
				t.Errorf("Import = %v, want %s[0] with a problem at %s", err, tt.section, tt.path)
			}
		})
	}
	// The failed imports changed nothing.
	a, err := s.App(ctx, "app-b")
	must(t, err, "App")
	if a.OrganizationID != "org-b" || len(a.Channels) != 0 {
		t.Errorf("app-b after failed imports: %+v", a)
	}
}

func testExport(t *testing.T, s content.Store) {
	ctx := context.Background()
	in := bundle(t)
	importOK(t, s, in)
	all, err := s.Export(ctx, content.ExportFilter{})
	must(t, err, "Export")
	if len(all.Organizations) != 2 || len(all.Apps) != 2 || len(all.Records) != len(in.Records) {
		t.Fatalf("export of everything: %d orgs, %d apps, %d records", len(all.Organizations), len(all.Apps), len(all.Records))
	}
	byKey := map[string]content.Record{}
	for _, r := range all.Records {
		byKey[string(r.Kind)+"/"+r.AppID+"/"+r.ID] = r
	}
	for _, r := range in.Records {
		got, ok := byKey[string(r.Kind)+"/"+r.AppID+"/"+r.ID]
		if !ok || !jsonEqual(got.Doc, string(r.Doc)) || got.Location != r.Location {
			t.Errorf("%s %s/%s exported as %s", r.Kind, r.AppID, r.ID, got.Doc)
		}
	}
	one, err := s.Export(ctx, content.ExportFilter{AppID: "app-b"})
	must(t, err, "Export")
	if len(one.Organizations) != 1 || one.Organizations[0].ID != "org-b" || len(one.Apps) != 1 || len(one.Records) != 1 {
		t.Errorf("export of app-b: %+v", one)
	}
}

func recordIDs(rs []content.Record) []string {
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	return ids
}

// jsonEqual compares JSON text by value.
func jsonEqual(got []byte, want string) bool {
	var a, b any
	if json.Unmarshal(got, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func testRecordWrites(t *testing.T, s content.Store) {
	ctx := context.Background()
	importOK(t, s, bundle(t))
	rev0, err := s.Revision(ctx, "app-a")
	must(t, err, "Revision")

	created, err := s.CreateRecord(Acting(ctx), rec(t, content.KindIntent, `{"appId":"app-a","intentId":"New","name":"n"}`))
	must(t, err, "CreateRecord")
	if created.CreatedAt.IsZero() || !created.UpdatedAt.Equal(created.CreatedAt) {
		t.Errorf("created times %v %v", created.CreatedAt, created.UpdatedAt)
	}
	rev1, _ := s.Revision(ctx, "app-a")
	if rev1 == rev0 {
		t.Errorf("CreateRecord did not move the revision")
	}
	got, err := s.Record(ctx, "app-a", content.KindIntent, "New")
	must(t, err, "Record")
	if !jsonEqual(got.Doc, `{"intentId":"New","name":"n"}`) {
		t.Errorf("created doc %s", got.Doc)
	}
	if _, err := s.CreateRecord(Acting(ctx), rec(t, content.KindIntent, `{"appId":"app-a","intentId":"New"}`)); !errors.Is(err, content.ErrConflict) {
		t.Errorf("second CreateRecord = %v, want ErrConflict", err)
	}
	if _, err := s.CreateRecord(Acting(ctx), rec(t, content.KindIntent, `{"appId":"ghost","intentId":"X"}`)); !errors.Is(err, content.ErrNotFound) {
		t.Errorf("CreateRecord for a missing app = %v, want ErrNotFound", err)
	}

	updated, err := s.UpdateRecord(Acting(ctx), "app-a", content.KindIntent, "New", 0, func(cur content.Record) (content.Record, error) {
		if !jsonEqual(cur.Doc, `{"intentId":"New","name":"n"}`) {
			t.Errorf("change saw %s", cur.Doc)
		}
		cur.Doc = []byte(`{"intentId":"New","name":"m"}`)
		return cur, nil
	})
	must(t, err, "UpdateRecord")
	if !updated.CreatedAt.Equal(created.CreatedAt) || updated.UpdatedAt.Before(created.UpdatedAt) {
		t.Errorf("updated times %v %v", updated.CreatedAt, updated.UpdatedAt)
	}
	if rev2, _ := s.Revision(ctx, "app-a"); rev2 == rev1 {
		t.Errorf("UpdateRecord did not move the revision")
	}
	got, _ = s.Record(ctx, "app-a", content.KindIntent, "New")
	if !jsonEqual(got.Doc, `{"intentId":"New","name":"m"}`) {
		t.Errorf("updated doc %s", got.Doc)
	}
	if _, err := s.UpdateRecord(Acting(ctx), "app-a", content.KindIntent, "Nope", 0, func(r content.Record) (content.Record, error) { return r, nil }); !errors.Is(err, content.ErrNotFound) {
		t.Errorf("UpdateRecord of a missing record = %v", err)
	}

	deleted, err := s.DeleteRecord(Acting(ctx), "app-a", content.KindIntent, "New", 0)
	must(t, err, "DeleteRecord")
	if deleted.ID != "New" || !jsonEqual(deleted.Doc, `{"intentId":"New","name":"m"}`) {
		t.Errorf("deleted %+v", deleted)
	}
	if _, err := s.Record(ctx, "app-a", content.KindIntent, "New"); !errors.Is(err, content.ErrNotFound) {
		t.Errorf("record still there after DeleteRecord: %v", err)
	}
	if _, err := s.DeleteRecord(Acting(ctx), "app-a", content.KindIntent, "New", 0); !errors.Is(err, content.ErrNotFound) {
		t.Errorf("second DeleteRecord = %v", err)
	}
	// Another app's record of the same ID is untouched.
	if _, err := s.Record(ctx, "app-b", content.KindHandler, "Hello"); err != nil {
		t.Errorf("app-b's handler: %v", err)
	}
}

func testUpdateIsAtomic(t *testing.T, s content.Store) {
	ctx := context.Background()
	importOK(t, s, bundle(t))
	rev, _ := s.Revision(ctx, "app-a")
	refused := errors.New("refused")
	_, err := s.UpdateRecord(Acting(ctx), "app-a", content.KindEntity, "COLOR", 0, func(cur content.Record) (content.Record, error) {
		return content.Record{}, refused
	})
	if !errors.Is(err, refused) {
		t.Errorf("UpdateRecord = %v, want the change's error", err)
	}
	if r, _ := s.Revision(ctx, "app-a"); r != rev {
		t.Errorf("a refused change moved the revision")
	}
	// Concurrent read-modify-write updates lose nothing: each appends one
	// value to the entity.
	const n = 20
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := s.UpdateRecord(Acting(ctx), "app-a", content.KindEntity, "COLOR", 0, func(cur content.Record) (content.Record, error) {
				var doc map[string]any
				if err := json.Unmarshal(cur.Doc, &doc); err != nil {
					return cur, err
				}
				doc["values"] = append(doc["values"].([]any), map[string]any{"name": "v" + string(rune('a'+i))})
				b, err := json.Marshal(doc)
				cur.Doc = b
				return cur, err
			})
			errs <- err
		}()
	}
	for range n {
		must(t, <-errs, "concurrent UpdateRecord")
	}
	got, err := s.Record(ctx, "app-a", content.KindEntity, "COLOR")
	must(t, err, "Record")
	var doc struct{ Values []any }
	if err := json.Unmarshal(got.Doc, &doc); err != nil || len(doc.Values) != n+1 {
		t.Errorf("after %d concurrent updates the entity has %d values (want %d): %v", n, len(doc.Values), n+1, err)
	}
}

// testHistory: every write keeps the record's new state as a revision
// (a deletion its last one), numbered by the app's revision, under an
// audit entry of who made it; a write from a stale read is refused and
// changes nothing; a write nobody makes is refused.
func testHistory(t *testing.T, s content.Store) {
	ctx := context.Background()
	importOK(t, s, bundle(t))
	w := Acting(tenancy.WithOperation(ctx, "updateHandler"))

	created, err := s.CreateRecord(Acting(ctx), rec(t, content.KindHandler, `{"appId":"app-a","intentId":"H","name":"one"}`))
	must(t, err, "CreateRecord")
	if rev, _ := s.Revision(ctx, "app-a"); created.Revision != rev {
		t.Errorf("created at revision %d, the app is at %d", created.Revision, rev)
	}
	set := func(name string) func(content.Record) (content.Record, error) {
		return func(cur content.Record) (content.Record, error) {
			cur.Doc = []byte(`{"intentId":"H","name":"` + name + `"}`)
			return cur, nil
		}
	}
	updated, err := s.UpdateRecord(w, "app-a", content.KindHandler, "H", created.Revision, set("two"))
	must(t, err, "UpdateRecord from the current revision")
	if updated.Revision <= created.Revision {
		t.Errorf("update made revision %d after %d", updated.Revision, created.Revision)
	}
	got, err := s.Record(ctx, "app-a", content.KindHandler, "H")
	must(t, err, "Record")
	if got.Revision != updated.Revision {
		t.Errorf("read revision %d, the update answered %d", got.Revision, updated.Revision)
	}

	// A write from the first read is stale, whatever it would change.
	_, err = s.UpdateRecord(w, "app-a", content.KindHandler, "H", created.Revision, set("lost"))
	var stale *content.Stale
	if !errors.As(err, &stale) || !errors.Is(err, content.ErrStale) || stale.Current != updated.Revision || stale.Read != created.Revision {
		t.Fatalf("stale update = %v; want a Stale error at revision %d", err, updated.Revision)
	}
	if _, err := s.DeleteRecord(Acting(ctx), "app-a", content.KindHandler, "H", created.Revision); !errors.Is(err, content.ErrStale) {
		t.Fatalf("stale delete = %v; want ErrStale", err)
	}
	if got, _ := s.Record(ctx, "app-a", content.KindHandler, "H"); !jsonEqual(got.Doc, `{"intentId":"H","name":"two"}`) {
		t.Errorf("after refused writes the record is %s", got.Doc)
	}
	// Writing what is there keeps no revision.
	same, err := s.UpdateRecord(w, "app-a", content.KindHandler, "H", 0, set("two"))
	must(t, err, "UpdateRecord to the same")
	if same.Revision != updated.Revision {
		t.Errorf("an update that changed nothing moved the record to revision %d", same.Revision)
	}
	// Nobody makes a change: refused, nothing written.
	if _, err := s.UpdateRecord(ctx, "app-a", content.KindHandler, "H", 0, set("anonymous")); !errors.Is(err, tenancy.ErrNoActor) {
		t.Errorf("update without an actor = %v; want ErrNoActor", err)
	}
	deleted, err := s.DeleteRecord(Acting(ctx), "app-a", content.KindHandler, "H", updated.Revision)
	must(t, err, "DeleteRecord")
	again, err := s.CreateRecord(Acting(ctx), rec(t, content.KindHandler, `{"appId":"app-a","intentId":"H","name":"three"}`))
	must(t, err, "CreateRecord again")

	revs, err := s.Revisions(ctx, "app-a", content.KindHandler, "H", 0, 0)
	must(t, err, "Revisions")
	want := []struct {
		deleted bool
		doc     string
	}{{false, `{"intentId":"H","name":"three"}`}, {true, `{"intentId":"H","name":"two"}`}, {false, `{"intentId":"H","name":"two"}`}, {false, `{"intentId":"H","name":"one"}`}}
	if len(revs) != len(want) {
		t.Fatalf("%d revisions, want %d: %+v", len(revs), len(want), revs)
	}
	for i, w := range want {
		if revs[i].Deleted != w.deleted || !jsonEqual(revs[i].Doc, w.doc) {
			t.Errorf("revision %d = deleted %v %s; want deleted %v %s", i, revs[i].Deleted, revs[i].Doc, w.deleted, w.doc)
		}
		if i > 0 && revs[i].Revision >= revs[i-1].Revision {
			t.Errorf("revisions not newest first: %d after %d", revs[i].Revision, revs[i-1].Revision)
		}
	}
	if revs[0].Revision != again.Revision || revs[2].Revision != updated.Revision || revs[3].Revision != created.Revision || revs[1].Revision <= deleted.Revision {
		t.Errorf("revision numbers %d %d %d %d; writes answered %d, (delete of %d), %d, %d",
			revs[0].Revision, revs[1].Revision, revs[2].Revision, revs[3].Revision, again.Revision, deleted.Revision, updated.Revision, created.Revision)
	}
	page, err := s.Revisions(ctx, "app-a", content.KindHandler, "H", revs[1].Revision, 1)
	must(t, err, "Revisions paged")
	if len(page) != 1 || page[0].Revision != revs[2].Revision {
		t.Errorf("the page before revision %d = %+v; want revision %d alone", revs[1].Revision, page, revs[2].Revision)
	}

	log, err := s.AuditLog(ctx, content.AuditFilter{AppID: "app-a", Kind: content.KindHandler, ID: "H"})
	must(t, err, "AuditLog")
	ops := make([]string, len(log))
	for i, e := range log {
		ops[i] = e.Operation
		if e.Actor.LocalUser != "test" || e.Subject != "handler/H" || e.OrganizationID != "org-a" {
			t.Errorf("entry %d: %+v; want the test user's, of handler/H in org-a", i, e)
		}
	}
	if got, want := strings.Join(ops, " "), "createRecord deleteRecord updateHandler updateHandler createRecord"; got != want {
		t.Errorf("operations on H, newest first: %q, want %q", got, want)
	}
	if log[2].Unchanged != 1 || log[3].Updated != 1 || log[1].Deleted != 1 || log[4].Created != 1 {
		t.Errorf("counts: %+v", log)
	}
	for _, rv := range revs {
		found := false
		for _, e := range log {
			found = found || e.ID == rv.AuditID
		}
		if !found {
			t.Errorf("revision %d names audit entry %d, not among the record's", rv.Revision, rv.AuditID)
		}
	}
	if other, err := s.AuditLog(ctx, content.AuditFilter{AppID: "app-b", Kind: content.KindHandler, ID: "H"}); err != nil || len(other) != 0 {
		t.Errorf("another app's log names H: %+v, %v", other, err)
	}
}

// testImportHistory: an import keeps a revision of each record and app it
// creates or changes, none of those it leaves alone, and one audit entry
// for each app it reaches, with its counts; an import that changes nothing
// of an app leaves its revision where it was.
func testImportHistory(t *testing.T, s content.Store) {
	ctx := context.Background()
	importOK(t, s, bundle(t))
	revA, _ := s.Revision(ctx, "app-a")
	revB, _ := s.Revision(ctx, "app-b")

	b := bundle(t)
	b.Apps[0] = app(t, `{"appId":"app-a","organizationId":"org-a","name":"App A2","channels":[{"id":"web","type":"CHAT","key":"key-a"}],"future":{"x":1}}`)
	b.Records[0] = rec(t, content.KindIntent, `{"appId":"app-a","intentId":"Hello","utterancePatterns":["hey"]}`)
	importOK(t, s, b)
	if rev, _ := s.Revision(ctx, "app-b"); rev != revB {
		t.Errorf("an import that left app-b as it was moved its revision from %d to %d", revB, rev)
	}
	rev, _ := s.Revision(ctx, "app-a")
	if rev <= revA {
		t.Fatalf("app-a changed but stayed at revision %d", rev)
	}
	hello, err := s.Revisions(ctx, "app-a", content.KindIntent, "Hello", 0, 0)
	must(t, err, "Revisions")
	if len(hello) != 2 || hello[0].Revision != rev || !jsonEqual(hello[0].Doc, `{"intentId":"Hello","utterancePatterns":["hey"]}`) {
		t.Errorf("Hello's revisions: %+v; want the import's at %d, then the first", hello, rev)
	}
	if bye, _ := s.Revisions(ctx, "app-a", content.KindHandler, "Bye", 0, 0); len(bye) != 1 {
		t.Errorf("an unchanged record has %d revisions, want its first alone", len(bye))
	}
	apps, err := s.Revisions(ctx, "app-a", content.KindApp, "app-a", 0, 0)
	must(t, err, "Revisions of the app")
	var named struct {
		Name string `json:"name"`
	}
	if len(apps) != 2 || json.Unmarshal(apps[0].Doc, &named) != nil || named.Name != "App A2" || apps[0].Revision != rev {
		t.Errorf("app-a's revisions: %+v; want its new name at %d", apps, rev)
	}
	log, err := s.AuditLog(ctx, content.AuditFilter{AppID: "app-a", Operation: "import", Limit: 1})
	must(t, err, "AuditLog")
	if len(log) != 1 || log[0].Updated != 2 || log[0].Created != 0 || log[0].Unchanged != 5 {
		t.Errorf("the import's entry for app-a: %+v; want 2 updated (app and intent), 5 unchanged", log)
	}
	if log, _ := s.AuditLog(ctx, content.AuditFilter{AppID: "app-b", Operation: "import", Limit: 1}); len(log) != 1 || log[0].Unchanged != 2 {
		t.Errorf("the import's entry for app-b: %+v; want 2 unchanged", log)
	}
	// A record named twice keeps one revision: the state at commit.
	twice := &content.Bundle{Records: []content.Record{
		rec(t, content.KindIntent, `{"appId":"app-a","intentId":"Hello","utterancePatterns":["first"]}`),
		rec(t, content.KindIntent, `{"appId":"app-a","intentId":"Hello","utterancePatterns":["second"]}`),
	}}
	importOK(t, s, twice)
	if hello, _ := s.Revisions(ctx, "app-a", content.KindIntent, "Hello", 0, 0); len(hello) != 3 || !jsonEqual(hello[0].Doc, `{"intentId":"Hello","utterancePatterns":["second"]}`) {
		t.Errorf("after an import naming Hello twice: %d revisions, newest %s; want one more, the second", len(hello), hello[0].Doc)
	}
	// Named twice the same: its revision stays, its current state.
	same := &content.Bundle{Records: []content.Record{
		rec(t, content.KindIntent, `{"appId":"app-a","intentId":"Hello","utterancePatterns":["third"]}`),
		rec(t, content.KindIntent, `{"appId":"app-a","intentId":"Hello","utterancePatterns":["third"]}`),
	}}
	importOK(t, s, same)
	cur, err := s.Record(ctx, "app-a", content.KindIntent, "Hello")
	must(t, err, "Record")
	if hello, _ := s.Revisions(ctx, "app-a", content.KindIntent, "Hello", 0, 1); len(hello) != 1 || hello[0].Revision != cur.Revision || !jsonEqual(hello[0].Doc, string(cur.Doc)) {
		t.Errorf("after an import naming Hello twice the same: newest revision %+v, the record at %d", hello, cur.Revision)
	}
	// Without an actor nothing is imported.
	b.Records[0] = rec(t, content.KindIntent, `{"appId":"app-a","intentId":"Hello","utterancePatterns":["anonymous"]}`)
	if _, err := s.Import(ctx, b, nil); !errors.Is(err, tenancy.ErrNoActor) {
		t.Errorf("import without an actor = %v; want ErrNoActor", err)
	}
}

// testRestore: a record comes back to any of its revisions, also after
// its deletion, and an app to a time, as new changes: history only grows.
func testRestore(t *testing.T, s content.Store) {
	ctx := context.Background()
	w := Acting(ctx)
	importOK(t, s, bundle(t))
	v1, err := s.CreateRecord(w, rec(t, content.KindHandler, `{"appId":"app-a","intentId":"H","name":"one"}`))
	must(t, err, "CreateRecord")
	v2, err := s.UpdateRecord(w, "app-a", content.KindHandler, "H", 0, func(cur content.Record) (content.Record, error) {
		cur.Doc = []byte(`{"intentId":"H","name":"two"}`)
		return cur, nil
	})
	must(t, err, "UpdateRecord")
	_, err = s.DeleteRecord(w, "app-a", content.KindHandler, "H", 0)
	must(t, err, "DeleteRecord")

	if _, err := s.RestoreRecord(w, "app-a", content.KindHandler, "H", v2.Revision+1000, 0); !errors.Is(err, content.ErrNotFound) {
		t.Errorf("restore to a revision H never had = %v; want ErrNotFound", err)
	}
	if _, err := s.RestoreRecord(w, "app-a", content.KindHandler, "H", v1.Revision, v2.Revision); !errors.Is(err, content.ErrStale) {
		t.Errorf("restore from a stale read of the deleted record = %v; want ErrStale", err)
	}
	// A deleted record is at its deletion's revision.
	deletion, err := s.Revisions(ctx, "app-a", content.KindHandler, "H", 0, 1)
	must(t, err, "Revisions")
	back, err := s.RestoreRecord(w, "app-a", content.KindHandler, "H", v1.Revision, deletion[0].Revision)
	must(t, err, "RestoreRecord from the deletion's revision")
	got, err := s.Record(ctx, "app-a", content.KindHandler, "H")
	must(t, err, "Record after the restore")
	if !jsonEqual(got.Doc, `{"intentId":"H","name":"one"}`) || got.Revision != back.Revision || back.Revision <= v2.Revision {
		t.Errorf("restored %s at %d (answered %d); want the first state at a new revision", got.Doc, got.Revision, back.Revision)
	}
	revs, _ := s.Revisions(ctx, "app-a", content.KindHandler, "H", 0, 0)
	if len(revs) != 4 {
		t.Errorf("H has %d revisions after create, update, delete and restore; want 4", len(revs))
	}
	if log, _ := s.AuditLog(ctx, content.AuditFilter{AppID: "app-a", Kind: content.KindHandler, ID: "H", Limit: 1}); len(log) != 1 || log[0].Operation != "restoreRecord" || log[0].Created != 1 {
		t.Errorf("the restore's entry: %+v", log)
	}
	// To the deletion: deleted again.
	if _, err := s.RestoreRecord(w, "app-a", content.KindHandler, "H", revs[1].Revision, 0); err != nil {
		t.Fatalf("restore to the deletion: %v", err)
	}
	if _, err := s.Record(ctx, "app-a", content.KindHandler, "H"); !errors.Is(err, content.ErrNotFound) {
		t.Errorf("after a restore to its deletion H reads %v; want ErrNotFound", err)
	}

	// The whole app, to a time: a catalogue refresh, a new record, a
	// deletion and a new name are undone; the other app is left alone.
	at := time.Now()
	before, err := s.Export(ctx, content.ExportFilter{AppID: "app-a"})
	must(t, err, "Export")
	_, err = s.UpdateRecord(w, "app-a", content.KindEntity, "COLOR", 0, func(cur content.Record) (content.Record, error) {
		cur.Doc = []byte(`{"entityId":"COLOR","values":[{"name":"x"},{"name":"y"},{"name":"z"}]}`)
		return cur, nil
	})
	must(t, err, "UpdateRecord COLOR")
	_, err = s.CreateRecord(w, rec(t, content.KindIntent, `{"appId":"app-a","intentId":"Later"}`))
	must(t, err, "CreateRecord Later")
	_, err = s.DeleteRecord(w, "app-a", content.KindFAQ, "hours", 0)
	must(t, err, "DeleteRecord hours")
	renamed := bundle(t)
	renamed.Records = nil
	renamed.Apps = renamed.Apps[:1]
	renamed.Apps[0].Name = "Renamed"
	importOK(t, s, renamed)
	revB, _ := s.Revision(ctx, "app-b")

	stats, err := s.RestoreApp(w, "app-a", at, true)
	must(t, err, "RestoreApp")
	if stats.Updated != 2 || stats.Created != 1 || stats.Deleted != 1 {
		t.Errorf("RestoreApp = %+v; want COLOR and the app updated, hours created, Later deleted", stats)
	}
	after, err := s.Export(ctx, content.ExportFilter{AppID: "app-a"})
	must(t, err, "Export")
	if len(after.Records) != len(before.Records) || after.Apps[0].Name != before.Apps[0].Name {
		t.Fatalf("after the restore app-a has %d records named %q; before, %d named %q", len(after.Records), after.Apps[0].Name, len(before.Records), before.Apps[0].Name)
	}
	for i := range before.Records {
		if b, a := before.Records[i], after.Records[i]; b.Kind != a.Kind || b.ID != a.ID || !jsonEqual(b.Doc, string(a.Doc)) {
			t.Errorf("record %d: %s %s %s, before %s %s %s", i, a.Kind, a.ID, a.Doc, b.Kind, b.ID, b.Doc)
		}
	}
	if rev, _ := s.Revision(ctx, "app-b"); rev != revB {
		t.Errorf("restoring app-a moved app-b's revision")
	}
	if log, _ := s.AuditLog(ctx, content.AuditFilter{AppID: "app-a", Limit: 1}); len(log) != 1 || log[0].Operation != "restoreApp" || log[0].Deleted != 1 {
		t.Errorf("the restore's entry: %+v", log)
	}
	// Without the app's fields, its name stays as it is now.
	importOK(t, s, renamed)
	if _, err := s.RestoreApp(w, "app-a", at, false); err != nil {
		t.Fatalf("RestoreApp without the app's fields: %v", err)
	}
	if a, _ := s.App(ctx, "app-a"); a.Name != "Renamed" {
		t.Errorf("a restore of the records alone renamed the app %q", a.Name)
	}
	if _, err := s.RestoreApp(w, "app-a", time.Unix(0, 0), true); err == nil {
		t.Error("restoring an app to before it existed did not fail")
	}
	if _, err := s.RestoreApp(w, "nope", at, true); !errors.Is(err, content.ErrNotFound) {
		t.Errorf("restoring an unknown app = %v; want ErrNotFound", err)
	}
}

// testPruneHistory: retention removes revisions older than the cutoff but
// each record's newest few, and the audit entries no kept revision names.
func testPruneHistory(t *testing.T, s content.Store) {
	ctx := context.Background()
	w := Acting(ctx)
	importOK(t, s, bundle(t))
	for i := range 4 {
		_, err := s.UpdateRecord(w, "app-a", content.KindHandler, "Bye", 0, func(cur content.Record) (content.Record, error) {
			cur.Doc = []byte(fmt.Sprintf(`{"intentId":"Bye","n":%d}`, i))
			return cur, nil
		})
		must(t, err, "UpdateRecord")
	}
	all, _ := s.Revisions(ctx, "app-a", content.KindHandler, "Bye", 0, 0)
	if got, err := s.PruneHistory(ctx, time.Now().Add(-time.Hour), 1); err != nil || got != (content.Pruned{}) {
		t.Errorf("pruning before everything = %+v, %v; want nothing pruned", got, err)
	}
	got, err := s.PruneHistory(ctx, time.Now().Add(time.Second), 2)
	must(t, err, "PruneHistory")
	if got.Revisions != 3 || got.Entries < 3 {
		t.Errorf("pruned %+v; want Bye's 3 oldest revisions and at least their 3 entries", got)
	}
	kept, _ := s.Revisions(ctx, "app-a", content.KindHandler, "Bye", 0, 0)
	if len(kept) != 2 || kept[0].Revision != all[0].Revision || kept[1].Revision != all[1].Revision {
		t.Errorf("Bye kept %+v; want its 2 newest of %d", kept, len(all))
	}
	if hello, _ := s.Revisions(ctx, "app-a", content.KindHandler, "Hello", 0, 0); len(hello) != 1 {
		t.Errorf("Hello kept %d revisions; want its only one, its current state", len(hello))
	}
	log, err := s.AuditLog(ctx, content.AuditFilter{AppID: "app-a"})
	must(t, err, "AuditLog")
	named := map[int64]bool{}
	for _, e := range log {
		named[e.ID] = true
	}
	for _, k := range kept {
		if !named[k.AuditID] {
			t.Errorf("kept revision %d names audit entry %d, which was pruned", k.Revision, k.AuditID)
		}
	}
	if len(log) != 3 {
		t.Errorf("app-a's log kept %d entries; want the import's and the two updates' that kept revisions name", len(log))
	}
	// Its states before the cutoff are gone: restoring to one is refused,
	// rather than deleting what has no state there.
	var problem content.Problem
	if _, err := s.RestoreApp(w, "app-a", time.Now().Add(-time.Minute), true); !errors.As(err, &problem) || problem.Path != "at" {
		t.Errorf("restoring to before the pruned history = %v; want a problem with at", err)
	}
	if got, err := s.RestoreApp(w, "app-a", time.Now().Add(2*time.Second), true); err != nil || got.Deleted != 0 || got.Updated != 0 {
		t.Errorf("restoring to after the cutoff = %+v, %v; want nothing to change", got, err)
	}
}

// testRevisionPagesBounded: a page of revisions ends once its documents
// reach MaxHistoryBytes, however many were asked for; the next page goes
// on from its last.
func testRevisionPagesBounded(t *testing.T, s content.Store) {
	ctx := context.Background()
	w := Acting(ctx)
	importOK(t, s, bundle(t))
	big := func(i int) []byte {
		return fmt.Appendf(nil, `{"intentId":"Big","note":"%d %s"}`, i, strings.Repeat("x", content.MaxHistoryBytes/3))
	}
	_, err := s.CreateRecord(w, content.Record{AppID: "app-a", Kind: content.KindHandler, ID: "Big", Doc: big(0)})
	must(t, err, "CreateRecord")
	for i := 1; i < 5; i++ {
		_, err := s.UpdateRecord(w, "app-a", content.KindHandler, "Big", 0, func(r content.Record) (content.Record, error) {
			r.Doc = big(i)
			return r, nil
		})
		must(t, err, "UpdateRecord")
	}
	first, err := s.Revisions(ctx, "app-a", content.KindHandler, "Big", 0, 10)
	must(t, err, "Revisions")
	if len(first) != 3 {
		t.Fatalf("a page of 10 revisions of %d bytes each held %d; want 3, ending at %d bytes", content.MaxHistoryBytes/3, len(first), content.MaxHistoryBytes)
	}
	rest, err := s.Revisions(ctx, "app-a", content.KindHandler, "Big", first[2].Revision, 10)
	must(t, err, "Revisions, next page")
	if len(rest) != 2 || rest[1].Revision >= rest[0].Revision || rest[0].Revision >= first[2].Revision {
		t.Errorf("the next page: %d revisions; want the other 2, older", len(rest))
	}
}
