package sqlite

import (
	"database/sql"
	"path/filepath"
	"testing"

	sqlitedrv "modernc.org/sqlite"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// TestTokensBeforeScopesKeepWhatTheyCouldDo builds a database as the
// release before token scopes left it, with a token in it, and opens it:
// the token keeps every scope it had in effect, and no more.
func TestTokensBeforeScopesKeepWhatTheyCouldDo(t *testing.T) {
	ctx := t.Context()
	path := databaseAt(t, 2,
		`INSERT INTO organizations (id, name, created_at) VALUES ('org', 'Org', '2026-01-01T00:00:00Z')`,
		`INSERT INTO apps (id, organization_id, name, created_at, updated_at) VALUES ('app', 'org', 'App', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')`,
		`INSERT INTO tokens (id, hash, organization_id, app_id, name, created_at) VALUES ('old', x'01', 'org', 'app', 'web', '2026-01-01T00:00:00Z')`,
	)

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open the database of the release before: %v", err)
	}
	defer s.Close()
	tok, err := s.Token(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	if tok.Scopes != tenancy.LegacyScopes {
		t.Errorf("a token made before scopes has %s, want %s", tok.Scopes, tenancy.LegacyScopes)
	}
	if tok.Scopes.Has(tenancy.EventsRead) {
		t.Error("a token made before scopes may read events back, which it never could")
	}
}

// TestStoredVectorsUpgradeKeepsData builds a database as the release
// before stored vectors left it (migration 3), with an app, a record and a
// token in it, and opens it: migration 4 adds the vectors table, nothing
// else changes, and the app's vectors can be saved and loaded.
func TestStoredVectorsUpgradeKeepsData(t *testing.T) {
	ctx := t.Context()
	path := databaseAt(t, 3,
		`INSERT INTO organizations (id, name, created_at) VALUES ('org', 'Org', '2026-01-01T00:00:00.000000000Z')`,
		`INSERT INTO apps (id, organization_id, name, created_at, updated_at, revision) VALUES ('app', 'org', 'App', '2026-01-01T00:00:00.000000000Z', '2026-01-01T00:00:00.000000000Z', 7)`,
		`INSERT INTO tokens (id, hash, organization_id, app_id, name, scopes, created_at) VALUES ('tok', x'01', 'org', 'app', 'web', 'content:read', '2026-01-01T00:00:00.000000000Z')`,
		`INSERT INTO records (app_id, kind, id, doc, created_at, updated_at) VALUES ('app', 'intent', 'Hours', '{"intentId":"Hours"}', '2026-01-01T00:00:00.000000000Z', '2026-01-01T00:00:00.000000000Z')`,
	)

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open the database of the release before: %v", err)
	}
	defer s.Close()
	if v, err := s.SchemaVersion(ctx); err != nil || v != 4 {
		t.Fatalf("SchemaVersion = %d, %v; want 4", v, err)
	}
	if rev, err := s.Revision(ctx, "app"); err != nil || rev != 7 {
		t.Errorf("revision of the app = %d, %v; want 7 as before", rev, err)
	}
	if tok, err := s.Token(ctx, "tok"); err != nil || tok.Scopes != tenancy.ContentRead || tok.AppID != "app" {
		t.Errorf("token = %+v, %v; want it as before", tok, err)
	}
	if rec, err := s.Record(ctx, "app", content.KindIntent, "Hours"); err != nil || string(rec.Doc) != `{"intentId":"Hours"}` {
		t.Errorf("record = %s, %v; want it as before", rec.Doc, err)
	}
	h := [32]byte{1}
	if err := s.SaveVectors(ctx, "app", "m", map[[32]byte][]float32{h: {1, 2}}); err != nil {
		t.Fatalf("SaveVectors after the upgrade: %v", err)
	}
	if got, err := s.LoadVectors(ctx, "app", "m", [][32]byte{h}); err != nil || len(got[h]) != 2 {
		t.Errorf("LoadVectors after the upgrade = %v, %v", got, err)
	}
}

// databaseAt makes a database file as the release of migration version
// left it, with rows inserted, and returns its path.
func databaseAt(t *testing.T, version int, rows ...string) string {
	t.Helper()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "content.db")
	conn, err := sqlitedrv.NewConnector(dsn(path))
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	for _, m := range migrations() {
		if m.version > version {
			break
		}
		for _, stmt := range append(m.stmts, createMigrationsTable) {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				t.Fatalf("migration %d: %v", m.version, err)
			}
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, '2026-01-01T00:00:00Z')`, m.version); err != nil {
			t.Fatal(err)
		}
	}
	for _, stmt := range rows {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
