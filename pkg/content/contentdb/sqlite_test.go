package contentdb

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// openSQLite opens a new SQLite file.
func openSQLite(t *testing.T) *DB {
	t.Helper()
	return openDB(t, filepath.Join(t.TempDir(), "content.db"))
}

// TestSQLiteTimesStoredAsText: the contract suite checks times round trip;
// here, their stored form, UTC text with nanoseconds that sorts as it
// reads.
func TestSQLiteTimesStoredAsText(t *testing.T) {
	s := openSQLite(t)
	ctx := t.Context()
	created := time.Date(2025, 6, 1, 20, 0, 0, 0, time.FixedZone("UTC-7", -7*60*60))
	if err := s.CreateOrganization(contenttest.Acting(ctx), tenancy.Organization{ID: "org", Name: "Org", CreatedAt: created}); err != nil {
		t.Fatal(err)
	}
	var stored string
	if err := s.SQL().SQL().QueryRowContext(ctx, `SELECT created_at FROM organizations WHERE id = 'org'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if want := "2025-06-02T03:00:00.000000000Z"; stored != want {
		t.Errorf("stored created_at = %q, want %q", stored, want)
	}
}

func TestSQLiteAppDocDefault(t *testing.T) {
	s := openSQLite(t)
	ctx := t.Context()
	if err := s.CreateOrganization(contenttest.Acting(ctx), tenancy.Organization{ID: "org", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateApp(contenttest.Acting(ctx), tenancy.App{ID: "app", OrganizationID: "org", CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	var doc string
	if err := s.SQL().SQL().QueryRowContext(ctx, `SELECT doc FROM apps WHERE id = 'app'`).Scan(&doc); err != nil {
		t.Fatal(err)
	}
	if doc != "{}" {
		t.Errorf("doc = %q, want {}", doc)
	}
}

// TestSQLiteImportNamesTheRecordItCannotWrite: records go in statements
// of many; one SQLite refuses (a document that is not a JSON object,
// which the content checks would refuse before a store sees it) is named
// by its index, and nothing of the import stays.
func TestSQLiteImportNamesTheRecordItCannotWrite(t *testing.T) {
	s := openSQLite(t)
	ctx := t.Context()
	b := &content.Bundle{
		Organizations: []tenancy.Organization{{ID: "org", Name: "Org"}},
		Apps:          []tenancy.App{{ID: "app", OrganizationID: "org", Name: "App"}},
	}
	for i := range 7 {
		doc := fmt.Sprintf(`{"intentId":"I%d"}`, i)
		if i == 5 {
			doc = `["intentId"]`
		}
		b.Records = append(b.Records, content.Record{AppID: "app", Kind: content.KindIntent, ID: fmt.Sprintf("I%d", i), Doc: []byte(doc)})
	}
	_, err := s.Import(contenttest.Acting(ctx), b, nil)
	var ie *content.ItemError
	if !errors.As(err, &ie) || ie.Section != content.SectionRecords || ie.Index != 5 {
		t.Fatalf("Import = %v; want the error of record 5", err)
	}
	if _, err := s.App(ctx, "app"); !errors.Is(err, content.ErrNotFound) {
		t.Errorf("after the failed import, App = %v; want not found", err)
	}
	// Without the bad record, the same import succeeds and counts each.
	b.Records = append(b.Records[:5], b.Records[6:]...)
	stats, err := s.Import(contenttest.Acting(ctx), b, nil)
	if err != nil || stats.Created != 2+6 {
		t.Fatalf("Import = %+v, %v; want 8 created", stats, err)
	}
}
