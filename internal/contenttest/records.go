package contenttest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

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
	stats, err := s.Import(context.Background(), b, nil)
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
	_, err := s.Import(ctx, b, nil)
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
			_, err := s.Import(ctx, &tt.b, nil)
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

	created, err := s.CreateRecord(ctx, rec(t, content.KindIntent, `{"appId":"app-a","intentId":"New","name":"n"}`))
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
	if _, err := s.CreateRecord(ctx, rec(t, content.KindIntent, `{"appId":"app-a","intentId":"New"}`)); !errors.Is(err, content.ErrConflict) {
		t.Errorf("second CreateRecord = %v, want ErrConflict", err)
	}
	if _, err := s.CreateRecord(ctx, rec(t, content.KindIntent, `{"appId":"ghost","intentId":"X"}`)); !errors.Is(err, content.ErrNotFound) {
		t.Errorf("CreateRecord for a missing app = %v, want ErrNotFound", err)
	}

	updated, err := s.UpdateRecord(ctx, "app-a", content.KindIntent, "New", func(cur content.Record) (content.Record, error) {
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
	if _, err := s.UpdateRecord(ctx, "app-a", content.KindIntent, "Nope", func(r content.Record) (content.Record, error) { return r, nil }); !errors.Is(err, content.ErrNotFound) {
		t.Errorf("UpdateRecord of a missing record = %v", err)
	}

	deleted, err := s.DeleteRecord(ctx, "app-a", content.KindIntent, "New")
	must(t, err, "DeleteRecord")
	if deleted.ID != "New" || !jsonEqual(deleted.Doc, `{"intentId":"New","name":"m"}`) {
		t.Errorf("deleted %+v", deleted)
	}
	if _, err := s.Record(ctx, "app-a", content.KindIntent, "New"); !errors.Is(err, content.ErrNotFound) {
		t.Errorf("record still there after DeleteRecord: %v", err)
	}
	if _, err := s.DeleteRecord(ctx, "app-a", content.KindIntent, "New"); !errors.Is(err, content.ErrNotFound) {
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
	_, err := s.UpdateRecord(ctx, "app-a", content.KindEntity, "COLOR", func(cur content.Record) (content.Record, error) {
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
			_, err := s.UpdateRecord(ctx, "app-a", content.KindEntity, "COLOR", func(cur content.Record) (content.Record, error) {
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
