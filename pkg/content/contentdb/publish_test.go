package contentdb

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// TestPublishing: an app that publishes keeps its versions apart from its
// draft; publishing, the difference, rolling back, turning publishing off
// and retention, on both engines.
func TestPublishing(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := openDB(t, b.newDB(t))
			withApp(t, s)
			ctx := contenttest.Acting(t.Context())
			create := func(kind content.Kind, id, doc string) {
				t.Helper()
				if _, err := s.CreateRecord(ctx, content.Record{AppID: "app", Kind: kind, ID: id, Doc: json.RawMessage(doc)}); err != nil {
					t.Fatal(err)
				}
			}
			create(content.KindHandler, "H", `{"intentId":"H","name":"first"}`)
			create(content.KindFAQ, "F", `{"id":"F","question":"hours?"}`)

			// Off: nothing to publish or roll back, and the draft is live.
			if _, live, err := s.Live(t.Context(), "app"); err != nil || live != 0 {
				t.Fatalf("live version of an app that does not publish: %d, %v", live, err)
			}
			if _, _, err := s.Publish(ctx, "app"); !errors.Is(err, content.ErrNotPublishing) {
				t.Errorf("publish without publishing: %v", err)
			}
			if _, err := s.Rollback(ctx, "app", 1); !errors.Is(err, content.ErrNotPublishing) {
				t.Errorf("roll back without publishing: %v", err)
			}
			if d, err := s.DraftDiff(t.Context(), "app"); err != nil || d.Live != 0 || len(d.Changes) != 0 {
				t.Errorf("difference without publishing: %+v, %v", d, err)
			}
			if _, err := s.SetPublishing(t.Context(), "app", true); !errors.Is(err, tenancy.ErrNoActor) {
				t.Errorf("publishing turned on without an actor: %v", err)
			}

			// On: the draft becomes version 1, live.
			p, err := s.SetPublishing(ctx, "app", true)
			if err != nil || !p.On || p.Live != 1 {
				t.Fatalf("SetPublishing(on) = %+v, %v", p, err)
			}
			if again, err := s.SetPublishing(ctx, "app", true); err != nil || again != p {
				t.Errorf("SetPublishing(on) again = %+v, %v", again, err)
			}
			draft, err := s.ListRecords(t.Context(), "app", content.KindHandler)
			if err != nil {
				t.Fatal(err)
			}
			v1, err := s.VersionRecords(t.Context(), "app", 1, content.KindHandler)
			if err != nil || len(v1) != 1 || v1[0].ID != "H" || string(v1[0].Doc) != string(draft[0].Doc) ||
				v1[0].Revision != draft[0].Revision || !v1[0].CreatedAt.Equal(draft[0].CreatedAt) || !v1[0].UpdatedAt.Equal(draft[0].UpdatedAt) {
				t.Errorf("version 1's handlers %+v, %v; the draft's %+v", v1, err, draft)
			}

			// Writes change the draft only.
			if _, err := s.UpdateRecord(ctx, "app", content.KindHandler, "H", 0, func(r content.Record) (content.Record, error) {
				r.Doc = json.RawMessage(`{"intentId":"H","name":"second"}`)
				return r, nil
			}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.DeleteRecord(ctx, "app", content.KindFAQ, "F", 0); err != nil {
				t.Fatal(err)
			}
			create(content.KindEntity, "E", `{"entityId":"E"}`)
			if r, err := s.VersionRecord(t.Context(), "app", 1, content.KindHandler, "H"); err != nil || string(r.Doc) != `{"intentId":"H","name":"first"}` {
				t.Errorf("version 1's handler after a write: %s, %v", r.Doc, err)
			}
			if _, err := s.VersionRecord(t.Context(), "app", 1, content.KindFAQ, "F"); err != nil {
				t.Errorf("version 1's FAQ after its deletion from the draft: %v", err)
			}
			if _, err := s.VersionRecord(t.Context(), "app", 1, content.KindEntity, "E"); !errors.Is(err, content.ErrNotFound) {
				t.Errorf("version 1 holds a record created after it: %v", err)
			}
			d, err := s.DraftDiff(t.Context(), "app")
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			for _, c := range d.Changes {
				got += fmt.Sprintf("%s/%s %s", c.Kind, c.ID, c.Change)
				for _, f := range c.Fields {
					got += fmt.Sprintf(" %s:%s>%s", f.Path, f.Before, f.After)
				}
				got += "; "
			}
			if want := `entity/E added entityId:>"E"; faq/F removed id:"F"> question:"hours?">; handler/H changed name:"first">"second"; `; d.Live != 1 || got != want || d.Truncated {
				t.Errorf("difference from version %d:\n got %s\nwant %s", d.Live, got, want)
			}

			// Publish: version 2, counted in its audit entry; again: nothing.
			before, _ := s.Revision(t.Context(), "app")
			v2, published, err := s.Publish(ctx, "app")
			if err != nil || !published || v2.Number != 2 || !v2.Live || v2.Records != 2 || v2.Revision <= before {
				t.Fatalf("Publish = %+v, %v, %v", v2, published, err)
			}
			log, err := s.AuditLog(t.Context(), content.AuditFilter{AppID: "app", Limit: 1})
			if err != nil || len(log) != 1 || log[0].Operation != "publish" || log[0].Subject != "version/2" ||
				log[0].Created != 1 || log[0].Updated != 1 || log[0].Deleted != 1 || log[0].ID != v2.AuditID {
				t.Errorf("publish's audit entry %+v, %v", log, err)
			}
			if same, published, err := s.Publish(ctx, "app"); err != nil || published || same.Number != 2 {
				t.Errorf("Publish of what is live = %+v, %v, %v", same, published, err)
			}
			if d, err := s.DraftDiff(t.Context(), "app"); err != nil || d.Live != 2 || len(d.Changes) != 0 {
				t.Errorf("difference after publishing: %+v, %v", d, err)
			}

			// Roll back to 1: live again, in one step, recorded.
			before, _ = s.Revision(t.Context(), "app")
			back, err := s.Rollback(ctx, "app", 1)
			if err != nil || back.Number != 1 || !back.Live {
				t.Fatalf("Rollback(1) = %+v, %v", back, err)
			}
			if after, _ := s.Revision(t.Context(), "app"); after <= before {
				t.Errorf("a rollback left the revision at %d", after)
			}
			if _, live, _ := s.Live(t.Context(), "app"); live != 1 {
				t.Errorf("live version after rolling back: %d", live)
			}
			if _, err := s.Rollback(ctx, "app", 9); !errors.Is(err, content.ErrNotFound) {
				t.Errorf("roll back to a version that does not exist: %v", err)
			}
			vs, err := s.Versions(t.Context(), "app", 0, 0)
			if err != nil || len(vs) != 2 || vs[0].Number != 2 || vs[0].Live || vs[1].Number != 1 || !vs[1].Live || vs[1].Records != 2 {
				t.Errorf("versions %+v, %v", vs, err)
			}
			if vs, err := s.Versions(t.Context(), "app", 2, 1); err != nil || len(vs) != 1 || vs[0].Number != 1 {
				t.Errorf("versions before 2: %+v, %v", vs, err)
			}

			// Retention keeps what a version names, however old.
			if _, err := s.PruneHistory(t.Context(), time.Now().Add(time.Hour), 1); err != nil {
				t.Fatal(err)
			}
			if r, err := s.VersionRecord(t.Context(), "app", 1, content.KindHandler, "H"); err != nil || string(r.Doc) != `{"intentId":"H","name":"first"}` {
				t.Errorf("version 1's handler after pruning: %s, %v", r.Doc, err)
			}
			if _, err := s.VersionRecord(t.Context(), "app", 1, content.KindFAQ, "F"); err != nil {
				t.Errorf("version 1's FAQ after pruning: %v", err)
			}
			if log, err := s.AuditLog(t.Context(), content.AuditFilter{AppID: "app", Operation: "publish"}); err != nil || len(log) != 1 {
				t.Errorf("publish's audit entry after pruning: %+v, %v", log, err)
			}

			// A catalogue's write published alone: the live version plus
			// that record, not the rest of the draft.
			v3, published, err := s.PublishRecords(ctx, "app", content.KindEntity, []string{"E"}, nil)
			if err != nil || !published || v3.Number != 3 || v3.Records != 3 {
				t.Fatalf("PublishRecords = %+v, %v, %v", v3, published, err)
			}
			if r, err := s.VersionRecord(t.Context(), "app", 3, content.KindHandler, "H"); err != nil || string(r.Doc) != `{"intentId":"H","name":"first"}` {
				t.Errorf("version 3's handler: %s, %v; want version 1's", r.Doc, err)
			}
			if _, err := s.VersionRecord(t.Context(), "app", 3, content.KindEntity, "E"); err != nil {
				t.Errorf("version 3's entity: %v", err)
			}
			if _, err := s.VersionRecord(t.Context(), "app", 3, content.KindFAQ, "F"); err != nil {
				t.Errorf("version 3's FAQ, still live: %v", err)
			}
			if _, _, err := s.PublishRecords(ctx, "app", content.KindEntity, []string{"E"}, []int64{1}); !errors.Is(err, content.ErrStale) {
				t.Errorf("PublishRecords of a revision the record no longer has: %v", err)
			}
			if same, published, err := s.PublishRecords(ctx, "app", content.KindEntity, []string{"E"}, nil); err != nil || published || same.Number != 3 {
				t.Errorf("PublishRecords of what is live = %+v, %v, %v", same, published, err)
			}
			if _, published, err := s.PublishRecords(ctx, "app", content.KindFAQ, []string{"F"}, nil); err != nil || !published {
				t.Errorf("PublishRecords of a record the draft deleted = %v, %v", published, err)
			} else if _, err := s.VersionRecord(t.Context(), "app", 4, content.KindFAQ, "F"); !errors.Is(err, content.ErrNotFound) {
				t.Errorf("version 4 holds the FAQ the draft deleted: %v", err)
			}

			// Off: the draft is read; versions stay.
			if p, err := s.SetPublishing(ctx, "app", false); err != nil || p.On {
				t.Fatalf("SetPublishing(off) = %+v, %v", p, err)
			}
			if _, live, _ := s.Live(t.Context(), "app"); live != 0 {
				t.Errorf("live version after turning publishing off: %d", live)
			}
			if vs, err := s.Versions(t.Context(), "app", 0, 0); err != nil || len(vs) != 4 || vs[0].Live || vs[3].Live {
				t.Errorf("versions after turning publishing off: %+v, %v", vs, err)
			}
			// On again: the draft is a new version.
			if p, err := s.SetPublishing(ctx, "app", true); err != nil || p.Live != 5 {
				t.Errorf("SetPublishing(on) again = %+v, %v", p, err)
			}
			// Past the retention, versions go but the newest and the live
			// one, and the revisions they alone named with them.
			if _, err := s.Rollback(ctx, "app", 3); err != nil {
				t.Fatal(err)
			}
			pruned, err := s.PruneHistory(t.Context(), time.Now().Add(time.Hour), 1)
			if err != nil || pruned.Versions != 3 {
				t.Errorf("PruneHistory = %+v, %v; want 3 versions pruned", pruned, err)
			}
			if vs, err := s.Versions(t.Context(), "app", 0, 0); err != nil || len(vs) != 2 || vs[0].Number != 5 || vs[1].Number != 3 || !vs[1].Live {
				t.Errorf("versions after pruning: %+v, %v", vs, err)
			}
			if _, err := s.VersionRecord(t.Context(), "app", 3, content.KindHandler, "H"); err != nil {
				t.Errorf("the live version's handler after pruning: %v", err)
			}
			if _, err := s.SetPublishing(ctx, "nope", true); !errors.Is(err, content.ErrNotFound) {
				t.Errorf("publishing of an app that does not exist: %v", err)
			}
		})
	}
}

// TestPublishingJustFilled publishes, reads and compares an app of
// 10,000 FAQs right after their import, on both engines: PostgreSQL has
// no statistics of the tables yet, and plans it chose then (nested loops
// over what it believed small) ran past the statement timeout.
func TestPublishingJustFilled(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := openDB(t, b.newDB(t))
			withApp(t, s)
			withFAQsT(t, s)
			ctx := contenttest.Acting(t.Context())
			if _, err := s.UpdateRecord(ctx, "app", content.KindFAQ, "faq-7", 0, func(r content.Record) (content.Record, error) {
				r.Doc = json.RawMessage(`{"answer":"Changed.","id":"faq-7","questions":["Question 7?"]}`)
				return r, nil
			}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.DeleteRecord(ctx, "app", content.KindFAQ, "faq-8", 0); err != nil {
				t.Fatal(err)
			}
			d, err := s.DraftDiff(t.Context(), "app")
			if err != nil || len(d.Changes) != 2 || d.Changes[0].ID != "faq-7" || d.Changes[0].Change != "changed" || d.Changes[1].Change != "removed" {
				t.Fatalf("DraftDiff = %+v, %v", d.Changes, err)
			}
			v, published, err := s.Publish(ctx, "app")
			if err != nil || !published || v.Records != benchFAQs-1 {
				t.Fatalf("Publish = %+v, %v, %v", v, published, err)
			}
			for _, version := range []int64{1, 2} {
				recs, err := s.VersionRecords(t.Context(), "app", version, content.KindFAQ)
				if want := benchFAQs - int(version) + 1; err != nil || len(recs) != want {
					t.Errorf("version %d has %d FAQs, %v; want %d", version, len(recs), err, want)
				}
			}
		})
	}
}
