package contentdb

import (
	"path/filepath"
	"testing"
	"time"

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
	if err := s.CreateOrganization(ctx, tenancy.Organization{ID: "org", Name: "Org", CreatedAt: created}); err != nil {
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
	if err := s.CreateOrganization(ctx, tenancy.Organization{ID: "org", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateApp(ctx, tenancy.App{ID: "app", OrganizationID: "org", CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
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
